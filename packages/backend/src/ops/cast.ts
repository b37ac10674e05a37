import castWgsl from '../../../../shaders/cast.wgsl';
import type { Context } from '../context';
import { cachedKernel } from '../kernel-cache';
import type { DType } from '../dtype';
import { ShapeError } from '../errors';
import { grid1d } from '../grid';
import { empty, numel, type DeviceTensor } from '../tensor';

const FLOATS: DType[] = ['f32', 'f16', 'bf16'];

/** Convert a float tensor to another float storage dtype (exact where representable, else RNE). */
export function cast(ctx: Context, x: DeviceTensor, dtype: DType, out?: DeviceTensor): DeviceTensor {
  if (!FLOATS.includes(x.dtype) || !FLOATS.includes(dtype))
    throw new ShapeError(`cast supports f32, f16 and bf16, not ${x.dtype} -> ${dtype}`);
  const y = out ?? empty(ctx, x.shape, dtype);
  const n = numel(x.shape);
  const kind = dtype === 'f32' ? 0 : dtype === 'f16' ? 1 : 2;
  const k = cachedKernel(ctx, `cast:${x.dtype}:${kind}`, () => ({
    name: 'cast',
    code: castWgsl,
    bindings: [
      { name: 'src', access: 'read', dtype: x.dtype },
      { name: 'dst', access: 'rw', dtype: 'u32' },
    ],
    params: ['u32:n', 'u32:row'],
    constants: { DST_KIND: kind },
  }));
  const { wg, row } = grid1d(kind === 0 ? n : Math.ceil(n / 2), 256);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [n, row]);
  return y;
}
