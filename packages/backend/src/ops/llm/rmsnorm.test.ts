import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { llmTuning } from './common';
import { addRmsNorm, addRmsNormBackward, rmsNorm, rmsNormBackward } from './rmsnorm';
import { get, poisoned, randTensor } from './test-util';
import { refRmsNorm as refForward, refRmsNormBackward as refBackward } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('rmsNorm', () => {
  it('reference backward matches finite differences', () => {
    const rows = 3;
    const d = 7;
    const eps = 1e-5;
    const x = randn(rows * d, 1);
    const w = randn(d, 2);
    const dy = randn(rows * d, 3);
    const { dx, dw } = refBackward(dy, x, w, rows, d, eps);
    const fx = finiteDiff((xx) => dot(refForward(xx, w, rows, d, eps).y, dy), x);
    const fw = finiteDiff((ww) => dot(refForward(x, ww, rows, d, eps).y, dy), w);
    expect(relErr(dx, fx)).toBeLessThan(1e-7);
    expect(relErr(dw, fw)).toBeLessThan(1e-7);
  });

  const cases: [number, number, DType, DType][] = [
    [1, 17, 'f32', 'f32'],
    [3, 64, 'f16', 'f32'],
    [37, 100, 'bf16', 'bf16'],
    [5, 2050, 'f32', 'bf16'],
    [2, 33000, 'bf16', 'f32'], // 16-bit pairs, cached: 16500 units
    [2, 33001, 'f32', 'f32'], // over 32 units per thread: streamed
  ];
  for (const [rows, d, xd, wd] of cases) {
    it(`forward and backward, x ${xd}[${rows}, ${d}], w ${wd}`, async () => {
      const eps = 1e-5;
      const x = randTensor(ctx, [rows, d], xd, rows * 100 + d);
      const w = randTensor(ctx, [d], wd, d + 7);
      const dy = randTensor(ctx, [rows, d], xd, d + 11);
      const y = poisoned(ctx, [rows, d]);
      const rstd = poisoned(ctx, [rows]);
      rmsNorm(ctx, x.t, w.t, { eps, out: y, rstdOut: rstd });
      const dx = poisoned(ctx, [rows, d]);
      const dw = poisoned(ctx, [d]);
      rmsNormBackward(ctx, dy.t, x.t, w.t, rstd, { dxOut: dx, dwOut: dw });
      const ref = refForward(x.data, w.data, rows, d, eps);
      const refB = refBackward(dy.data, x.data, w.data, rows, d, eps);
      expect(relErr(await get(ctx, y), ref.y)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, rstd), ref.rstd)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dx), refB.dx)).toBeLessThan(1e-4);
      expect(relErr(await get(ctx, dw), refB.dw)).toBeLessThan(1e-4);
      release(ctx, x.t, w.t, dy.t, y, rstd, dx, dw);
    });
  }

  it('fused residual add: sum, y, rstd and the backward through the sum', async () => {
    for (const [rows, d, xd, rd] of [
      [37, 100, 'f32', 'bf16'],
      [4, 64, 'f16', 'f16'],
      [2, 33001, 'f32', 'f32'],
    ] as [number, number, DType, DType][]) {
      const eps = 1e-6;
      const x = randTensor(ctx, [rows, d], xd, 5 + d);
      const r = randTensor(ctx, [rows, d], rd, 6 + d);
      const w = randTensor(ctx, [d], 'f32', 7 + d);
      const dy = randTensor(ctx, [rows, d], 'f32', 8 + d);
      const g = randTensor(ctx, [rows, d], 'f32', 9 + d);
      const out = addRmsNorm(ctx, x.t, r.t, w.t, { eps, out: poisoned(ctx, [rows, d]), sumOut: poisoned(ctx, [rows, d]) });
      const s = x.data.map((v, i) => v + r.data[i]!);
      const ref = refForward(s, w.data, rows, d, eps);
      expect(relErr(await get(ctx, out.sum), s)).toBeLessThan(1e-6);
      expect(relErr(await get(ctx, out.y), ref.y)).toBeLessThan(1e-5);
      const b = addRmsNormBackward(ctx, dy.t, out.sum, w.t, out.rstd, { sumGrad: g.t, dsumOut: poisoned(ctx, [rows, d]) });
      const refB = refBackward(dy.data, s, w.data, rows, d, eps);
      expect(relErr(await get(ctx, b.dsum), refB.dx.map((v, i) => v + g.data[i]!))).toBeLessThan(1e-4);
      expect(relErr(await get(ctx, b.dw), refB.dw)).toBeLessThan(1e-4);
      release(ctx, x.t, r.t, w.t, dy.t, g.t, out.y, out.sum, out.rstd, b.dsum, b.dw);
    }
  });

  it('weightOffset (Gemma: * (1 + w)): reference backward matches finite differences', () => {
    const [rows, d, eps] = [3, 7, 1e-6];
    const x = randn(rows * d, 21);
    const w = randn(d, 22, 0.1);
    const dy = randn(rows * d, 23);
    const { dx, dw } = refBackward(dy, x, w, rows, d, eps, 1);
    expect(relErr(dx, finiteDiff((xx) => dot(refForward(xx, w, rows, d, eps, 1).y, dy), x))).toBeLessThan(1e-7);
    expect(relErr(dw, finiteDiff((ww) => dot(refForward(x, ww, rows, d, eps, 1).y, dy), w))).toBeLessThan(1e-7);
  });

  for (const [rows, d, xd, wd] of [
    [5, 64, 'f32', 'f32'],
    [37, 100, 'bf16', 'bf16'],
    [5, 2050, 'f32', 'bf16'],
  ] as [number, number, DType, DType][])
    it(`weightOffset 1: forward and backward, x ${xd}[${rows}, ${d}], w ${wd}, plain and fused`, async () => {
      const eps = 1e-6;
      const x = randTensor(ctx, [rows, d], xd, rows * 10 + d);
      const res = randTensor(ctx, [rows, d], xd, rows * 10 + d + 1);
      const w = randTensor(ctx, [d], wd, d + 3, 0.1); // Gemma stores small weights around 0
      const dy = randTensor(ctx, [rows, d], xd, d + 5);
      const g = randTensor(ctx, [rows, d], 'f32', d + 6);
      const y = poisoned(ctx, [rows, d]);
      const rstd = poisoned(ctx, [rows]);
      rmsNorm(ctx, x.t, w.t, { eps, out: y, rstdOut: rstd, weightOffset: 1 });
      const b = rmsNormBackward(ctx, dy.t, x.t, w.t, rstd, { dxOut: poisoned(ctx, [rows, d]), dwOut: poisoned(ctx, [d]), weightOffset: 1 });
      const ref = refForward(x.data, w.data, rows, d, eps, 1);
      const refB = refBackward(dy.data, x.data, w.data, rows, d, eps, 1);
      expect(relErr(await get(ctx, y), ref.y)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, b.dx), refB.dx)).toBeLessThan(1e-4);
      expect(relErr(await get(ctx, b.dw), refB.dw)).toBeLessThan(1e-4);
      // fused residual form
      const f = addRmsNorm(ctx, x.t, res.t, w.t, { eps, weightOffset: 1, out: poisoned(ctx, [rows, d]), sumOut: poisoned(ctx, [rows, d]) });
      const s = x.data.map((v, i) => v + res.data[i]!);
      expect(relErr(await get(ctx, f.y), refForward(s, w.data, rows, d, eps, 1).y)).toBeLessThan(1e-5);
      const fb = addRmsNormBackward(ctx, dy.t, f.sum, w.t, f.rstd, { sumGrad: g.t, dsumOut: poisoned(ctx, [rows, d]), weightOffset: 1 });
      const refF = refBackward(dy.data, s, w.data, rows, d, eps, 1);
      expect(relErr(await get(ctx, fb.dsum), refF.dx.map((v, i) => v + g.data[i]!))).toBeLessThan(1e-4);
      expect(relErr(await get(ctx, fb.dw), refF.dw)).toBeLessThan(1e-4);
      release(ctx, x.t, res.t, w.t, dy.t, g.t, y, rstd, b.dx, b.dw, f.y, f.sum, f.rstd, fb.dsum, fb.dw);
    });

  it('portable workgroup reductions (no subgroups)', async () => {
    llmTuning.subgroups = false;
    try {
      const [rows, d, eps] = [37, 100, 1e-5];
      const x = randTensor(ctx, [rows, d], 'f32', 1);
      const w = randTensor(ctx, [d], 'f32', 2);
      const dy = randTensor(ctx, [rows, d], 'f32', 3);
      const f = rmsNorm(ctx, x.t, w.t, { eps });
      const b = rmsNormBackward(ctx, dy.t, x.t, w.t, f.rstd);
      expect(relErr(await get(ctx, f.y), refForward(x.data, w.data, rows, d, eps).y)).toBeLessThan(1e-5);
      const refB = refBackward(dy.data, x.data, w.data, rows, d, eps);
      expect(relErr(await get(ctx, b.dx), refB.dx)).toBeLessThan(1e-4);
      expect(relErr(await get(ctx, b.dw), refB.dw)).toBeLessThan(1e-4);
      release(ctx, x.t, w.t, dy.t, f.y, f.rstd, b.dx, b.dw);
    } finally {
      llmTuning.subgroups = true;
    }
  });

  it('validates shapes', () => {
    const x = upload(ctx, new Float32Array(12), [3, 4]);
    const w = upload(ctx, new Float32Array(5), [5]);
    expect(() => rmsNorm(ctx, x, w)).toThrow(ShapeError);
    expect(() => rmsNorm(ctx, x, w)).toThrow(/\[5\].*\[3, 4\]/);
    const w4 = upload(ctx, new Float32Array(4), [4]);
    expect(() => rmsNorm(ctx, x, w4, { weightOffset: Number.NaN })).toThrow(ConfigError);
    release(ctx, w4);
    release(ctx, x, w);
  });
});
