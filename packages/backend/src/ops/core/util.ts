import type { Context, Kernel } from '../../context';
import { cachedKernel as sharedCachedKernel } from '../../kernel-cache';
import * as checks from '../../checks';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import type { KernelDef } from '../../kernel';
import type { DeviceTensor } from '../../tensor';

/** Most dimensions the strided kernels (broadcasting binary ops, gathers) take after merging dims. */
export const MAX_RANK = 6;

/** A kernel compiled once per context and `key` (see `kernel-cache.ts`; keys live in the 'core' namespace). */
export function cachedKernel(ctx: Context, key: string, make: () => KernelDef): Kernel {
  return sharedCachedKernel(ctx, `core:${key}`, make);
}

/** Row-major strides (in elements) of a shape. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
}

/** Normalise a possibly negative axis into [0, rank). */
export function normAxis(axis: number, rank: number, what = 'axis'): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank) throw new ShapeError(`${what} ${axis} is out of range for rank ${rank}`);
  return a;
}

/** NumPy broadcasting of two shapes (aligned at the right; dims equal or 1). */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const r = Math.max(a.length, b.length);
  const out = new Array<number>(r);
  for (let i = 0; i < r; i++) {
    const x = a[a.length - r + i] ?? 1;
    const y = b[b.length - r + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1)
      throw new ShapeError(`shapes [${a.join(', ')}] and [${b.join(', ')}] do not broadcast (dim ${i}: ${x} vs ${y})`);
    out[i] = x === 1 ? y : x;
  }
  return out;
}

/** Strides (elements) with which `shape` is read when broadcast to `outShape`: 0 along broadcast dims. */
export function broadcastStrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const cs = contiguousStrides(shape);
  const r = outShape.length;
  const s = new Array<number>(r).fill(0);
  for (let i = 0; i < shape.length; i++) {
    const o = r - shape.length + i;
    s[o] = shape[i] === 1 ? 0 : cs[i]!;
  }
  return s;
}

/**
 * Merge dims of an index space `dims` read through several stride lists: drops size-1 dims and merges a dim
 * into the next inner one wherever every stride list is contiguous across the pair. Returns at least one dim.
 */
export function coalesce(dims: readonly number[], strides: readonly (readonly number[])[]): { dims: number[]; strides: number[][] } {
  const d: number[] = [];
  const s: number[][] = strides.map(() => []);
  for (let i = 0; i < dims.length; i++) {
    if (dims[i] === 1) continue;
    const last = d.length - 1;
    if (last >= 0 && strides.every((st, j) => s[j]![last] === st[i]! * dims[i]!)) {
      d[last] = d[last]! * dims[i]!;
      strides.forEach((st, j) => (s[j]![last] = st[i]!));
    } else {
      d.push(dims[i]!);
      strides.forEach((st, j) => s[j]!.push(st[i]!));
    }
  }
  if (!d.length) return { dims: [1], strides: strides.map(() => [0]) };
  return { dims: d, strides: s };
}

/** Pad (dims, strides...) on the left to MAX_RANK entries (dims 1, strides 0): the kernels' param layout. */
export function padRank(dims: readonly number[], strides: readonly (readonly number[])[]): { dims: number[]; strides: number[][] } {
  const pad = MAX_RANK - dims.length;
  return {
    dims: [...new Array<number>(pad).fill(1), ...dims],
    strides: strides.map((s) => [...new Array<number>(pad).fill(0), ...s]),
  };
}

// Argument checks: the backend's shared ones (checks.ts) in the argument order the core and quant ops use.
export { fmtShape, sameShape } from '../../checks';

export function assertFloat(t: DeviceTensor, op: string, name = 'input'): void {
  checks.assertFloat(t, `${op}: ${name}`);
}

/** Check an `out` tensor given to an op (see `checks.checkOut`). */
export function checkOut(out: DeviceTensor, shape: readonly number[], op: string, dtype: DType = 'f32', inputs: readonly DeviceTensor[] = []): void {
  checks.checkOut(out, shape, `${op}: out`, dtype, inputs);
}

/** Refuse tensors larger than one storage binding (they would need chunked binding). */
export function checkBinding(ctx: Context, t: DeviceTensor, op: string, name: string): void {
  checks.checkBindable(ctx, op, [t, name]);
}
