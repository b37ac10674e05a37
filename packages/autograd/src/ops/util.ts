import { numel, reduce, ShapeError, type Context, type DeviceTensor } from '@rusty/backend';
import { releaseRef, retain } from '../storage';

export function fmt(s: readonly number[]): string {
  return `[${s.join(', ')}]`;
}

export function same(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** A view with another shape over the same storage (caller owns one new reference). */
export function view(t: DeviceTensor, shape: readonly number[]): DeviceTensor {
  if (numel(shape) !== numel(t.shape)) throw new ShapeError(`cannot view ${fmt(t.shape)} as ${fmt(shape)}`);
  retain(t.buffer);
  return { buffer: t.buffer, dtype: t.dtype, shape: [...shape] };
}

/** Sum a broadcast gradient `g` back to `shape` (NumPy broadcasting rules). Returns an owned tensor. */
export function sumToShape(ctx: Context, g: DeviceTensor, shape: readonly number[]): DeviceTensor {
  if (same(g.shape, shape)) return view(g, shape);
  let cur = g;
  let owned = false;
  const lead = g.shape.length - shape.length;
  if (lead > 0) {
    const axes = [...Array(lead).keys()];
    const r = reduce(ctx, 'sum', cur, axes);
    cur = r;
    owned = true;
  }
  for (let i = 0; i < shape.length; i++) {
    if (shape[i] === 1 && cur.shape[i] !== 1) {
      const r = reduce(ctx, 'sum', cur, i, { keepDims: true });
      if (owned) releaseRef(ctx, cur.buffer);
      cur = r;
      owned = true;
    }
  }
  if (!owned) return view(cur, shape);
  return { ...cur, shape: [...shape] };
}
