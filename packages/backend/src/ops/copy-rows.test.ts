// copyRows against a host copy: rows of [batch, rows, ...] views at offsets, one pair or two in one dispatch
// (16-bit sources decoded), the rows outside the range left as they were.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../context';
import { ShapeError } from '../errors';
import { download, empty, poison, release, upload } from '../tensor';
import { randn } from '../testing';
import { roundTo } from './core/core.ref';
import { copyRows } from './copy-rows';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** dst after copying rows [so, so + rows) of src into [do, do + rows) of a poisoned dst, per batch. */
function expected(src: Float64Array, B: number, sr: number, dr: number, len: number, rows: number, so: number, d0: number): number[] {
  const out = new Array<number>(B * dr * len).fill(NaN);
  for (let b = 0; b < B; b++)
    for (let r = 0; r < rows; r++)
      for (let j = 0; j < len; j++) out[(b * dr + d0 + r) * len + j] = src[(b * sr + so + r) * len + j]!;
  return out;
}

describe('copyRows', () => {
  it('one pair and two pairs at offsets, f32 and f16 sources, other rows untouched', async () => {
    const [B, sr, dr, H, D] = [2, 5, 9, 3, 4];
    const len = H * D;
    const a = roundTo('f32', randn(B * sr * len, 1));
    const c = roundTo('f16', randn(B * sr * len, 2));
    const sa = upload(ctx, a, [B, sr, H, D]);
    const sc = upload(ctx, c, [B, sr, H, D], 'f16');
    const da = empty(ctx, [B, dr, H, D]);
    const dc = empty(ctx, [B, dr, H, D]);
    for (const [rows, so, d0, two] of [
      [3, 1, 4, false],
      [5, 0, 0, true],
      [2, 3, 7, true],
      [1, 4, 8, true],
    ] as [number, number, number, boolean][]) {
      poison(ctx, da);
      poison(ctx, dc);
      copyRows(ctx, sa, da, rows, so, d0, two ? { src: sc, dst: dc } : undefined);
      expect(Array.from(await download(ctx, da)), `rows ${rows} ${so} -> ${d0}`).toEqual(expected(a, B, sr, dr, len, rows, so, d0));
      const want = two ? expected(c, B, sr, dr, len, rows, so, d0) : new Array<number>(B * dr * len).fill(NaN);
      expect(Array.from(await download(ctx, dc)), `second pair, rows ${rows} ${so} -> ${d0}`).toEqual(want);
    }
    release(ctx, sa, sc, da, dc);
  });

  it('refuses rows out of range and a second pair of other shapes', () => {
    const s = empty(ctx, [1, 4, 8]);
    const d = empty(ctx, [1, 6, 8]);
    expect(() => copyRows(ctx, s, d, 3, 2, 0)).toThrow(ShapeError);
    expect(() => copyRows(ctx, s, d, 2, 0, 5)).toThrow(ShapeError);
    expect(() => copyRows(ctx, s, d, 2, 0, 0, { src: empty(ctx, [1, 4, 4]), dst: empty(ctx, [1, 6, 4]) })).toThrow(/second pair/);
    expect(() => copyRows(ctx, s, d, 2, 0, 0, { src: s, dst: empty(ctx, [1, 6, 8], 'f16') })).toThrow(/second pair/);
    release(ctx, s, d);
  });
});
