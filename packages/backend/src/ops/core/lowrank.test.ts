import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { f16BitsToF32, f32ToF16Bits } from '../../dtype';
import { randn, relErr, toF32 } from '../../testing';
import { download, poison, release, upload } from '../../tensor';
import { lowRankOuter, lowRankProject } from './lowrank';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const h16 = (v: ArrayLike<number>) => Float64Array.from(v, (x) => f16BitsToF32(f32ToF16Bits(x)));
const stored = (v: Float64Array, dtype: 'f32' | 'f16') => (dtype === 'f16' ? h16(v) : toF32(v));

describe('low-rank products (LoRA: x A^T, dY B, dY^T u, v^T x)', () => {
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
    const out = upload(ctx, new Float32Array(T * R), [T, R]);
    poison(ctx, out);
    lowRankProject(ctx, X, W, { wLayout: layout, alpha: 0.75, out });
    expect(relErr(await download(ctx, out), ref)).toBeLessThan(1e-5);
    const c0 = randn(T * R, 3);
    const C = upload(ctx, c0, [T, R]);
    lowRankProject(ctx, X, W, { wLayout: layout, alpha: 0.75, out: C, accumulate: true });
    const got = await download(ctx, C);
    expect(relErr(got, ref.map((v, i) => v + toF32(c0)[i]!))).toBeLessThan(1e-5);
    release(ctx, X, W, out, C);
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
    const shape = layout === 'qr' ? [Q, R] : [R, Q];
    const out = upload(ctx, new Float32Array(Q * R), shape);
    poison(ctx, out);
    lowRankOuter(ctx, Y, Z, { outLayout: layout, alpha: -1.5, out });
    expect(relErr(await download(ctx, out), ref)).toBeLessThan(1e-5);
    const c0 = randn(Q * R, 6);
    const C = upload(ctx, c0, shape);
    lowRankOuter(ctx, Y, Z, { outLayout: layout, alpha: -1.5, out: C, accumulate: true });
    expect(relErr(await download(ctx, C), ref.map((v, i) => v + toF32(c0)[i]!))).toBeLessThan(1e-5);
    release(ctx, Y, Z, out, C);
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
    release(ctx, X, W, Z, big);
  });
});
