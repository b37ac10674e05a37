// quantLoraLinear (QLoRA's fused projection on a quantized base) against float64: forward and the gradients of x,
// A, B and the bias, many rows (W dequantized to f16, x and dY rounded to f16) and decode rows (the GEMV reads x and
// the codes as they are); the reference's backward against finite differences of its forward; the memory it keeps
// (x in f16, u) and its transient peak (one f16 copy of W, no [tokens, out] temporaries beside the output).
import { createContext, dequantize, download, f16BitsToF32, f32ToF16Bits, quantize, quantSpec, releaseQuant, sizeClass, testing, type Context, type QuantTensor } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mul, quantLoraLinear, sum, Tensor } from '../index';
import { randn } from '../random';

let ctx: Context;
let w: QuantTensor;
let wd: Float64Array;
const [N, K, R, S] = [13, 70, 4, 2.5];
beforeAll(async () => {
  ctx = await createContext();
  const W = Tensor.randn(ctx, [N, K], { seed: 4, std: 0.2 });
  w = quantize(ctx, W.data, quantSpec('nf4', 64, true));
  W.dispose();
  const d = dequantize(ctx, w, 'f32');
  wd = Float64Array.from(await download(ctx, d));
  ctx.release(d.buffer);
});
afterAll(() => {
  releaseQuant(ctx, w);
  ctx.destroy();
});

const h16 = (x: number) => f16BitsToF32(f32ToF16Bits(x));
const id = (x: number) => x;

/** float64 forward of y = hb(x) hb(W)^T + bias + S (h(x) A^T) B^T and, for loss = sum(y * c), the backward
 *  (dY rounded by h for its products, A, B, u and v in f32 as the op reads them). */
function reference(rows: number, xv: Float64Array, av: Float64Array, bv: Float64Array, biasv: Float64Array, cv: Float64Array, h: (x: number) => number, hb: (x: number) => number) {
  const y = new Float64Array(rows * N);
  const u = new Float64Array(rows * R);
  const v = new Float64Array(rows * R);
  for (let i = 0; i < rows; i++)
    for (let k = 0; k < R; k++) {
      let s = 0;
      for (let j = 0; j < K; j++) s += h(xv[i * K + j]!) * av[k * K + j]!;
      u[i * R + k] = s;
      let t = 0;
      for (let o = 0; o < N; o++) t += h(cv[i * N + o]!) * bv[o * R + k]!;
      v[i * R + k] = t;
    }
  const dx = new Float64Array(rows * K);
  const da = new Float64Array(R * K);
  const db = new Float64Array(N * R);
  const dbias = new Float64Array(N);
  for (let i = 0; i < rows; i++) {
    for (let o = 0; o < N; o++) {
      let base = biasv[o]!;
      for (let j = 0; j < K; j++) base += hb(xv[i * K + j]!) * hb(wd[o * K + j]!);
      let low = 0;
      for (let k = 0; k < R; k++) low += u[i * R + k]! * bv[o * R + k]!;
      y[i * N + o] = base + S * low;
      dbias[o]! += cv[i * N + o]!;
      for (let k = 0; k < R; k++) db[o * R + k]! += S * h(cv[i * N + o]!) * u[i * R + k]!;
    }
    for (let j = 0; j < K; j++) {
      let s = 0;
      for (let o = 0; o < N; o++) s += h(cv[i * N + o]!) * h(wd[o * K + j]!);
      let l = 0;
      for (let k = 0; k < R; k++) l += v[i * R + k]! * av[k * K + j]!;
      dx[i * K + j] = s + S * l;
    }
    for (let k = 0; k < R; k++) for (let j = 0; j < K; j++) da[k * K + j]! += S * v[i * R + k]! * h(xv[i * K + j]!);
  }
  return { y, dx, da, db, dbias };
}

describe('quantLoraLinear (QLoRA projection, NF4 base)', () => {
  it('the float64 reference backward matches finite differences of its forward', () => {
    const rows = 2;
    const [xv, av, bv, biasv, cv] = [randn(rows * K, 1), randn(R * K, 2), randn(N * R, 3), randn(N, 4), randn(rows * N, 5)].map((a) => Float64Array.from(a));
    const loss = (x: Float64Array, a: Float64Array, b: Float64Array, bias: Float64Array) => reference(rows, x, a, b, bias, cv!, id, id).y.reduce((s, yv, i) => s + yv * cv![i]!, 0);
    const ref = reference(rows, xv!, av!, bv!, biasv!, cv!, id, id);
    const idx = [0, 7, 69, 100, 139];
    const pick = (g: Float64Array, ii: number[]) => ii.map((i) => g[i]!);
    expect(testing.relErr(pick(testing.finiteDiff((x) => loss(x, av!, bv!, biasv!), xv!, 1e-6, idx), idx), pick(ref.dx, idx))).toBeLessThan(1e-6);
    expect(testing.relErr(pick(testing.finiteDiff((a) => loss(xv!, a, bv!, biasv!), av!, 1e-6, idx), idx), pick(ref.da, idx))).toBeLessThan(1e-6);
    const bi = [0, 5, 51];
    expect(testing.relErr(pick(testing.finiteDiff((b) => loss(xv!, av!, b, biasv!), bv!, 1e-6, bi), bi), pick(ref.db, bi))).toBeLessThan(1e-6);
    expect(testing.relErr(pick(testing.finiteDiff((b) => loss(xv!, av!, bv!, b), biasv!, 1e-6, [0, 12]), [0, 12]), pick(ref.dbias, [0, 12]))).toBeLessThan(1e-6);
  });

  for (const rows of [3, 33])
    it(`forward and the gradients of x, A, B and the bias match float64 (${rows} rows: ${rows <= 16 ? 'decode GEMV' : 'f16 dequantized W'})`, async () => {
      const xv = randn(rows * K, 10 + rows);
      const av = randn(R * K, 11);
      const bv = randn(N * R, 12, 0.5);
      const biasv = randn(N, 13);
      const cv = randn(rows * N, 14);
      const x = Tensor.fromArray(ctx, xv, [rows, K], { requiresGrad: true });
      const a = Tensor.fromArray(ctx, av, [R, K], { requiresGrad: true });
      const b = Tensor.fromArray(ctx, bv, [N, R], { requiresGrad: true });
      const bias = Tensor.fromArray(ctx, biasv, [N], { requiresGrad: true });
      const c = Tensor.fromArray(ctx, cv, [rows, N]);
      const y = quantLoraLinear(x, w, bias, a, b, S);
      expect(y.node?.name).toBe('quant-lora-linear');
      const loss = sum(mul(y, c));
      loss.backward();
      const ref = reference(rows, Float64Array.from(xv), Float64Array.from(av), Float64Array.from(bv), Float64Array.from(biasv), Float64Array.from(cv), h16, rows <= 16 ? id : h16);
      expect(testing.relErr(await y.toArray(), ref.y)).toBeLessThan(1e-5);
      expect(testing.relErr(await x.grad!.toArray(), ref.dx)).toBeLessThan(1e-5);
      expect(testing.relErr(await a.grad!.toArray(), ref.da)).toBeLessThan(1e-5);
      expect(testing.relErr(await b.grad!.toArray(), ref.db)).toBeLessThan(1e-5);
      expect(testing.relErr(await bias.grad!.toArray(), ref.dbias)).toBeLessThan(1e-5);
      for (const t of [x, a, b, bias, c, y, loss]) t.dispose();
    });

  it('keeps x in f16 and u only; its peak is the output, those and one transient f16 copy of W', async () => {
    const rows = 40;
    const x = Tensor.fromArray(ctx, randn(rows * K, 20), [rows, K], { requiresGrad: true });
    const a = Tensor.fromArray(ctx, randn(R * K, 21), [R, K], { requiresGrad: true });
    const b = Tensor.fromArray(ctx, randn(N * R, 22), [N, R], { requiresGrad: true });
    await ctx.sync();
    const live0 = ctx.memory.live;
    ctx.resetPeak();
    const y = quantLoraLinear(x, w, null, a, b, S);
    const [out, xh, u, wh] = [rows * N * 4, rows * K * 2, rows * R * 4, N * K * 2].map(sizeClass);
    expect(ctx.memory.live - live0).toBe(out! + xh! + u!);
    expect(ctx.memory.peak - live0).toBe(out! + xh! + u! + wh!);
    for (const t of [y, x, a, b]) t.dispose();
  });

  it('refuses A and B that do not fit the quantized weight', () => {
    const x = Tensor.zeros(ctx, [3, K]);
    const a = Tensor.zeros(ctx, [R, K + 1]);
    const b = Tensor.zeros(ctx, [N, R]);
    expect(() => quantLoraLinear(x, w, null, a, b, S)).toThrow(/do not fit the quantized weight \[13, 70\]/);
    for (const t of [x, a, b]) t.dispose();
  });
});
