import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { f16BitsToF32, f32ToF16Bits, type DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { dot, finiteDiff, randn, relErr, toF32 } from '../../testing';
import { DQ_BLOCK, DYNAMIC_MAP, NF4_CODE, quantBytes, quantLayout, quantSpec, type QuantSpec, type QuantTensor } from './formats';
import { quantLinear, quantLinearBackward } from './qmatmul';
import { blockErrorBound, dequantizeRef, dqScalesRef, packCodes, quantizeRef, unpackCodes, type HostQuant } from './quant.ref';
import { dequantize, quantize, quantScales, releaseQuant } from './quantize';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const SPECS: QuantSpec[] = [
  quantSpec('int8', 0),
  quantSpec('int8', 32),
  quantSpec('int8', 128),
  quantSpec('int4', 32),
  quantSpec('int4', 64),
  quantSpec('int4', 128),
  quantSpec('nf4', 64),
  quantSpec('nf4', 64, true),
  quantSpec('nf4', 32, true),
];
const name = (s: QuantSpec) => `${s.format}/${s.groupSize || 'row'}${s.doubleQuant ? '+dq' : ''}`;

/** Weights with a spread of block magnitudes (some blocks tiny, one all zero) so scales differ. */
function weights(N: number, K: number, seed: number): Float64Array {
  const w = randn(N * K, seed, 0.05);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) w[n * K + k]! *= 1 + ((n * 7 + (k >> 5)) % 5);
  for (let k = 0; k < Math.min(K, 32); k++) w[k] = 0; // a zero block in row 0
  return toF32(w);
}

/** The per-block quantize-then-dequantize check: every element within the format's bound of its block. */
function checkBlockError(spec: QuantSpec, w: ArrayLike<number>, deq: ArrayLike<number>, scales: ArrayLike<number>, N: number, K: number): void {
  const l = quantLayout(spec, N, K);
  let worst = 0;
  for (let n = 0; n < N; n++)
    for (let b = 0; b < l.nb; b++) {
      let amax = 0;
      for (let k = b * l.G; k < Math.min(K, (b + 1) * l.G); k++) amax = Math.max(amax, Math.abs(w[n * K + k]!));
      // slack: x / s is rounded to f32 on the GPU, which may move a value sitting on a rounding boundary
      const bound = blockErrorBound(spec, amax, scales[n * l.nb + b]!) + 1e-6 * amax;
      for (let k = b * l.G; k < Math.min(K, (b + 1) * l.G); k++) {
        const e = Math.abs(deq[n * K + k]! - w[n * K + k]!);
        worst = Math.max(worst, e / (bound || 1));
        if (!(e <= bound)) throw new Error(`${name(spec)}: element [${n}, ${k}] error ${e} over the block bound ${bound}`);
      }
    }
  expect(worst).toBeLessThanOrEqual(1);
}

/** Read a GPU-quantized tensor back as a HostQuant (codes, decoded first-level scales). */
async function readQuant(q: QuantTensor): Promise<HostQuant> {
  const words = (await download(ctx, q.data)) as Uint32Array;
  const codes = unpackCodes(q.spec, q.layout, words);
  let scales: Float64Array;
  let dq: HostQuant['dq'];
  if (q.spec.doubleQuant) {
    const L = q.layout.N * q.layout.nb;
    const cw = (await download(ctx, q.scales)) as Uint32Array;
    dq = {
      codes: new Uint8Array(cw.buffer, 0, L).slice(),
      absmax2: Float64Array.from(await download(ctx, q.absmax2!)),
      offset: (await download(ctx, q.offset!))[0]!,
    };
    scales = dqScalesRef(dq, L);
  } else scales = Float64Array.from(await download(ctx, q.scales));
  return { layout: q.layout, codes, scales, dq };
}

describe('formats (host reference)', () => {
  it('NF4 is bitsandbytes code book; the dynamic map has 256 sorted values with 0 and 1', () => {
    expect(NF4_CODE.length).toBe(16);
    expect(NF4_CODE[0]).toBe(-1);
    expect(NF4_CODE[7]).toBe(0);
    expect(NF4_CODE[15]).toBe(1);
    for (let i = 1; i < 16; i++) expect(NF4_CODE[i]!).toBeGreaterThan(NF4_CODE[i - 1]!);
    expect(DYNAMIC_MAP.length).toBe(256);
    for (let i = 1; i < 256; i++) expect(DYNAMIC_MAP[i]!).toBeGreaterThanOrEqual(DYNAMIC_MAP[i - 1]!);
    expect(DYNAMIC_MAP[255]).toBe(1);
    expect(DYNAMIC_MAP).toContain(0);
    // smallest magnitudes: 10^-6 * 0.55 (i = 0: one mean of linspace(0.1, 1, 2))
    expect(Math.min(...DYNAMIC_MAP.filter((v) => v > 0))).toBeCloseTo(0.55e-6, 12);
  });

  it('bad specs are ConfigErrors naming the problem', () => {
    expect(() => quantSpec('int3')).toThrow(ConfigError);
    expect(() => quantSpec('int4', 0)).toThrow(/group size 0/);
    expect(() => quantSpec('int8', 48)).toThrow(ConfigError);
    expect(() => quantSpec('int4', 64, true)).toThrow(/nf4 only/);
  });

  it('layout and sizes: 4-bit formats under 0.3x of f32 with scales', () => {
    const l = quantLayout(quantSpec('int4', 64), 3, 100);
    expect(l).toMatchObject({ G: 64, nb: 2, Kp: 128, epw: 8, wpr: 16 });
    expect(quantLayout(quantSpec('int8', 0), 3, 10)).toMatchObject({ G: 12, nb: 1, Kp: 12, wpr: 3 });
    for (const f of ['int4', 'nf4'] as const) expect(quantBytes(quantSpec(f, 64, f === 'nf4'), 4096, 4096) / (4096 * 4096 * 4)).toBeLessThan(0.14);
  });

  for (const spec of SPECS)
    it(`${name(spec)}: pack/unpack round trip and quantize-dequantize error per block within the bound`, () => {
      const N = 5;
      const K = 150;
      const w = weights(N, K, 11);
      const q = quantizeRef(spec, w, N, K);
      expect(unpackCodes(spec, q.layout, packCodes(spec, q.layout, q.codes))).toEqual(q.codes);
      checkBlockError(spec, w, dequantizeRef(spec, q), q.scales, N, K);
    });

  it('the block bound is tight enough to catch a wrong code (mutation check)', () => {
    const spec = quantSpec('int4', 32);
    const w = weights(2, 64, 3);
    const q = quantizeRef(spec, w, 2, 64);
    q.codes[40] = q.codes[40] === 15 ? 13 : q.codes[40]! + 2;
    expect(() => checkBlockError(spec, w, dequantizeRef(spec, q), q.scales, 2, 64)).toThrow(/over the block bound/);
  });
});

describe('GPU quantize / dequantize', () => {
  for (const spec of SPECS)
    for (const dtype of ['f32', 'bf16'] as DType[])
      it(`${name(spec)} from ${dtype}: codes match the host, dequantized within the block bound`, async () => {
        const N = 7;
        const K = spec.groupSize === 128 ? 300 : 133;
        const w64 = weights(N, K, 5);
        const wt = upload(ctx, w64, [N, K], dtype);
        const wr = Float64Array.from(await download(ctx, wt)); // as the GPU sees it (bf16-rounded)
        const q = quantize(ctx, wt, spec);
        const host = await readQuant(q);
        const ref = quantizeRef(spec, wr, N, K);
        // scales: the same up to f32 division rounding; codes: the same except where x / s sits on a rounding
        // boundary within f32 error
        if (!spec.doubleQuant) expect(relErr(host.scales, ref.scales)).toBeLessThan(1e-6);
        let diff = 0;
        for (let i = 0; i < ref.codes.length; i++) if (host.codes[i] !== ref.codes[i]) diff++;
        expect(diff).toBeLessThanOrEqual(Math.ceil(ref.codes.length * 1e-3));
        if (spec.doubleQuant) {
          expect(relErr(host.dq!.absmax2, ref.dq!.absmax2)).toBeLessThan(1e-5);
          expect(Math.abs(host.dq!.offset - ref.dq!.offset)).toBeLessThan(1e-6 * Math.abs(ref.dq!.offset) + 1e-12);
          // decoded absmax within half the dynamic map's widest step (near 1: 0.9 / 64) of the true absmax
          const amax = ref.dq ? quantizeRef({ ...spec, doubleQuant: false }, wr, N, K).scales : ref.scales;
          for (let i = 0; i < amax.length; i++)
            expect(Math.abs(host.scales[i]! - amax[i]!)).toBeLessThanOrEqual(host.dq!.absmax2[Math.floor(i / DQ_BLOCK)]! * (0.45 / 64 + 1e-6) + 1e-7);
        }
        // GPU dequantize (f32 and f16) against the host decoding of the GPU's own codes
        const want = dequantizeRef(spec, host);
        for (const out of ['f32', 'f16'] as const) {
          const d = dequantize(ctx, q, out);
          const got = await download(ctx, d);
          const tol = out === 'f32' ? 1e-6 : 1e-3;
          expect(relErr(got, want)).toBeLessThan(tol);
          release(ctx, d);
        }
        checkBlockError(spec, wr, want, host.scales, N, K);
        releaseQuant(ctx, q);
        release(ctx, wt);
      });

  it('the GPU dequantize output is fully written (poisoned buffer, odd element count)', async () => {
    const spec = quantSpec('int4', 32);
    const wt = upload(ctx, weights(3, 33, 9), [3, 33]);
    const q = quantize(ctx, wt, spec);
    const got = await download(ctx, dequantize(ctx, q, 'f16'));
    expect(got.every(Number.isFinite)).toBe(true);
    releaseQuant(ctx, q);
  });

  it('refuses a weight that is not 2-D float', () => {
    const t = upload(ctx, [1, 2, 3, 4], [4], 'f32');
    expect(() => quantize(ctx, t, quantSpec('int8'))).toThrow(ShapeError);
    const i = upload(ctx, [1, 2, 3, 4], [2, 2], 'i32');
    expect(() => quantize(ctx, i, quantSpec('int8'))).toThrow(ShapeError);
  });
});

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
  // every shape on two formats, the others on two shapes (each kernel variant costs lavapipe a compile)
  for (const [si, spec] of [SPECS[0]!, SPECS[1]!, SPECS[3]!, SPECS[6]!, SPECS[7]!].entries())
    for (const [M, N, K] of si === 0 || si === 3 ? shapes : shapes.slice(1, 3).concat(shapes.slice(5))) {
      const variants = M <= 16 ? (['tiled', 'gemv'] as const) : (['tiled'] as const);
      it(`${name(spec)} [${M}, ${K}] x [${N}, ${K}]^T: ${variants.join(' and ')} forward, backward`, async () => {
        const w = weights(N, K, M + N);
        const wt = upload(ctx, w, [N, K]);
        const q = quantize(ctx, wt, spec);
        const wq = dequantizeRef(spec, await readQuant(q)); // the quantized values, in float64
        const xd: DType = si === 0 && M === 5 ? 'f16' : si === 3 && M === 16 ? 'bf16' : 'f32';
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
    const wq = dequantizeRef(spec, await readQuant(q));
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
    const host = await readQuant(q);
    const { scales, owned } = quantScales(ctx, q);
    expect(owned).toBe(true);
    expect(relErr(await download(ctx, scales), host.scales)).toBeLessThan(1e-6);
  });
});
