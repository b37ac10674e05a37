import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { geluTanhGate, geluTanhGateBackward, geluTanhGateFused, geluTanhGateFusedBackward } from './gelu-gate';
import { refGeluTanhGate as refFwd, refGeluTanhGateBackward as refBwd, swigluHalves as halves } from './llm.ref';
import { get, poisoned, quantize, randTensor } from './test-util';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('geluTanhGate', () => {
  it('reference: spot values of the tanh formula; backward matches finite differences', () => {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated separately in Python (math, float64)
    const want = [-0.0036373920817729943, -0.15880800939172324, 0.34571400982514394, 1.954597694087775];
    const got = refFwd(Float64Array.from([-3, -1, 0.5, 2]), new Float64Array(4).fill(1));
    want.forEach((w, i) => expect(got[i]).toBeCloseTo(w, 14));
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
    [[4, 1024], 'f32', 'f32'], // whole workgroups only (the unchecked fast path)
  ];
  for (const [shape, gd, ud] of cases) {
    it(`two tensors: gate ${gd}, up ${ud} ${JSON.stringify(shape)}`, async () => {
      const n = shape.reduce((a, b) => a * b);
      const g = randTensor(ctx, shape, gd, n, 3);
      const u = randTensor(ctx, shape, ud, n + 1);
      const dy = randTensor(ctx, shape, gd, n + 2);
      const out = geluTanhGate(ctx, g.t, u.t, { out: poisoned(ctx, shape) });
      const { dgate, dup } = geluTanhGateBackward(ctx, dy.t, g.t, u.t, { dgateOut: poisoned(ctx, shape), dupOut: poisoned(ctx, shape) });
      const rb = refBwd(dy.data, g.data, u.data);
      expect(relErr(await get(ctx, out), refFwd(g.data, u.data))).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dgate), rb.dg)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dup), rb.du)).toBeLessThan(1e-5);
      release(ctx, g.t, u.t, dy.t, out, dgate, dup);
    });
  }

  for (const [rows, inner, dt] of [
    [3, 17, 'f32'],
    [5, 64, 'bf16'],
  ] as [number, number, DType][]) {
    it(`fused [${rows}, 2*${inner}] ${dt}`, async () => {
      const gu = randTensor(ctx, [rows, 2 * inner], dt, rows + inner, 3);
      const dy = randTensor(ctx, [rows, inner], 'f32', rows);
      const out = geluTanhGateFused(ctx, gu.t, { out: poisoned(ctx, [rows, inner]) });
      const dgu = geluTanhGateFusedBackward(ctx, dy.t, gu.t, { out: poisoned(ctx, [rows, 2 * inner]) });
      const { g, u } = halves(gu.data, rows, inner);
      const rb = refBwd(dy.data, g, u);
      expect(relErr(await get(ctx, out), refFwd(g, u))).toBeLessThan(1e-5);
      const got = halves(await get(ctx, dgu), rows, inner);
      expect(relErr(got.g, rb.dg)).toBeLessThan(1e-5);
      expect(relErr(got.u, rb.du)).toBeLessThan(1e-5);
      release(ctx, gu.t, dy.t, out, dgu);
    });
  }

  it('saturates without NaN for large |gate|, exact where the curve is flat', async () => {
    const gv = quantize('f32', [-200, -90, -20, -6, 0, 6, 20, 90, 200, 1e-30]);
    const g = upload(ctx, gv, [10]);
    const u = upload(ctx, new Float32Array(10).fill(2), [10]);
    const out = await get(ctx, geluTanhGate(ctx, g, u));
    const ref = refFwd(gv, new Float64Array(10).fill(2));
    for (let i = 0; i < 10; i++) expect(Math.abs(out[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-5 + 1e-30);
    const { dgate, dup } = geluTanhGateBackward(ctx, u, g, u);
    const rb = refBwd(new Float64Array(10).fill(2), gv, new Float64Array(10).fill(2));
    expect(relErr(await get(ctx, dgate), rb.dg)).toBeLessThan(1e-5);
    expect(relErr(await get(ctx, dup), rb.du)).toBeLessThan(1e-5);
    release(ctx, g, u, dgate, dup);
  });

  it('validates shapes', () => {
    const a = upload(ctx, new Float32Array(6), [2, 3]);
    const b = upload(ctx, new Float32Array(6), [3, 2]);
    expect(() => geluTanhGate(ctx, a, b)).toThrow(ShapeError);
    expect(() => geluTanhGate(ctx, a, b)).toThrow(/geluTanhGate: gate \[2, 3\] and up \[3, 2\] differ/);
    expect(() => geluTanhGateFused(ctx, a)).toThrow(/even/);
    release(ctx, a, b);
  });
});
