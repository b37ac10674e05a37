import softmaxWgsl from '../../../../../shaders/softmax.wgsl';
import softmaxBwdWgsl from '../../../../../shaders/softmax-backward.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { checkBindable, checkFloat, checkOut, fmt, grid, llmKernel, reduceCode, rowShape, sameShape, vecFor, vecPrelude } from './common';

function rowsOf(op: string, x: DeviceTensor): { rows: number; len: number } {
  checkFloat(x, `${op}: x`);
  if (x.shape.length < 1) throw new ShapeError(`${op}: expected at least one dimension, got ${fmt(x.shape)}`);
  const len = x.shape[x.shape.length - 1]!;
  return { rows: len === 0 ? 0 : numel(x.shape) / len, len };
}

/**
 * Numerically stable softmax along the last axis (f32 arithmetic and output; input f32/f16/bf16), rows of
 * any length. One workgroup per row: rows up to 64 values per thread of a 512-thread workgroup (32k f32,
 * 64k 16-bit) are read once and kept in registers, longer rows (e.g. a 128k vocabulary) are read twice.
 */
export function softmax(ctx: Context, x: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  const { rows, len } = rowsOf('softmax', x);
  const y = opts.out ?? empty(ctx, x.shape);
  if (opts.out) checkOut(opts.out, x.shape, 'softmax: out');
  checkBindable(ctx, 'softmax', [x, 'x'], [y, 'out']);
  if (rows === 0) return y;
  const vec = vecFor(len, [x.dtype]);
  const { wg, nv } = rowShape(ctx, len / vec, 'softmax');
  const red = reduceCode(ctx);
  const k = llmKernel(ctx, `softmax:wg${wg}:nv${nv}:v${vec}:${red.tag}:${x.dtype}`, () => ({
    code: vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1) }, vec, [['x', x.dtype]], ['y']) + red.code + softmaxWgsl,
    enables: red.enables,
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:rows', 'u32:L'],
  }));
  ctx.dispatch(k, [x.buffer, y.buffer], grid(rows), [rows, len]);
  return y;
}

/** Backward of {@link softmax} from its output `y`: `dx = y * (dy - sum(dy * y, -1))`, f32. */
export function softmaxBackward(ctx: Context, y: DeviceTensor, dy: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  const { rows, len } = rowsOf('softmaxBackward', y);
  checkFloat(dy, 'softmaxBackward: dy');
  if (!sameShape(y.shape, dy.shape)) throw new ShapeError(`softmaxBackward: y ${fmt(y.shape)} and dy ${fmt(dy.shape)} differ`);
  const dx = opts.out ?? empty(ctx, y.shape);
  if (opts.out) checkOut(opts.out, y.shape, 'softmaxBackward: out');
  checkBindable(ctx, 'softmaxBackward', [y, 'y'], [dy, 'dy'], [dx, 'out']);
  if (rows === 0) return dx;
  const vec = vecFor(len, [y.dtype, dy.dtype]);
  const { wg, nv } = rowShape(ctx, len / vec, 'softmax_bwd');
  const red = reduceCode(ctx);
  const k = llmKernel(ctx, `softmax_bwd:wg${wg}:nv${nv}:v${vec}:${red.tag}:${y.dtype}${dy.dtype}`, () => ({
    code:
      vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1) }, vec, [['y', y.dtype], ['dy', dy.dtype]], ['dx']) +
      red.code +
      softmaxBwdWgsl,
    enables: red.enables,
    bindings: [
      { name: 'y', access: 'read', dtype: y.dtype },
      { name: 'dy', access: 'read', dtype: dy.dtype },
      { name: 'dx', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:rows', 'u32:L'],
  }));
  ctx.dispatch(k, [y.buffer, dy.buffer, dx.buffer], grid(rows), [rows, len]);
  return dx;
}
