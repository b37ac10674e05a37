import { createContext, download, f16BitsToF32, f32ToF16Bits, gemv16, testing, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autocast, checkpoint, computeDtype, linear, mul, sum, Tensor, toCompute } from '../index';
import { randn } from '../random';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const h = (x: number) => f16BitsToF32(f32ToF16Bits(x));
const relErr = testing.relErr;

describe("linear with compute: 'f16' (mixed precision)", () => {
  // y = h(x) h(W)^T + b; with loss = sum(y * c): dY = c, dx = h(c) h(W), dW = h(c)^T h(x), db = sum_rows c
  it.each([
    ['f32 weight', 'f32'],
    ['f16 weight', 'f16'],
  ] as const)('forward and every gradient match float64 of the f16-rounded operands (%s), odd sizes', async (_n, wdt) => {
    const [B, T, IN, OUT] = [2, 5, 19, 13];
    const R = B * T;
    const xv = randn(R * IN, 1);
    const wv = randn(OUT * IN, 2);
    const bv = randn(OUT, 3);
    const cv = randn(R * OUT, 4);
    const x = Tensor.fromArray(ctx, xv, [B, T, IN], { requiresGrad: true });
    const w = Tensor.fromArray(ctx, wv, [OUT, IN], { requiresGrad: true, dtype: wdt });
    const b = Tensor.fromArray(ctx, bv, [OUT], { requiresGrad: true });
    const c = Tensor.fromArray(ctx, cv, [B, T, OUT]);
    const y = linear(x, w, b, { compute: 'f16' });
    expect(y.shape).toEqual([B, T, OUT]);
    expect(y.dtype).toBe('f32');
    const loss = sum(mul(y, c));
    loss.backward();
    const yRef = new Float64Array(R * OUT);
    const dx = new Float64Array(R * IN);
    const dw = new Float64Array(OUT * IN);
    const db = new Float64Array(OUT);
    for (let r = 0; r < R; r++)
      for (let o = 0; o < OUT; o++) {
        let s = bv[o]!;
        const g = h(cv[r * OUT + o]!);
        for (let i = 0; i < IN; i++) {
          s += h(xv[r * IN + i]!) * h(wv[o * IN + i]!);
          dx[r * IN + i]! += g * h(wv[o * IN + i]!);
          dw[o * IN + i]! += g * h(xv[r * IN + i]!);
        }
        yRef[r * OUT + o] = s;
        db[o]! += cv[r * OUT + o]!;
      }
    expect(relErr(await y.toArray(), yRef)).toBeLessThan(1e-5);
    expect(relErr(await x.grad!.toArray(), dx)).toBeLessThan(1e-5);
    expect(relErr(await w.grad!.toArray(), dw)).toBeLessThan(1e-5);
    expect(relErr(await b.grad!.toArray(), db)).toBeLessThan(1e-5);
    // the f16 rounding is real: the f32 op differs from the reference by more than f32 rounding
    const y32 = await linear(x, w, b).toArray();
    expect(relErr(y32, yRef)).toBeGreaterThan(1e-5);
    for (const t of [x, w, b, c, y, loss]) t.dispose();
  });

  it("autocast('f16') makes plain linear calls f16 (checkpoint recomputes under it); nothing leaks out of the scope", async () => {
    const [R, IN, OUT] = [6, 23, 9];
    const x = Tensor.fromArray(ctx, randn(R * IN, 5), [R, IN], { requiresGrad: true });
    const w = Tensor.fromArray(ctx, randn(OUT * IN, 6), [OUT, IN], { requiresGrad: true });
    const want = await linear(x, w, null, { compute: 'f16' }).toArray();
    const y32 = await linear(x, w).toArray();
    expect(relErr(y32, want)).toBeGreaterThan(1e-6);
    const got = autocast('f16', () => {
      expect(computeDtype()).toBe('f16');
      expect(toCompute(x).dtype).toBe('f16');
      return linear(x, w);
    });
    expect(computeDtype()).toBe('f32');
    expect(toCompute(x)).toBe(x);
    expect(relErr(await got.toArray(), want)).toBe(0);
    // gradients through a checkpoint: the recomputation in backward must run in f16 like the forward
    const ref = linear(x, w, null, { compute: 'f16' });
    sum(ref).backward();
    const dw = await w.grad!.toArray();
    w.zeroGrad();
    x.zeroGrad();
    const ck = autocast('f16', () => checkpoint((a) => linear(a, w), x));
    sum(ck).backward();
    expect(relErr(await w.grad!.toArray(), dw)).toBe(0);
    expect(() => autocast('bf16' as 'f16', () => 0)).toThrow(/compute dtype must be 'f32' or 'f16'/);
    for (const t of [x, w, got, ref, ck]) t.dispose();
  });
});

describe('linear of a 16-bit weight and a few rows (decoding)', () => {
  it('runs the GEMV up to 16 rows (bit for bit gemv16, with bias) and the tiled product from 17; both match float64, and the gradient flows', async () => {
    const [IN, OUT] = [1000, 37];
    const wv = randn(OUT * IN, 5);
    const bv = randn(OUT, 6);
    for (const dt of ['bf16', 'f16'] as const)
      for (const R of [1, 3, 16, 17]) {
        const x = Tensor.fromArray(ctx, randn(R * IN, 7 + R), [R, IN], { requiresGrad: true });
        const w = Tensor.fromArray(ctx, wv, [OUT, IN], { dtype: dt });
        const b = Tensor.fromArray(ctx, bv, [OUT]);
        const y = linear(x, w, b);
        const got = await y.toArray();
        const xs = await x.toArray();
        const ws = await w.toArray();
        const ref = new Float64Array(R * OUT);
        for (let r = 0; r < R; r++)
          for (let o = 0; o < OUT; o++) {
            let s = bv[o]!;
            for (let i = 0; i < IN; i++) s += xs[r * IN + i]! * ws[o * IN + i]!;
            ref[r * OUT + o] = s;
          }
        expect(relErr(got, ref)).toBeLessThan(2e-6);
        if (R <= 16) expect(Array.from(got)).toEqual(Array.from(await download(ctx, gemv16(ctx, x.data, w.data, { bias: b.data })))); // the same kernel
        sum(y).backward();
        expect(x.grad).toBeTruthy();
        for (const t of [x, w, b, y]) t.dispose();
      }
  });

  it('an f32 weight takes the GEMV only where nothing needs a gradient (inference), else the tiled product', async () => {
    const [IN, OUT] = [200, 21];
    const wv = randn(OUT * IN, 8);
    const names: string[] = [];
    const orig = ctx.dispatch.bind(ctx);
    ctx.dispatch = ((k, ...rest) => (names.push(k.name), orig(k, ...rest))) as typeof ctx.dispatch;
    try {
      for (const [grad, R] of [[false, 3], [true, 3], [false, 17]] as const) {
        names.length = 0;
        const x = Tensor.fromArray(ctx, randn(R * IN, 9 + R), [R, IN]);
        const w = Tensor.fromArray(ctx, wv, [OUT, IN], { requiresGrad: grad });
        const y = linear(x, w);
        const got = await y.toArray();
        const xs = await x.toArray();
        const ref = new Float64Array(R * OUT);
        for (let r = 0; r < R; r++)
          for (let o = 0; o < OUT; o++) {
            let s = 0;
            for (let i = 0; i < IN; i++) s += xs[r * IN + i]! * wv[o * IN + i]!;
            ref[r * OUT + o] = s;
          }
        expect(relErr(got, ref)).toBeLessThan(2e-6);
        const gemv = names.includes('gemv16');
        expect(gemv, `grad ${grad}, ${R} rows`).toBe(!grad && R <= 16 && ctx.info.features.subgroups);
        for (const t of [x, w, y]) t.dispose();
      }
    } finally {
      ctx.dispatch = orig;
    }
  });
});
