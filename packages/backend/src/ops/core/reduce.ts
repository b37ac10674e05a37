import reduceWgsl from '../../../../../shaders/reduce.wgsl';
import { ioBindings } from '../../kernel';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import { empty, numel, release, type DeviceTensor } from '../../tensor';
import { assertFloat, cachedKernel, checkOut, fmtShape, normAxis } from './util';

/** Reductions: `sum`, `mean` and `max` (max of NaN inputs is unspecified: WGSL may assume no NaNs). */
export type ReduceOp = 'sum' | 'mean' | 'max';

/** Options of the reductions. */
export interface ReduceOptions {
  /** Keep the reduced axes as size-1 dims (default false). */
  keepDims?: boolean;
  /** Write into this f32 tensor of the result's shape. It must not be the input. */
  out?: DeviceTensor;
}

/** Below this many workgroups a long reduction is split into chunks reduced in a second pass. */
const MIN_GROUPS = 256;

/**
 * Reduce `x` over `axes` (one axis, or several that are consecutive, e.g. `[0, 1]` for the leading two; negative
 * axes count from the end), in f32, returning a new f32 tensor. Inputs f32/f16/bf16. The view is
 * `[outer, R, inner]`: each output is a tree over R (per thread blocked sums, then a workgroup tree), with a
 * second pass over chunk results when there are few outputs and R is long. Deterministic.
 */
export function reduce(ctx: Context, op: ReduceOp, x: DeviceTensor, axes: number | readonly number[], opts: ReduceOptions = {}): DeviceTensor {
  if (op !== 'sum' && op !== 'mean' && op !== 'max') throw new ShapeError(`unknown reduction '${op}' (expected sum, mean or max)`);
  assertFloat(x, op);
  const rank = x.shape.length;
  const list = (typeof axes === 'number' ? [axes] : [...axes]).map((a) => normAxis(a, rank, `${op}: axis`)).sort((a, b) => a - b);
  if (!list.length) throw new ShapeError(`${op}: no axes given`);
  for (let i = 1; i < list.length; i++)
    if (list[i] !== list[i - 1]! + 1)
      throw new ShapeError(`${op}: axes [${list.join(', ')}] of ${fmtShape(x.shape)} must be consecutive (transpose first)`);
  const a0 = list[0]!;
  const a1 = list[list.length - 1]! + 1;
  const outer = numel(x.shape.slice(0, a0));
  const R = numel(x.shape.slice(a0, a1));
  const inner = numel(x.shape.slice(a1));
  const shape = opts.keepDims
    ? x.shape.map((d, i) => (i >= a0 && i < a1 ? 1 : d))
    : [...x.shape.slice(0, a0), ...x.shape.slice(a1)];
  if (R === 0 && op === 'max') throw new ShapeError(`max: cannot reduce ${fmtShape(x.shape)} over an empty axis`);
  const y = opts.out ?? empty(ctx, shape);
  if (opts.out) checkOut(opts.out, shape, op, 'f32', [x]);
  const scale = op === 'mean' ? 1 / R : 1;
  const kop = op === 'max' ? 1 : 0;
  if (outer * inner === 0) return y;
  const wx = inner === 1 ? 1 : Math.min(64, 2 ** Math.ceil(Math.log2(inner)));
  const groups = outer * Math.ceil(inner / wx);
  let S = 1;
  if (groups < MIN_GROUPS && R >= 4096) S = Math.min(Math.ceil(MIN_GROUPS / groups), Math.ceil(R / 1024));
  if (S === 1) {
    pass(ctx, x, y, kop, outer, R, inner, 1, R, scale, wx);
    return y;
  }
  const chunk = Math.ceil(R / S);
  S = Math.ceil(R / chunk);
  const tmp = empty(ctx, [outer, S, inner]);
  pass(ctx, x, tmp, kop, outer, R, inner, S, chunk, 1, wx);
  pass(ctx, tmp, y, kop, outer, S, inner, 1, S, scale, wx);
  release(ctx, tmp);
  return y;
}

function pass(
  ctx: Context,
  x: DeviceTensor,
  y: DeviceTensor,
  op: number,
  outer: number,
  R: number,
  inner: number,
  S: number,
  chunk: number,
  scale: number,
  wx: number,
): void {
  const k = cachedKernel(ctx, `reduce:${op}:${wx}:${x.dtype}`, () => ({
    name: 'reduce',
    code: reduceWgsl,
    bindings: ioBindings(x.dtype),
    params: ['u32:outer', 'u32:R', 'u32:inner', 'u32:S', 'u32:chunk', 'u32:nx', 'u32:row', 'f32:scale'],
    consts: { OP: op, WX: wx, WY: 256 / wx },
  }));
  const nx = Math.ceil(inner / wx);
  const { wg, row } = grid1d(nx * outer * S, 1);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [outer, R, inner, S, chunk, nx, row, scale]);
}

/** Sum over `axes` (see `reduce`). */
export const sum = (ctx: Context, x: DeviceTensor, axes: number | readonly number[], opts?: ReduceOptions): DeviceTensor =>
  reduce(ctx, 'sum', x, axes, opts);
/** Mean over `axes` (see `reduce`). */
export const mean = (ctx: Context, x: DeviceTensor, axes: number | readonly number[], opts?: ReduceOptions): DeviceTensor =>
  reduce(ctx, 'mean', x, axes, opts);
/** Maximum over `axes` (see `reduce`). */
export const max = (ctx: Context, x: DeviceTensor, axes: number | readonly number[], opts?: ReduceOptions): DeviceTensor =>
  reduce(ctx, 'max', x, axes, opts);
