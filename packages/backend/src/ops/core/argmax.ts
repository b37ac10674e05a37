import argmaxWgsl from '../../../../../shaders/argmax.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import { ioBindings } from '../../kernel';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { assertFloat, cachedKernel, checkOut, fmtShape } from './util';

/** Options of {@link argmax}. */
export interface ArgmaxOptions {
  /** Write into this i32 tensor of the result's shape. */
  out?: DeviceTensor;
}

/**
 * Index of the largest element along the last axis: x [..., V] (f32 / f16 / bf16) -> i32 [...]. Equal maxima give
 * the first index, NaN elements are passed over, and a row whose first element is NaN gives 0: the token a
 * left-to-right scan picks (greedy decoding's `sampleToken`), so that the result can feed the next step's
 * embedding without a read-back.
 */
export function argmax(ctx: Context, x: DeviceTensor, opts: ArgmaxOptions = {}): DeviceTensor {
  assertFloat(x, 'argmax');
  const V = x.shape[x.shape.length - 1];
  if (V === undefined || V < 1) throw new ShapeError(`argmax: ${fmtShape(x.shape)} has no elements along its last axis`);
  const shape = x.shape.slice(0, -1);
  const y = opts.out ?? empty(ctx, shape, 'i32');
  if (opts.out) checkOut(opts.out, shape, 'argmax', 'i32', [x]);
  const rows = numel(shape);
  if (rows === 0) return y;
  const k = cachedKernel(ctx, `argmax:${x.dtype}`, () => ({ name: 'argmax', code: argmaxWgsl, bindings: ioBindings(x.dtype, 'i32'), params: ['u32:rows', 'u32:V', 'u32:gx'] }));
  const { wg, row } = grid1d(rows, 1);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [rows, V, row]);
  return y;
}
