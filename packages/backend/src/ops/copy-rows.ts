import copyRowsWgsl from '../../../../shaders/copy-rows.wgsl';
import type { Context } from '../context';
import { sameShape } from '../checks';
import { cachedKernel } from '../kernel-cache';
import { ShapeError } from '../errors';
import { grid1d } from '../grid';
import { ioBindings } from '../kernel';
import type { DeviceTensor } from '../tensor';

/** A second source and destination for {@link copyRows}, of the first pair's shapes. */
export interface CopyRowsPair {
  src: DeviceTensor;
  dst: DeviceTensor;
}

/**
 * Copy `rows` rows per batch from `src` [batch, srcRows, ...rowShape] starting at row `srcOffset` into `dst`
 * [batch, dstRows, ...rowShape] starting at `dstOffset` (f32). With `also`, the same rows of a second pair of
 * tensors of the same shapes in the same dispatch (a step's keys and values into a KV cache).
 */
export function copyRows(
  ctx: Context,
  src: DeviceTensor,
  dst: DeviceTensor,
  rows: number,
  srcOffset = 0,
  dstOffset = 0,
  also?: CopyRowsPair,
): void {
  const [b, sr, ...rs] = src.shape;
  const [b2, dr, ...rd] = dst.shape;
  const rowLen = rs.reduce((a, x) => a * x, 1);
  if (b !== b2 || rs.length !== rd.length || rs.some((x, i) => x !== rd[i]) || dst.dtype !== 'f32')
    throw new ShapeError(`copyRows: [${src.shape.join(', ')}] into f32 [${dst.shape.join(', ')}]`);
  if (srcOffset + rows > sr! || dstOffset + rows > dr!)
    throw new ShapeError(`copyRows: rows ${srcOffset}..${srcOffset + rows} -> ${dstOffset}..${dstOffset + rows} out of range`);
  if (also && (!sameShape(also.src.shape, src.shape) || !sameShape(also.dst.shape, dst.shape) || also.dst.dtype !== 'f32'))
    throw new ShapeError(`copyRows: the second pair [${also.src.shape.join(', ')}] into ${also.dst.dtype} [${also.dst.shape.join(', ')}] is not of the first's shapes`);
  const pairs = also ? 2 : 1;
  const key = `copy_rows:${src.dtype}${also ? `:${also.src.dtype}` : ''}`;
  const k = cachedKernel(ctx, key, () => ({
    name: 'copy_rows',
    code:
      (also
        ? 'fn copy_at(q: u32, si: u32, di: u32) { if (q == 0u) { dst[di] = read_src(si); } else { dst2[di] = read_src2(si); } }\n'
        : 'fn copy_at(q: u32, si: u32, di: u32) { dst[di] = read_src(si); }\n') + copyRowsWgsl,
    bindings: [...ioBindings(src.dtype, 'f32', ['src', 'dst']), ...(also ? ioBindings(also.src.dtype, 'f32', ['src2', 'dst2']) : [])],
    params: ['u32:batch', 'u32:rows', 'u32:row_len', 'u32:src_rows', 'u32:dst_rows', 'u32:src_off', 'u32:dst_off', 'u32:row'],
    consts: { PAIRS: pairs },
  }));
  const { wg, row } = grid1d(pairs * b! * rows * rowLen, 256);
  const buffers = also ? [src.buffer, dst.buffer, also.src.buffer, also.dst.buffer] : [src.buffer, dst.buffer];
  ctx.dispatch(k, buffers, wg, [b!, rows, rowLen, sr!, dr!, srcOffset, dstOffset, row]);
}
