import { createContext, f16BitsToF32, f32ToF16Bits, testing, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { add, autocast, linear, mul, scale, sum, Tensor } from '../index';
import { randn } from '../random';
import { loraLinear } from './lora-linear';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const h16 = (x: number) => f16BitsToF32(f32ToF16Bits(x));
const [B, T, IN, OUT, R] = [2, 5, 19, 13, 4];
const ROWS = B * T;
const S = 2.5;

/** float64 LoRA forward and backward for loss = sum(y * c); `h` rounds what the f16 path rounds (x, W and dY:
 *  the low-rank factors A, B, u = x A^T and v = dY B stay f32). */
function reference(xv: Float32Array, wv: Float32Array, av: Float32Array, bv: Float32Array, biasv: Float32Array, cv: Float32Array, h: (x: number) => number) {
  const y = new Float64Array(ROWS * OUT);
  const u = new Float64Array(ROWS * R);
  for (let i = 0; i < ROWS; i++)
    for (let k = 0; k < R; k++) {
      let s = 0;
      for (let j = 0; j < IN; j++) s += h(xv[i * IN + j]!) * av[k * IN + j]!;
      u[i * R + k] = s;
    }
  for (let i = 0; i < ROWS; i++)
    for (let o = 0; o < OUT; o++) {
      let base = biasv[o]!;
      for (let j = 0; j < IN; j++) base += h(xv[i * IN + j]!) * h(wv[o * IN + j]!);
      let low = 0;
      for (let k = 0; k < R; k++) low += u[i * R + k]! * bv[o * R + k]!;
      y[i * OUT + o] = base + S * low;
    }
  const v = new Float64Array(ROWS * R);
  for (let i = 0; i < ROWS; i++)
    for (let k = 0; k < R; k++) {
      let s = 0;
      for (let o = 0; o < OUT; o++) s += h(cv[i * OUT + o]!) * bv[o * R + k]!;
      v[i * R + k] = s;
    }
  const dx = new Float64Array(ROWS * IN);
  const dw = new Float64Array(OUT * IN);
  const da = new Float64Array(R * IN);
  const db = new Float64Array(OUT * R);
  const dbias = new Float64Array(OUT);
  for (let i = 0; i < ROWS; i++) {
    for (let j = 0; j < IN; j++) {
      let s = 0;
      for (let o = 0; o < OUT; o++) s += h(cv[i * OUT + o]!) * h(wv[o * IN + j]!);
      let l = 0;
      for (let k = 0; k < R; k++) l += v[i * R + k]! * av[k * IN + j]!;
      dx[i * IN + j] = s + S * l;
    }
    for (let o = 0; o < OUT; o++) {
      const g = h(cv[i * OUT + o]!);
      dbias[o]! += cv[i * OUT + o]!;
      for (let j = 0; j < IN; j++) dw[o * IN + j]! += g * h(xv[i * IN + j]!);
      for (let k = 0; k < R; k++) db[o * R + k]! += S * g * u[i * R + k]!;
    }
    for (let k = 0; k < R; k++) for (let j = 0; j < IN; j++) da[k * IN + j]! += S * v[i * R + k]! * h(xv[i * IN + j]!);
  }
  return { y, dx, dw, da, db, dbias };
}

/** loraLinear against the composition add(linear(x, W), scale(linear(linear(x, A), B), s)) in f32: the output
 *  and the gradients of x, A and B for loss = sum(y * c), with x, A, B, c drawn from seeds `seed`.. */
async function expectComposition(w: Tensor, r: number, s: number, seed: number): Promise<void> {
  const x = Tensor.fromArray(ctx, randn(ROWS * IN, seed), [ROWS, IN], { requiresGrad: true });
  const a = Tensor.fromArray(ctx, randn(r * IN, seed + 1), [r, IN], { requiresGrad: true });
  const b = Tensor.fromArray(ctx, randn(OUT * r, seed + 2), [OUT, r], { requiresGrad: true });
  const c = Tensor.fromArray(ctx, randn(ROWS * OUT, seed + 3), [ROWS, OUT]);
  const run = async (fused: boolean) => {
    const y = fused ? loraLinear(x, w, null, a, b, s) : add(linear(x, w), scale(linear(linear(x, a), b), s));
    const loss = sum(mul(y, c));
    loss.backward();
    const out = [await y.toArray(), await x.grad!.toArray(), await a.grad!.toArray(), await b.grad!.toArray()];
    for (const t of [x, a, b]) t.grad = null;
    y.dispose();
    loss.dispose();
    return out;
  };
  const fused = await run(true);
  const comp = await run(false);
  for (let i = 0; i < fused.length; i++) expect(testing.relErr(fused[i]!, comp[i]!)).toBeLessThan(1e-5);
  for (const t of [x, a, b, c]) t.dispose();
}

describe('loraLinear (the fused LoRA projection)', () => {
  it.each([
    ['f32', (x: number) => x, 1e-5],
    ['f16', h16, 1e-5],
  ] as const)('forward and every gradient match float64 (compute %s; odd sizes, bias, W trainable)', async (compute, h, tol) => {
    const xv = randn(ROWS * IN, 1);
    const wv = randn(OUT * IN, 2);
    const av = randn(R * IN, 3);
    const bv = randn(OUT * R, 4);
    const biasv = randn(OUT, 5);
    const cv = randn(ROWS * OUT, 6);
    const x = Tensor.fromArray(ctx, xv, [B, T, IN], { requiresGrad: true });
    const w = Tensor.fromArray(ctx, wv, [OUT, IN], { requiresGrad: true });
    const a = Tensor.fromArray(ctx, av, [R, IN], { requiresGrad: true });
    const b = Tensor.fromArray(ctx, bv, [OUT, R], { requiresGrad: true });
    const bias = Tensor.fromArray(ctx, biasv, [OUT], { requiresGrad: true });
    const c = Tensor.fromArray(ctx, cv, [B, T, OUT]);
    const y = loraLinear(x, w, bias, a, b, S, { compute });
    expect(y.shape).toEqual([B, T, OUT]);
    const loss = sum(mul(y, c));
    loss.backward();
    const ref = reference(xv, wv, av, bv, biasv, cv, h);
    expect(testing.relErr(await y.toArray(), ref.y)).toBeLessThan(tol);
    expect(testing.relErr(await x.grad!.toArray(), ref.dx)).toBeLessThan(tol);
    expect(testing.relErr(await w.grad!.toArray(), ref.dw)).toBeLessThan(tol);
    expect(testing.relErr(await a.grad!.toArray(), ref.da)).toBeLessThan(tol);
    expect(testing.relErr(await b.grad!.toArray(), ref.db)).toBeLessThan(tol);
    expect(testing.relErr(await bias.grad!.toArray(), ref.dbias)).toBeLessThan(tol);
    if (compute === 'f16') {
      // the rounding is real: the f32 reference is farther away than f32 rounding
      const ref32 = reference(xv, wv, av, bv, biasv, cv, (v) => v);
      expect(testing.relErr(await y.toArray(), ref32.y)).toBeGreaterThan(1e-5);
    }
    for (const t of [x, w, a, b, bias, c, y, loss]) t.dispose();
  });

  it('equals the composition add(linear(x, W), scale(linear(linear(x, A), B), s)) in f32, frozen f16 W, no bias', async () => {
    const w = Tensor.fromArray(ctx, randn(OUT * IN, 8), [OUT, IN], { dtype: 'f16' });
    await expectComposition(w, R, S, 7);
    expect(w.grad).toBeNull();
    w.dispose();
  });

  it('ranks over the low-rank kernels (r = 70) run on matmul and equal the composition', async () => {
    const w = Tensor.fromArray(ctx, randn(OUT * IN, 17), [OUT, IN]);
    await expectComposition(w, 70, 0.5, 16);
    w.dispose();
  });

  it("follows the autocast scope when no compute is given", async () => {
    const x = Tensor.fromArray(ctx, randn(ROWS * IN, 12), [ROWS, IN]);
    const w = Tensor.fromArray(ctx, randn(OUT * IN, 13), [OUT, IN]);
    const a = Tensor.fromArray(ctx, randn(R * IN, 14), [R, IN]);
    const b = Tensor.fromArray(ctx, randn(OUT * R, 15), [OUT, R]);
    const scoped = await autocast('f16', () => loraLinear(x, w, null, a, b, S)).toArray();
    const f16 = await loraLinear(x, w, null, a, b, S, { compute: 'f16' }).toArray();
    const f32 = await loraLinear(x, w, null, a, b, S).toArray();
    expect([...scoped]).toEqual([...f16]);
    expect(testing.relErr(scoped, f32)).toBeGreaterThan(1e-5);
    for (const t of [x, w, a, b]) t.dispose();
  });

  it('refuses A and B that do not fit the weight', () => {
    const x = Tensor.zeros(ctx, [3, IN]);
    const w = Tensor.zeros(ctx, [OUT, IN]);
    const a = Tensor.zeros(ctx, [R, IN + 1]);
    const b = Tensor.zeros(ctx, [OUT, R]);
    expect(() => loraLinear(x, w, null, a, b, S)).toThrow(/do not fit weight \[13, 19\]/);
    for (const t of [x, w, a, b]) t.dispose();
  });
});
