import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { f16BitsToF32, f32ToF16Bits } from '../../dtype';
import { randn, relErr, toF32 } from '../../testing';
import { download, poison, release, upload, type DeviceTensor } from '../../tensor';
import { lowRankOuter, lowRankProject, lowRankTuning, lowRankUpdate } from './lowrank';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const h16 = (v: ArrayLike<number>) => Float64Array.from(v, (x) => f16BitsToF32(f32ToF16Bits(x)));
const stored = (v: Float64Array, dtype: 'f32' | 'f16') => (dtype === 'f16' ? h16(v) : toF32(v));

const tuned = { ...lowRankTuning };

/** `run` into a NaN-poisoned out, then accumulating into random values: both against the float64 `ref`. */
async function checkOutAndAccumulate(run: (o: { out: DeviceTensor; accumulate?: boolean }) => void, shape: number[], ref: Float64Array, seed: number): Promise<void> {
  const out = upload(ctx, new Float32Array(ref.length), shape);
  poison(ctx, out);
  run({ out });
  expect(relErr(await download(ctx, out), ref)).toBeLessThan(1e-5);
  const c0 = toF32(randn(ref.length, seed));
  const C = upload(ctx, c0, shape);
  run({ out: C, accumulate: true });
  expect(relErr(await download(ctx, C), ref.map((v, i) => v + c0[i]!))).toBeLessThan(1e-5);
  release(ctx, out, C);
}
afterAll(() => Object.assign(lowRankTuning, tuned));

// lowRankOuter with many chunks of one tile, and with few chunks of several tiles (its next-tile loads in flight),
// in 64- and 32-row tiles
describe.each([
  [768, 64],
  [2, 64],
  [2, 32],
] as const)('low-rank products (LoRA: x A^T, dY B, dY^T u, v^T x), %d workgroups, %d-row tiles', (workgroups, tileRows) => {
  beforeAll(() => Object.assign(lowRankTuning, { workgroups, tileRows }));
  it.each([
    ['rk', 'f32', 'f32', 37, 75, 5],
    ['kr', 'f16', 'f32', 21, 130, 16],
    ['rk', 'f16', 'f16', 9, 33, 1],
    ['kr', 'f32', 'f16', 70, 64, 31],
  ] as const)('lowRankProject W %s, X %s, W %s, T %d K %d R %d: float64 reference, accumulate into a poisoned out', async (layout, xd, wd, T, K, R) => {
    const x = randn(T * K, 1);
    const w = randn(R * K, 2);
    const xs = stored(x, xd);
    const ws = stored(w, wd);
    const ref = new Float64Array(T * R);
    for (let t = 0; t < T; t++)
      for (let j = 0; j < R; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += xs[t * K + k]! * ws[layout === 'rk' ? j * K + k : k * R + j]!;
        ref[t * R + j] = 0.75 * s;
      }
    const X = upload(ctx, x, [T, K], xd);
    const W = upload(ctx, w, layout === 'rk' ? [R, K] : [K, R], wd);
    await checkOutAndAccumulate((o) => lowRankProject(ctx, X, W, { wLayout: layout, alpha: 0.75, ...o }), [T, R], ref, 3);
    release(ctx, X, W);
  });

  it.each([
    ['qr', 'f32', 'f32', 45, 300, 7],
    ['rq', 'f16', 'f32', 1000, 70, 16],
    ['qr', 'f16', 'f16', 130, 513, 3],
    ['rq', 'f32', 'f32', 3, 17, 32],
  ] as const)('lowRankOuter C %s, Y %s, Z %s, T %d Q %d R %d: float64 reference, accumulate into a poisoned out', async (layout, yd, zd, T, Q, R) => {
    const y = randn(T * Q, 4);
    const z = randn(T * R, 5);
    const ys = stored(y, yd);
    const zs = stored(z, zd);
    const ref = new Float64Array(Q * R);
    for (let q = 0; q < Q; q++)
      for (let j = 0; j < R; j++) {
        let s = 0;
        for (let t = 0; t < T; t++) s += ys[t * Q + q]! * zs[t * R + j]!;
        ref[layout === 'qr' ? q * R + j : j * Q + q] = -1.5 * s;
      }
    const Y = upload(ctx, y, [T, Q], yd);
    const Z = upload(ctx, z, [T, R], zd);
    await checkOutAndAccumulate((o) => lowRankOuter(ctx, Y, Z, { outLayout: layout, alpha: -1.5, ...o }), layout === 'qr' ? [Q, R] : [R, Q], ref, 6);
    release(ctx, Y, Z);
  });

  it.each([
    ['nr', 'f32', 'f32', 37, 300, 5],
    ['rn', 'f16', 'f32', 70, 513, 16],
    ['nr', 'f32', 'f16', 3, 17, 32],
    ['rn', 'f32', 'f32', 33, 256, 20],
  ] as const)('lowRankUpdate W %s, U %s, W %s, T %d N %d R %d: float64 reference, added in place', async (layout, ud, wd, T, N, R) => {
    const u = randn(T * R, 7);
    const w = randn(N * R, 8);
    const y0 = randn(T * N, 9);
    const us = stored(u, ud);
    const wst = stored(w, wd);
    const yf = toF32(y0);
    const ref = new Float64Array(T * N);
    for (let t = 0; t < T; t++)
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let j = 0; j < R; j++) s += us[t * R + j]! * wst[layout === 'nr' ? n * R + j : j * N + n]!;
        ref[t * N + n] = yf[t * N + n]! + 0.5 * s;
      }
    const U = upload(ctx, u, [T, R], ud);
    const W = upload(ctx, w, layout === 'nr' ? [N, R] : [R, N], wd);
    const Y = upload(ctx, y0, [T, N]);
    expect(lowRankUpdate(ctx, Y, U, W, { wLayout: layout, alpha: 0.5 })).toBe(Y);
    expect(relErr(await download(ctx, Y), ref)).toBeLessThan(1e-5);
    release(ctx, U, W, Y);
  });

  it('refuses ranks over the limit, mismatched K or rows, and accumulate without out', () => {
    const X = upload(ctx, new Float32Array(12), [3, 4]);
    const W = upload(ctx, new Float32Array(8), [2, 4]);
    const Z = upload(ctx, new Float32Array(10), [5, 2]);
    const big = upload(ctx, new Float32Array(4 * 33), [33, 4]);
    expect(() => lowRankProject(ctx, X, W, { wLayout: 'kr' })).toThrow(/differ in K/);
    expect(() => lowRankProject(ctx, X, big)).toThrow(/rank 33/);
    expect(() => lowRankProject(ctx, X, W, { accumulate: true })).toThrow(/needs out/);
    expect(() => lowRankOuter(ctx, X, Z)).toThrow(/differ in rows/);
    expect(() => lowRankUpdate(ctx, X, Z, W)).toThrow(/differ in N/);
    const B = upload(ctx, new Float32Array(8), [4, 2]);
    expect(() => lowRankUpdate(ctx, X, Z, B)).toThrow(/must be \[3, 2\]/);
    release(ctx, B);
    release(ctx, X, W, Z, big);
  });
});
