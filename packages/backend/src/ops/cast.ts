import castWgsl from '../../../../shaders/cast.wgsl';
import type { Context } from '../context';
import { cachedKernel } from '../kernel-cache';
import { floatNames, isFloat, type DType } from '../dtype';
import { ShapeError } from '../errors';
import { formatOf } from '../format';
import { dispatch1d } from '../grid';
import { ioBindings, wgslPacker } from '../kernel';
import { empty, numel, type DeviceTensor } from '../tensor';

/** Convert a float tensor to another float storage dtype (exact where representable, else RNE). */
export function cast(ctx: Context, x: DeviceTensor, dtype: DType, out?: DeviceTensor): DeviceTensor {
  if (!isFloat(x.dtype) || !isFloat(dtype)) throw new ShapeError(`cast supports ${floatNames()}, not ${x.dtype} -> ${dtype}`);
  const y = out ?? empty(ctx, x.shape, dtype);
  const n = numel(x.shape);
  const k = cachedKernel(ctx, `cast:${x.dtype}:${dtype}`, () => ({
    name: 'cast',
    code: wgslPacker('dst', dtype) + castWgsl,
    bindings: ioBindings(x.dtype, 'u32', ['src', 'dst']),
    params: ['u32:n', 'u32:row'],
  }));
  dispatch1d(ctx, k, [x.buffer, y.buffer], n, [], Math.ceil(n / formatOf(dtype).perWord));
  return y;
}
