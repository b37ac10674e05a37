import {
  binary,
  cast as castKernel,
  fill,
  reduce,
  ShapeError,
  transpose as transposeKernel,
  unary,
  type Context,
  type DeviceTensor,
  type DType,
} from '@rusty/backend';
import { defineOp } from '../op';
import { releaseRef } from '../storage';
import type { Tensor } from '../tensor';
import { fmt, view } from './util';

const reshapeOp = defineOp<{ shape: number[] }>({
  name: 'reshape',
  forward: (_ctx, [x], { shape }) => ({ outputs: view(x!, shape) }),
  backward: (_ctx, [g], _s, [m]) => [view(g!, m!.shape)],
});

/** The same storage with another shape (one dim may be -1). No copy. */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const n = x.size;
  const known = shape.filter((d) => d !== -1).reduce((a, d) => a * d, 1);
  const free = shape.filter((d) => d === -1).length;
  if (free > 1 || (free === 1 && (known === 0 || n % known !== 0)) || (free === 0 && known !== n))
    throw new ShapeError(`cannot reshape ${fmt(x.shape)} (${n} elements) to ${fmt(shape)}`);
  const s = shape.map((d) => (d === -1 ? n / known : d));
  return reshapeOp([x], { shape: s });
}

const transposeOp = defineOp<{ d0: number; d1: number }>({
  name: 'transpose',
  forward: (ctx, [x], { d0, d1 }) => ({ outputs: transposeKernel(ctx, x!, d0, d1) }),
  backward: (ctx, [g], _s, _m, { d0, d1 }) => [transposeKernel(ctx, g!, d0, d1)],
});

/** Swap two dims (a copy into a contiguous tensor). */
export const transpose = (x: Tensor, dim0 = -2, dim1 = -1): Tensor => transposeOp([x], { d0: dim0, d1: dim1 });

function normAxes(axes: number | readonly number[] | undefined, rank: number): number[] {
  const a = axes === undefined ? [...Array(rank).keys()] : typeof axes === 'number' ? [axes] : [...axes];
  return a.map((x) => (x < 0 ? x + rank : x)).sort((p, q) => p - q);
}

const reduceOp = defineOp<{ op: 'sum' | 'mean'; axes: number[]; keepDims: boolean }>({
  name: 'reduce',
  forward: (ctx, [x], { op, axes, keepDims }) => {
    if (axes.length === 0) return { outputs: unary(ctx, 'scale', x!, 1) };
    // reduce one contiguous run at a time (the kernel takes consecutive axes)
    let cur = x!;
    for (let i = axes.length - 1; i >= 0; i--) {
      const next = reduce(ctx, op, cur, axes[i]!, { keepDims: true });
      if (cur !== x) releaseRef(ctx, cur.buffer);
      cur = next;
    }
    const shape = keepDims ? cur.shape : x!.shape.filter((_, i) => !axes.includes(i));
    return { outputs: { ...cur, shape: [...shape] } };
  },
  backward: (ctx, [g], _s, [m], { op, axes }) => {
    // broadcast g back over the reduced axes: g * ones (mean also divides by the count)
    const keep = m!.shape.map((d, i) => (axes.includes(i) ? 1 : d));
    const count = axes.reduce((a, i) => a * m!.shape[i]!, 1);
    return [expandTo(ctx, { ...g!, shape: keep }, m!.shape, op === 'mean' ? 1 / count : 1)];
  },
});

/** `g` (with size-1 dims) broadcast to `shape`, times `s`. */
function expandTo(ctx: Context, g: DeviceTensor, shape: readonly number[], s: number): DeviceTensor {
  const ones = fill(ctx, shape, s);
  const r = binary(ctx, 'mul', ones, g);
  releaseRef(ctx, ones.buffer);
  return r;
}

/** Sum over `axes` (all by default). */
export function sum(x: Tensor, axes?: number | readonly number[], keepDims = false): Tensor {
  return reduceOp([x], { op: 'sum', axes: normAxes(axes, x.rank), keepDims });
}

/** Mean over `axes` (all by default). */
export function mean(x: Tensor, axes?: number | readonly number[], keepDims = false): Tensor {
  return reduceOp([x], { op: 'mean', axes: normAxes(axes, x.rank), keepDims });
}

const castOp = defineOp<{ dtype: DType }>({
  name: 'cast',
  forward: (ctx, [x], { dtype }) => ({ outputs: castKernel(ctx, x!, dtype) }),
  backward: (ctx, [g], _s, [m]) => [m!.dtype === 'f32' && g!.dtype === 'f32' ? view(g!, m!.shape) : castKernel(ctx, g!, 'f32')],
});

/** Convert to another float storage dtype (gradients flow back as f32). */
export const cast = (x: Tensor, dtype: DType): Tensor => (x.dtype === dtype ? reshape(x, x.shape) : castOp([x], { dtype }));

