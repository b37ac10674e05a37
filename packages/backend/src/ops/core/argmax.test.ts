// argmax along the last axis against a left-to-right scan on the host (greedy decoding's rule): random rows of
// f32 / f16 / bf16, equal maxima in different threads' elements, NaN and infinities, every row count and length.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { argmax } from './argmax';
import { roundTo } from './core.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** The first index whose value is larger than every one before it and not smaller than any after it: the scan
 *  that keeps the first strictly larger value (NaN never compares larger; a NaN first element stays). */
function scan(v: ArrayLike<number>, base: number, V: number): number {
  let best = 0;
  for (let i = 1; i < V; i++) if (v[base + i]! > v[base + best]!) best = i;
  return best;
}

async function check(shape: number[], v: ArrayLike<number>, dtype: DType = 'f32'): Promise<number[]> {
  const V = shape[shape.length - 1]!;
  const rows = v.length / V;
  const x = upload(ctx, v, shape, dtype);
  const y = empty(ctx, shape.slice(0, -1), 'i32');
  poison(ctx, y);
  expect(argmax(ctx, x, { out: y })).toBe(y);
  const got = Array.from(await download(ctx, y));
  release(ctx, x, y);
  const vals = roundTo(dtype, v);
  expect(got).toEqual(Array.from({ length: rows }, (_, r) => scan(vals, r * V, V)));
  return got;
}

describe('argmax', () => {
  it('random rows of every length, f32 / f16 / bf16', async () => {
    let seed = 900;
    for (const [shape, dtype] of [
      [[3, 1000], 'f32'],
      [[1, 1], 'f32'],
      [[2, 257], 'f32'],
      [[1, 1, 32000], 'f32'],
      [[2, 3, 77], 'f32'],
      [[4, 513], 'f16'],
      [[4, 513], 'bf16'],
    ] as [number[], DType][]) {
      await check(shape, randn(shape.reduce((a, b) => a * b, 1), seed++), dtype);
    }
  });

  it('equal maxima give the first index, across the threads of a row', async () => {
    const V = 1000;
    const v = Array.from(randn(2 * V, 31)).map((t) => t / 10);
    for (const i of [900, 261, 517]) v[i] = 7; // thread 5's element 261 and thread 5's 517 come after 5's first
    v[5] = 7;
    v[V + 999] = 7;
    v[V + 300] = 7;
    expect(await check([2, V], v)).toEqual([5, 300]);
  });

  it('NaN is passed over, except as the first element; infinities are values', async () => {
    const V = 600;
    const rows: number[][] = [];
    const row = (f: (a: number[]) => void) => {
      const a = Array.from(randn(V, 50 + rows.length));
      f(a);
      rows.push(a);
    };
    row((a) => ((a[3] = NaN), (a[400] = 9)));
    row((a) => (a[0] = NaN));
    row((a) => a.fill(-Infinity));
    row((a) => (a.fill(NaN), (a[0] = -7), (a[321] = -5)));
    row((a) => ((a[10] = Infinity), (a[20] = Infinity)));
    row((a) => a.fill(NaN));
    expect(await check([rows.length, V], rows.flat())).toEqual([400, 0, 0, 321, 10, 0]);
  });

  it('refuses an empty last axis and an out of the wrong dtype', () => {
    const x = upload(ctx, [1, 2, 3, 4], [2, 2]);
    expect(() => argmax(ctx, empty(ctx, [2, 0]))).toThrow(ShapeError);
    expect(() => argmax(ctx, x, { out: empty(ctx, [2], 'f32') })).toThrow(/i32/);
    release(ctx, x);
  });
});
