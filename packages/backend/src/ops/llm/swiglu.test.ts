import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { swiglu, swigluBackward, swigluFused, swigluFusedBackward } from './swiglu';
import { get, poisoned, quantize, randTensor } from './test-util';
import { refSwiglu as refFwd, refSwigluBackward as refBwd, swigluHalves as halves } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('swiglu', () => {
  it('reference backward matches finite differences', () => {
    const g = randn(20, 1, 3);
    const u = randn(20, 2);
    const dy = randn(20, 3);
    const { dg, du } = refBwd(dy, g, u);
    expect(relErr(dg, finiteDiff((gg) => dot(refFwd(gg, u), dy), g))).toBeLessThan(1e-7);
    expect(relErr(du, finiteDiff((uu) => dot(refFwd(g, uu), dy), u))).toBeLessThan(1e-7);
  });

  const cases: [number[], DType, DType][] = [
    [[1, 17], 'f32', 'f32'],
    [[3, 64], 'f16', 'bf16'],
    [[37, 100], 'bf16', 'bf16'],
    [[2, 5, 1031], 'f32', 'f16'],
    [[4, 1024], 'f32', 'f32'], // whole workgroups only (the unchecked fast path)
  ];
  for (const [shape, gd, ud] of cases) {
    it(`two tensors: gate ${gd}, up ${ud} ${JSON.stringify(shape)}`, async () => {
      const n = shape.reduce((a, b) => a * b);
      const g = randTensor(ctx, shape, gd, n, 3);
      const u = randTensor(ctx, shape, ud, n + 1);
      const dy = randTensor(ctx, shape, gd, n + 2);
      const out = swiglu(ctx, g.t, u.t, { out: poisoned(ctx, shape) });
      const { dgate, dup } = swigluBackward(ctx, dy.t, g.t, u.t, { dgateOut: poisoned(ctx, shape), dupOut: poisoned(ctx, shape) });
      const rb = refBwd(dy.data, g.data, u.data);
      expect(relErr(await get(ctx, out), refFwd(g.data, u.data))).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dgate), rb.dg)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dup), rb.du)).toBeLessThan(1e-5);
      release(ctx, g.t, u.t, dy.t, out, dgate, dup);
    });
  }

  for (const [rows, inner, dt] of [
    [3, 17, 'f32'],
    [37, 100, 'bf16'],
    [5, 64, 'f16'],
  ] as [number, number, DType][]) {
    it(`fused [${rows}, 2*${inner}] ${dt}`, async () => {
      const gu = randTensor(ctx, [rows, 2 * inner], dt, rows + inner, 3);
      const dy = randTensor(ctx, [rows, inner], 'f32', rows);
      const out = swigluFused(ctx, gu.t, { out: poisoned(ctx, [rows, inner]) });
      const dgu = swigluFusedBackward(ctx, dy.t, gu.t, { out: poisoned(ctx, [rows, 2 * inner]) });
      const { g, u } = halves(gu.data, rows, inner);
      const rb = refBwd(dy.data, g, u);
      expect(relErr(await get(ctx, out), refFwd(g, u))).toBeLessThan(1e-5);
      const got = await get(ctx, dgu);
      const { g: gotG, u: gotU } = halves(got, rows, inner);
      expect(relErr(gotG, rb.dg)).toBeLessThan(1e-5);
      expect(relErr(gotU, rb.du)).toBeLessThan(1e-5);
      release(ctx, gu.t, dy.t, out, dgu);
    });
  }

  it('saturates without NaN for large |gate|', async () => {
    const gv = quantize('f32', [-200, -90, -20, 0, 20, 90, 200, 1e-30]);
    const g = upload(ctx, gv, [8]);
    const u = upload(ctx, new Float32Array(8).fill(2), [8]);
    const out = await get(ctx, swiglu(ctx, g, u));
    expect(relErr(out, refFwd(gv, new Float64Array(8).fill(2)))).toBeLessThan(1e-6);
    const { dgate } = swigluBackward(ctx, u, g, u);
    const dg = await get(ctx, dgate);
    expect(dg.every(Number.isFinite)).toBe(true);
    release(ctx, g, u);
  });

  it('16-bit subnormals and extremes decode exactly on the word-pair path', async () => {
    const vals = [2 ** -24, -(2 ** -24), 3 * 2 ** -20, 2 ** -15, -(2 ** -14), 65504, -65504, 0, -0, 1e-3, 7, -7];
    for (const dt of ['f16', 'bf16'] as DType[]) {
      const g = quantize(dt, vals);
      const u = quantize(dt, vals.map((_, i) => (i % 2 ? 1.5 : -0.75)));
      const gt = upload(ctx, g, [2, 6], dt);
      const ut = upload(ctx, u, [2, 6], dt);
      const out = await get(ctx, swiglu(ctx, gt, ut, { out: poisoned(ctx, [2, 6]) }));
      const ref = refFwd(g, u);
      for (let i = 0; i < vals.length; i++) expect(Math.abs(out[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-6 + 1e-30);
      release(ctx, gt, ut);
    }
  });

  it('validates shapes', () => {
    const a = upload(ctx, new Float32Array(6), [2, 3]);
    const b = upload(ctx, new Float32Array(6), [3, 2]);
    expect(() => swiglu(ctx, a, b)).toThrow(ShapeError);
    expect(() => swiglu(ctx, a, b)).toThrow(/\[2, 3\].*\[3, 2\]/);
    expect(() => swigluFused(ctx, a)).toThrow(/even/);
    release(ctx, a, b);
  });
});
