// The fused dequant-matmul, the decode GEMV and the dequantize-then-matmul path against float64 references.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { f16BitsToF32, f32ToF16Bits, type DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { dot, finiteDiff, randn, relErr, toF32 } from '../../testing';
import { quantSpec } from './formats';
import { quantLinear, quantLinearBackward } from './qmatmul';
import { dequantizeRef } from './quant.ref';
import { quantize, quantScales, releaseQuant } from './quantize';
import { name, readQuant, SPECS, weights } from './quant.test-util';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** x W^T (+ b) in float64 with W [N, K]. */
function refLinear(x: ArrayLike<number>, w: ArrayLike<number>, b: ArrayLike<number> | null, M: number, N: number, K: number): Float64Array {
  const y = new Float64Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = b ? b[n]! : 0;
      for (let k = 0; k < K; k++) s += x[m * K + k]! * w[n * K + k]!;
      y[m * N + n] = s;
    }
  return y;
}

/** dY W in float64: [M, K]. */
function refLinearBackward(dy: ArrayLike<number>, w: ArrayLike<number>, M: number, N: number, K: number): Float64Array {
  const dx = new Float64Array(M * K);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      const g = dy[m * N + n]!;
      for (let k = 0; k < K; k++) dx[m * K + k]! += g * w[n * K + k]!;
    }
  return dx;
}

function poisoned(shape: number[]): DeviceTensor {
  const t = empty(ctx, shape);
  poison(ctx, t);
  return t;
}

describe('fused dequant-matmul', () => {
  it('reference backward matches finite differences', () => {
    const [M, N, K] = [3, 4, 5];
    const x = randn(M * K, 1);
    const w = randn(N * K, 2);
    const dy = randn(M * N, 3);
    const fx = finiteDiff((xx) => dot(refLinear(xx, w, null, M, N, K), dy), x);
    expect(relErr(refLinearBackward(dy, w, M, N, K), fx)).toBeLessThan(1e-7);
  });

  // [M, N, K]: tile multiples and odd sizes; M <= 16 also runs the gemv kernel
  const shapes: [number, number, number][] = [
    [64, 64, 128],
    [70, 67, 100],
    [5, 33, 97],
    [1, 130, 260],
    [16, 9, 64],
    [3, 40, 128], // gemv with 16-byte loads (K a multiple of every block, f32 x)
  ];
  // every shape on one format, three on the others (each kernel variant costs lavapipe a compile)
  for (const [si, spec] of [SPECS[0]!, SPECS[1]!, SPECS[3]!, SPECS[6]!, SPECS[7]!].entries())
    for (const [M, N, K] of si === 0 ? shapes : [shapes[1]!, shapes[2]!, shapes[5]!]) {
      const variants = M <= 16 ? (['tiled', 'gemv'] as const) : (['tiled'] as const);
      it(`${name(spec)} [${M}, ${K}] x [${N}, ${K}]^T: ${variants.join(' and ')} forward, backward`, async () => {
        const w = weights(N, K, M + N);
        const wt = upload(ctx, w, [N, K]);
        const q = quantize(ctx, wt, spec);
        const wq = dequantizeRef(spec, await readQuant(ctx, q)); // the quantized values, in float64
        const xd: DType = si === 0 && M === 5 ? 'f16' : si === 0 && M === 16 ? 'bf16' : 'f32';
        const xt = upload(ctx, randn(M * K, M * 3 + 1), [M, K], xd);
        const x = Float64Array.from(await download(ctx, xt));
        const bias = N % 2 ? upload(ctx, randn(N, 77), [N]) : undefined;
        const b = bias ? Float64Array.from(await download(ctx, bias)) : null;
        const want = refLinear(x, wq, b, M, N, K);
        // the dequantize-then-matmul path computes with W rounded to f16 (and x too on tensor cores)
        const wq16 = wq.map((v) => f16BitsToF32(f32ToF16Bits(v)));
        const want16 = refLinear(x, wq16, b, M, N, K);
        for (const variant of [...variants, 'dequant'] as const) {
          const out = poisoned([M, N]);
          quantLinear(ctx, xt, q, { bias, out, variant });
          expect(relErr(await download(ctx, out), variant === 'dequant' ? want16 : want), variant).toBeLessThan(variant === 'dequant' ? 2e-3 : 2e-6);
          release(ctx, out);
        }
        const dyt = upload(ctx, randn(M * N, 99 + M), [M, N]);
        const dy = Float64Array.from(await download(ctx, dyt));
        for (const variant of ['tiled', 'dequant'] as const) {
          const dx = poisoned([M, K]);
          quantLinearBackward(ctx, dyt, q, dx, variant);
          const ref = refLinearBackward(dy, variant === 'dequant' ? wq16 : wq, M, N, K);
          expect(relErr(await download(ctx, dx), ref), variant).toBeLessThan(variant === 'dequant' ? 2e-3 : 2e-6);
          release(ctx, dx);
        }
        release(ctx, wt, xt, dyt, ...(bias ? [bias] : []));
        releaseQuant(ctx, q);
      });
    }

  it('batched input [2, 3, K] and shape errors', async () => {
    const spec = quantSpec('nf4', 64);
    const [N, K] = [10, 64];
    const q = quantize(ctx, upload(ctx, weights(N, K, 4), [N, K]), spec);
    const wq = dequantizeRef(spec, await readQuant(ctx, q));
    const x = randn(6 * K, 8);
    const y = quantLinear(ctx, upload(ctx, x, [2, 3, K]), q);
    expect(y.shape).toEqual([2, 3, N]);
    expect(relErr(await download(ctx, y), refLinear(toF32(x), wq, null, 6, N, K))).toBeLessThan(2e-6);
    expect(() => quantLinear(ctx, upload(ctx, x.slice(0, 6 * 63), [6, 63]), q)).toThrow(/in_features 64/);
    expect(() => quantLinearBackward(ctx, upload(ctx, x.slice(0, 6), [1, 6]), q)).toThrow(ShapeError);
    expect(() => quantLinear(ctx, upload(ctx, randn(17 * K, 1), [17, K]), q, { variant: 'gemv' })).toThrow(/at most 16/);
  });

  it('double-quantized scales decode on the GPU as on the host', async () => {
    const spec = quantSpec('nf4', 32, true);
    const [N, K] = [40, 320]; // 400 absmax values: two 256-blocks
    const q = quantize(ctx, upload(ctx, weights(N, K, 21), [N, K]), spec);
    const host = await readQuant(ctx, q);
    const { scales, owned } = quantScales(ctx, q);
    expect(owned).toBe(true);
    expect(relErr(await download(ctx, scales), host.scales)).toBeLessThan(1e-6);
  });
});
