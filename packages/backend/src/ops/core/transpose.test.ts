import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { gatherRef, roundTo, stridesOf } from './core.ref';
import { copy, permute, stridedCopy, transpose, transposePair16 } from './transpose';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

let seed = 900;
const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

/** Moves are exact: compare element for element, NaN poison included. */
function same(got: ArrayLike<number>, want: ArrayLike<number>): boolean {
  if (got.length !== want.length) return false;
  for (let i = 0; i < got.length; i++) if (!Object.is(got[i], want[i])) return false;
  return true;
}

async function checkPermute(shape: number[], perm: number[], dtype: DType = 'f32', outDtype?: DType): Promise<boolean> {
  const v = roundTo(dtype, randn(numel(shape), seed++));
  const x = upload(ctx, v, shape, dtype);
  const od = outDtype ?? dtype;
  const st = stridesOf(shape);
  const oshape = perm.map((a) => shape[a]!);
  const y = empty(ctx, oshape, od);
  poison(ctx, y);
  expect(permute(ctx, x, perm, { out: y, dtype: od })).toBe(y);
  const got = await download(ctx, y);
  const want = roundTo(
    od,
    gatherRef(
      v,
      oshape,
      perm.map((a) => st[a]!),
      0,
    ),
  );
  release(ctx, x, y);
  return same(got, want);
}

describe('permute / transpose', () => {
  it('2-D and batched 2-D transposes (tiled path) at tile and non-tile sizes', async () => {
    for (const [r, c] of [
      [32, 32],
      [33, 65],
      [1, 100],
      [130, 7],
    ])
      expect(await checkPermute([r, c], [1, 0]), `${r}x${c}`).toBe(true);
    expect(await checkPermute([3, 45, 33], [0, 2, 1])).toBe(true);
    expect(await checkPermute([2, 3, 40, 17], [0, 1, 3, 2])).toBe(true); // batch dims merge
  });

  it('16-bit 2-D and batched transposes with dims multiples of 8 (the register path) at tile and non-tile sizes', async () => {
    for (const [r, c] of [
      [64, 64],
      [8, 136],
      [200, 72],
      [264, 8],
    ])
      for (const dt of ['f16', 'bf16'] as const) expect(await checkPermute([r, c], [1, 0], dt), `${dt} ${r}x${c}`).toBe(true);
    expect(await checkPermute([3, 24, 80], [0, 2, 1], 'bf16')).toBe(true);
    expect(await checkPermute([2, 3, 16, 136], [0, 1, 3, 2], 'f16')).toBe(true); // batch dims merge
  });

  it('two 16-bit transposes in one dispatch (transposePair16): shapes that differ in rows, columns and tiles', async () => {
    for (const [sa, sb, dt] of [
      [[264, 8], [64, 136], 'f16'],
      [[8, 200], [520, 72], 'bf16'],
      [[64, 64], [64, 64], 'f16'],
      [[0, 8], [16, 24], 'f16'],
    ] as [number[], number[], DType][]) {
      const va = roundTo(dt, randn(numel(sa), seed++));
      const vb = roundTo(dt, randn(numel(sb), seed++));
      const a = upload(ctx, va, sa, dt);
      const b = upload(ctx, vb, sb, dt);
      const [ya, yb] = transposePair16(ctx, a, b);
      expect(ya.shape).toEqual([sa[1], sa[0]]);
      expect(yb.shape).toEqual([sb[1], sb[0]]);
      for (const [y, v, s] of [[ya, va, sa], [yb, vb, sb]] as const)
        expect(same(await download(ctx, y), gatherRef(v, [s[1]!, s[0]!], [1, s[1]!], 0)), `${dt} ${sa} / ${sb}`).toBe(true);
      release(ctx, a, b, ya, yb);
    }
    const x = upload(ctx, new Float32Array(12 * 8), [12, 8], 'f16');
    expect(() => transposePair16(ctx, x, upload(ctx, new Float32Array(64), [8, 8], 'f32'))).toThrow(ShapeError);
    expect(() => transposePair16(ctx, x, x)).toThrow(ShapeError); // 12 rows
    release(ctx, x);
  });

  it('general permutations up to rank 6 (gather path)', async () => {
    expect(await checkPermute([4, 5, 6], [2, 0, 1])).toBe(true);
    expect(await checkPermute([3, 4, 5, 6], [1, 3, 0, 2])).toBe(true);
    expect(await checkPermute([2, 3, 2, 3, 2, 3], [5, 4, 3, 2, 1, 0])).toBe(true);
    expect(await checkPermute([2, 1, 3, 1, 2, 2, 3], [6, 1, 0, 3, 2, 5, 4])).toBe(true); // rank 7 with size-1 dims
    expect(await checkPermute([4, 5], [0, 1])).toBe(true); // identity
  });

  it('16-bit tensors keep their dtype (odd sizes) or convert', async () => {
    expect(await checkPermute([7, 9], [1, 0], 'f16')).toBe(true);
    expect(await checkPermute([3, 5, 7], [2, 1, 0], 'bf16')).toBe(true);
    expect(await checkPermute([5, 33], [1, 0], 'bf16', 'f32')).toBe(true);
    expect(await checkPermute([5, 33], [1, 0], 'f32', 'f16')).toBe(true);
  });

  it('transpose swaps any two axes', async () => {
    const v = roundTo('f32', randn(60, seed++));
    const x = upload(ctx, v, [3, 4, 5]);
    const y = transpose(ctx, x, 0, 2);
    expect(y.shape).toEqual([5, 4, 3]);
    expect(same(await download(ctx, y), gatherRef(v, [5, 4, 3], [1, 5, 20], 0))).toBe(true);
    expect(() => permute(ctx, x, [0, 0, 1])).toThrow(ShapeError);
    expect(() => transpose(ctx, x, 0, 3)).toThrow(/out of range/);
    release(ctx, x, y);
  });
});

describe('stridedCopy', () => {
  it('slices, steps, offsets and broadcasts (stride 0)', async () => {
    const v = roundTo('f32', randn(6 * 7 * 8, seed++));
    const x = upload(ctx, v, [6, 7, 8]);
    const views: [number[], number[], number][] = [
      [[3, 7, 4], [56, 8, 2], 1], // x[0:3, :, 1::2]
      [[2, 3, 8], [112, 16, 1], 64], // x[1::2, 0::2, :] starting at [1, 0, 0]
      [[5, 6, 8], [0, 8, 1], 8], // a row block broadcast 5 times
      [[8, 6], [1, 56], 3], // a column set, transposed
    ];
    for (const [shape, strides, off] of views) {
      const y = empty(ctx, shape);
      poison(ctx, y);
      stridedCopy(ctx, x, shape, strides, off, { out: y });
      expect(same(await download(ctx, y), gatherRef(v, shape, strides, off)), JSON.stringify([shape, strides, off])).toBe(true);
      release(ctx, y);
    }
    expect(() => stridedCopy(ctx, x, [7, 8], [8, 1], 300)).toThrow(/reads past/);
    release(ctx, x);
  });
});

describe('copy', () => {
  it('copies every dtype exactly at sizes around the vec4 width', async () => {
    for (const [dtype, n] of [
      ['f32', 1],
      ['f32', 4099],
      ['f16', 13],
      ['bf16', 2 * 512 * 2 + 6],
      ['i32', 1030],
    ] as const) {
      const v = dtype === 'i32' ? Float64Array.from({ length: n }, (_, i) => i * 7 - 300) : roundTo(dtype, randn(n, seed++));
      const x = upload(ctx, v, [n], dtype);
      for (const perThread of [1, 2, 8]) {
        const y = empty(ctx, [n], dtype);
        poison(ctx, y);
        copy(ctx, x, { out: y, perThread });
        expect(same(await download(ctx, y), await download(ctx, x)), `${dtype} ${n} per ${perThread}`).toBe(true);
        release(ctx, y);
      }
      release(ctx, x);
    }
  });
});
