import copyRowsWgsl from '../../../../shaders/copy-rows.wgsl';
import type { Context } from '../context';
import { cachedKernel } from '../kernel-cache';
import { ShapeError } from '../errors';
import { grid1d } from '../grid';
import type { DeviceTensor } from '../tensor';

/**
 * Copy `rows` rows per batch from `src` [batch, srcRows, ...rowShape] starting at row `srcOffset` into `dst`
 * [batch, dstRows, ...rowShape] starting at `dstOffset` (f32). Used for KV caches.
 */
export function copyRows(
  ctx: Context,
  src: DeviceTensor,
  dst: DeviceTensor,
  rows: number,
  srcOffset = 0,
  dstOffset = 0,
): void {
  const [b, sr, ...rs] = src.shape;
  const [b2, dr, ...rd] = dst.shape;
  const rowLen = rs.reduce((a, x) => a * x, 1);
  if (b !== b2 || rs.length !== rd.length || rs.some((x, i) => x !== rd[i]) || dst.dtype !== 'f32')
    throw new ShapeError(`copyRows: [${src.shape.join(', ')}] into f32 [${dst.shape.join(', ')}]`);
  if (srcOffset + rows > sr! || dstOffset + rows > dr!)
    throw new ShapeError(`copyRows: rows ${srcOffset}..${srcOffset + rows} -> ${dstOffset}..${dstOffset + rows} out of range`);
  const k = cachedKernel(ctx, `copy_rows:${src.dtype}`, () => ({
    name: 'copy_rows',
    code: copyRowsWgsl,
    bindings: [
      { name: 'src', access: 'read', dtype: src.dtype },
      { name: 'dst', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:batch', 'u32:rows', 'u32:row_len', 'u32:src_rows', 'u32:dst_rows', 'u32:src_off', 'u32:dst_off', 'u32:row'],
  }));
  const { wg, row } = grid1d(b! * rows * rowLen, 256);
  ctx.dispatch(k, [src.buffer, dst.buffer], wg, [b!, rows, rowLen, sr!, dr!, srcOffset, dstOffset, row]);
}
