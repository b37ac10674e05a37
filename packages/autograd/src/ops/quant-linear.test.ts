// quantLinear through autograd: the input (and bias) gradients against finite differences (gradcheck), for the
// fused kernel on many rows and the decode GEMV on few; the quantized weight gets no gradient. With
// `compute: 'f16'` (QLoRA's mixed precision): forward and input gradient against float64 of the f16-rounded
// operands, and the transient f16 weight neither outlives the forward nor is saved for backward.
import { createContext, dequantize, download, f16BitsToF32, f32ToF16Bits, quantize, quantSpec, releaseQuant, testing, upload, type Context, type QuantTensor } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autocast, cast, gradcheck, mul, quantLinear, sum, Tensor } from '../index';
import { randn } from '../random';

let ctx: Context;
let w: QuantTensor;
beforeAll(async () => {
  ctx = await createContext();
  const W = Tensor.randn(ctx, [9, 70], { seed: 4, std: 0.2 });
  w = quantize(ctx, W.data, quantSpec('nf4', 64, true));
});
afterAll(() => {
  releaseQuant(ctx, w);
  ctx.destroy();
});

const h = (x: number) => f16BitsToF32(f32ToF16Bits(x));

const relErr = testing.relErr;

describe('quantLinear', () => {
  for (const rows of [3, 20])
    it(`passes gradcheck in x and the bias (${rows} rows)`, async () => {
      const x = Tensor.randn(ctx, [rows, 70], { seed: rows, requiresGrad: true });
      const b = Tensor.randn(ctx, [9], { seed: 7, requiresGrad: true });
      const r = await gradcheck((a, c) => quantLinear(a, w, c), [x, b]);
      expect(r.ok, JSON.stringify(r.inputs)).toBe(true);
    });

  it('refuses an input that does not end in in_features', () => {
    const x = new Tensor(ctx, upload(ctx, new Float32Array(2 * 69), [2, 69]), true);
    expect(() => quantLinear(x, w)).toThrow(/in_features 70/);
  });
});

describe("quantLinear with compute: 'f16'", () => {
  // y = h(x) h(Wd)^T + b with Wd the dequantized weight; loss = sum(y * c): dx = h(c) h(Wd), db = sum_rows c
  for (const [rows, tol] of [
    [3, 1e-5], // decode GEMV: x and W exact in f32, so only f32 rounding
    [20, 1e-5],
    [33, 1e-5],
  ] as const)
    it(`forward and input gradient match float64 of the f16-rounded operands (${rows} rows)`, async () => {
      const { N, K } = w.layout;
      const wd = Array.from(await download(ctx, dequantize(ctx, w, 'f32')));
      const xv = randn(rows * K, 10 + rows);
      const bv = randn(N, 11);
      const cv = randn(rows * N, 12);
      const x = Tensor.fromArray(ctx, xv, [rows, K], { requiresGrad: true });
      const b = Tensor.fromArray(ctx, bv, [N], { requiresGrad: true });
      const c = Tensor.fromArray(ctx, cv, [rows, N]);
      const y = quantLinear(x, w, b, { compute: 'f16' });
      expect(y.dtype).toBe('f32');
      sum(mul(y, c)).backward();
      // the decode GEMV reads x and the codes as they are (no f16 rounding); many rows round both to f16
      const r = rows <= 16 ? (v: number) => v : h;
      const yRef = new Float64Array(rows * N);
      const dxRef = new Float64Array(rows * K);
      for (let i = 0; i < rows; i++)
        for (let n = 0; n < N; n++) {
          let s = bv[n]!;
          for (let k = 0; k < K; k++) s += r(xv[i * K + k]!) * r(wd[n * K + k]!);
          yRef[i * N + n] = s;
          for (let k = 0; k < K; k++) dxRef[i * K + k] += h(cv[i * N + n]!) * h(wd[n * K + k]!);
        }
      const dbRef = Array.from({ length: N }, (_, n) => Array.from({ length: rows }, (_, i) => cv[i * N + n]!).reduce((a, v) => a + v, 0));
      expect(relErr(await y.toArray(), yRef)).toBeLessThan(tol);
      expect(relErr(await x.grad!.toArray(), dxRef)).toBeLessThan(tol);
      expect(relErr(await b.grad!.toArray(), dbRef)).toBeLessThan(1e-6);
    });

  it("follows the autocast scope: f16 products inside autocast('f16'), the fused f32 kernels outside", async () => {
    const x = Tensor.randn(ctx, [24, 70], { seed: 30 });
    const f16 = await quantLinear(x, w, null, { compute: 'f16' }).toArray();
    const f32 = await quantLinear(x, w, null, { compute: 'f32' }).toArray();
    expect(relErr(f16, f32)).toBeGreaterThan(1e-5); // the two paths differ by f16 rounding
    expect(await autocast('f16', () => quantLinear(x, w)).toArray()).toEqual(f16);
    expect(await quantLinear(x, w).toArray()).toEqual(f32);
    expect(await autocast('f16', () => quantLinear(x, w, null, { compute: 'f32' })).toArray()).toEqual(f32);
  });

  for (const rows of [3, 24])
    it(`takes an f16 input (what toCompute hands a shared projection under autocast) as the same f16 product (${rows} rows)`, async () => {
      const x = Tensor.randn(ctx, [rows, 70], { seed: 31 + rows });
      const xh = cast(x, 'f16');
      expect(xh.dtype).toBe('f16');
      const want = await quantLinear(x, w, null, { compute: 'f16' }).toArray();
      // decode rows: the GEMV reads x as given, so compare with the f16-rounded input's f32 product
      const ref = rows <= 16 ? await quantLinear(cast(xh, 'f32'), w, null, { compute: 'f16' }).toArray() : want;
      expect(relErr(await quantLinear(xh, w).toArray(), ref)).toBeLessThan(1e-5);
    });

  it('keeps no f16 copy of the weight: live memory after forward is the output alone, and backward frees it again', async () => {
    const rows = 40;
    // a weight whose f16 copy (512 x 256 x 2 bytes = 256 KiB) dwarfs the activations
    const W = Tensor.randn(ctx, [512, 256], { seed: 5, std: 0.1 });
    const q = quantize(ctx, W.data, quantSpec('int4', 64));
    W.dispose();
    const x = Tensor.randn(ctx, [rows, 256], { seed: 6, requiresGrad: true });
    await ctx.sync();
    const before = ctx.memory.live;
    const y = quantLinear(x, q, null, { compute: 'f16' });
    await ctx.sync();
    expect(ctx.memory.live - before).toBeLessThan(2 * rows * 512 * 4); // y [40, 512] f32 and no 256 KiB weight
    sum(y).backward();
    y.dispose();
    await ctx.sync();
    expect(ctx.memory.live - before).toBeLessThan(2 * rows * 256 * 4); // x.grad alone
    releaseQuant(ctx, q);
  });
});
