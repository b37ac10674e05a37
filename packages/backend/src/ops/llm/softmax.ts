import softmaxWgsl from '../../../../../shaders/softmax.wgsl';
import softmaxBwdWgsl from '../../../../../shaders/softmax-backward.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import {
  bindUnits,
  checkFloat,
  checkOut,
  elemBytes,
  fmt,
  grid,
  llmKernel,
  reduceCode,
  rowChunks,
  rowShape,
  sameShape,
  vecFor,
  vecPrelude,
} from './common';

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
 * Tensors larger than one storage binding are processed in row chunks (also in the backward).
 */
export function softmax(ctx: Context, x: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  const { rows, len } = rowsOf('softmax', x);
  const y = opts.out ?? empty(ctx, x.shape);
  if (opts.out) checkOut(opts.out, x.shape, 'softmax: out');
  if (rows === 0) return y;
  const plan = rowChunks(ctx, 'softmax', rows, [
    [x, len * elemBytes(x), 'x'],
    [y, len * 4, 'out'],
  ]);
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
  for (const [r0, r1] of plan.ranges) {
    const bufs = [bindUnits(plan, x, len * elemBytes(x), r0, r1), bindUnits(plan, y, len * 4, r0, r1)];
    ctx.dispatch(k, bufs, grid(r1 - r0), [r1 - r0, len]);
  }
  return y;
}

/** Backward of {@link softmax} from its output `y`: `dx = y * (dy - sum(dy * y, -1))`, f32. */
export function softmaxBackward(ctx: Context, y: DeviceTensor, dy: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  const { rows, len } = rowsOf('softmaxBackward', y);
  checkFloat(dy, 'softmaxBackward: dy');
  if (!sameShape(y.shape, dy.shape)) throw new ShapeError(`softmaxBackward: y ${fmt(y.shape)} and dy ${fmt(dy.shape)} differ`);
  const dx = opts.out ?? empty(ctx, y.shape);
  if (opts.out) checkOut(opts.out, y.shape, 'softmaxBackward: out');
  if (rows === 0) return dx;
  const plan = rowChunks(ctx, 'softmaxBackward', rows, [
    [y, len * elemBytes(y), 'y'],
    [dy, len * elemBytes(dy), 'dy'],
    [dx, len * 4, 'out'],
  ]);
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
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    ctx.dispatch(k, [b(y, len * elemBytes(y)), b(dy, len * elemBytes(dy)), b(dx, len * 4)], grid(r1 - r0), [r1 - r0, len]);
  }
  return dx;
}
