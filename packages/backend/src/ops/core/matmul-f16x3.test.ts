import { afterAll, describe, expect, it } from 'vitest';
import { createContext } from '../../context';
import { ConfigError } from '../../errors';
import { download, release, upload, type DeviceTensor } from '../../tensor';
import { randn } from '../../testing';
import { roundTo } from './core.ref';
import { matmul } from './matmul';
import { f32MatmulPrecision, setF32MatmulPrecision, splitF16x3 } from './matmul-f16x3';

const ctx = await createContext();
afterAll(() => ctx.destroy());

const f16 = (x: number) => roundTo('f16', [x])[0]!;
const f32 = Math.fround;

/** The split as the kernels define it, in float64 from the f32 inputs: s from max |x|, hi, lo. */
function refSplit(x: Float32Array): { s: number; hi: Float64Array; lo: Float64Array } {
  let m = 0;
  for (const v of x) m = Math.max(m, Math.abs(v));
  const e = m === 0 || !Number.isFinite(m) ? 0 : Math.min(126, Math.max(-126, 14 - (Math.floor(Math.log2(m)) + 1)));
  const s = 2 ** e;
  const hi = new Float64Array(x.length);
  const lo = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const y = f32(x[i]! * s);
    hi[i] = f16(y);
    lo[i] = f16(f32(y - hi[i]!));
  }
  return { s, hi, lo };
}

const asF16 = (buf: DeviceTensor['buffer'], n: number): DeviceTensor => ({ buffer: buf, dtype: 'f16', shape: [n] });

describe('f32 matmul at high precision: operand split (runs everywhere)', () => {
  it('scales by a power of two from max |x| and writes hi / lo copies along K, side by side or stacked', async () => {
    // A [2, 3, 5] (batch 2, M 3, K 5) not transposed: copies side by side; B [2, 5, 4] not transposed: stacked
    // odd widths take the scalar kernels, widths and counts that are multiples of 4 the vector ones
    const cases: [number[], number, number][] = [
      [[2, 3, 5], 0.7, 1e-3],
      [[1, 7, 3], 3e4, 1e-30],
      [[2, 4, 8], 0.7, 1e-3],
      [[1, 6, 12], 3e4, 1e-30],
    ];
    for (const [shape, ascale, bscale] of cases) {
      const [Bt, R, C] = shape as [number, number, number];
      const n = Bt * R * C;
      // some elements far below the maximum: their parts fall into f16's subnormal range (or to 0)
      const av = Float32Array.from(randn(n, 5), (v, i) => v * ascale * (i % 4 === 0 ? 1e-3 : i % 7 === 3 ? 3e-8 : i % 11 === 5 ? 2e-11 : 1));
      const bv = Float32Array.from(randn(n, 6), (v) => v * bscale);
      const a = upload(ctx, av, shape);
      const b = upload(ctx, bv, shape);
      for (const [transA, transB] of [[false, false], [true, true]] as const) {
        const s = splitF16x3(ctx, a, b, transA, transB);
        const a3 = await download(ctx, asF16(s.a3, 3 * n));
        const b3 = await download(ctx, asF16(s.b3, 3 * n));
        const sc = new Float32Array(await ctx.read(s.sc, 514 * 4)).subarray(510);
        const ra = refSplit(av);
        const rb = refSplit(bv);
        expect(sc[2]).toBe(1 / ra.s);
        expect(sc[3]).toBe(1 / rb.s);
        // A: [hi, hi, lo] along K; K is C unless transA (then K is R: stacked). B: [hi, lo, hi]; K is R unless transB.
        for (const [got, ref, cols, lo] of [[a3, ra, !transA, 2], [b3, rb, transB, 1]] as const) {
          for (let bt = 0; bt < Bt; bt++)
            for (let r = 0; r < R; r++)
              for (let c = 0; c < C; c++)
                for (let j = 0; j < 3; j++) {
                  const src = (bt * R + r) * C + c;
                  const dst = cols ? (bt * R + r) * 3 * C + j * C + c : (bt * 3 * R + j * R + r) * C + c;
                  expect(got[dst], `${shape} ${cols ? 'cols' : 'rows'} copy ${j} of ${src}`).toBe((j === lo ? ref.lo : ref.hi)[src]);
                }
        }
        for (const x of [s.a3, s.b3, s.sc]) ctx.release(x);
      }
      release(ctx, a, b);
    }
  });

  it('keeps about 22 bits: hi + lo reproduces s x within 2^-22 relative for elements near the maximum', () => {
    const x = Float32Array.from(randn(4096, 9));
    const r = refSplit(x);
    let m = 0;
    for (const v of x) m = Math.max(m, Math.abs(v));
    for (let i = 0; i < x.length; i++) {
      const err = Math.abs((r.hi[i]! + r.lo[i]!) / r.s - x[i]!);
      expect(err).toBeLessThanOrEqual(Math.max(Math.abs(x[i]!) * 2 ** -22, m * 2 ** -25));
    }
  });

  it('finds the maximum anywhere in a tensor larger than its 256 workgroups cover in one sweep', async () => {
    for (const n of [1_100_000, 1_100_001]) {
      const x = new Float32Array(n).fill(0.5);
      x[n - 1] = -3000;
      const t = upload(ctx, x, [1, n]);
      const s = splitF16x3(ctx, t, t, false, false);
      const sc = new Float32Array(await ctx.read(s.sc, 514 * 4)).subarray(510);
      expect([sc[2], sc[3]]).toEqual([2 ** -2, 2 ** -2]);  // 3000 * 4 = 12000 in [2^13, 2^14)
      for (const b of [s.a3, s.b3, s.sc]) ctx.release(b);
      release(ctx, t);
    }
  });

  it('splits a tensor that needs more than 65535 workgroups (a 2-D grid)', async () => {
    // odd width: the scalar kernel, one output word per thread, 3n / 2 / 256 > 65535 workgroups
    const R = 3_800_001;
    const C = 3;
    const x = Float32Array.from({ length: R * C }, (_, i) => ((i % 1000) - 500) / 64);
    const t = upload(ctx, x, [R, C]);
    const s = splitF16x3(ctx, t, t, false, false);
    const a3 = await download(ctx, asF16(s.a3, 3 * R * C));
    const r = refSplit(x.subarray(0, 1000));
    expect(r.s).toBe(2 ** 11);  // max |x| = 500 / 64 in [4, 8): times 2^11 in [2^13, 2^14)
    for (const row of [0, 1, R - 2, R - 1])
      for (let c = 0; c < C; c++)
        for (let j = 0; j < 3; j++) {
          const i = row * C + c;
          expect(a3[row * 3 * C + j * C + c]).toBe((j === 2 ? r.lo : r.hi)[i % 1000]);
        }
    for (const b of [s.a3, s.b3, s.sc]) ctx.release(b);
    release(ctx, t);
  });

  it('zero, NaN and infinite maxima take s = 1', async () => {
    for (const v of [[0, 0, 0], [1, NaN, 2], [1, Infinity, -3]]) {
      const t = upload(ctx, Float32Array.from(v), [1, 3]);
      const s = splitF16x3(ctx, t, t, false, false);
      const sc = new Float32Array(await ctx.read(s.sc, 514 * 4)).subarray(510);
      expect([sc[2], sc[3]]).toEqual([1, 1]);
      for (const x of [s.a3, s.b3, s.sc]) ctx.release(x);
      release(ctx, t);
    }
  });

  it('the three copies multiply to A B within about 2^-21 of float64 (through the f16 product the tensor-core path runs)', async () => {
    // Here without tensor cores: the f16 copies go through the portable f16 matmul and the 1 / (sA sB) is applied
    // on the host; on the GPU machine the tensor-core cases check the fused path (matmul-tc.cases.ts).
    for (const [M, K, N] of [[9, 70, 11], [12, 72, 20]] as const)
    for (const [transA, transB] of [[false, false], [false, true], [true, false], [true, true]] as const) {
      const av = Float32Array.from(randn(M * K, 21), (v) => v * 0.03);
      const bv = Float32Array.from(randn(K * N, 22), (v) => v * 250);
      const a = upload(ctx, av, transA ? [K, M] : [M, K]);
      const b = upload(ctx, bv, transB ? [N, K] : [K, N]);
      const s = splitF16x3(ctx, a, b, transA, transB);
      const a3: DeviceTensor = { buffer: s.a3, dtype: 'f16', shape: transA ? [3 * K, M] : [M, 3 * K] };
      const b3: DeviceTensor = { buffer: s.b3, dtype: 'f16', shape: transB ? [N, 3 * K] : [3 * K, N] };
      const c = matmul(ctx, a3, b3, { transA, transB, tensorCores: false });
      const got = await download(ctx, c);
      const sc = new Float32Array(await ctx.read(s.sc, 514 * 4)).subarray(510);
      const A = (m: number, k: number) => av[transA ? k * M + m : m * K + k]!;
      const B = (k: number, n: number) => bv[transB ? n * K + k : k * N + n]!;
      let worst = 0;
      let scale = 0;
      for (let m = 0; m < M; m++)
        for (let n = 0; n < N; n++) {
          let want = 0;
          let mag = 0;
          for (let k = 0; k < K; k++) {
            want += A(m, k) * B(k, n);
            mag += Math.abs(A(m, k) * B(k, n));
          }
          worst = Math.max(worst, Math.abs(got[m * N + n]! * sc[2]! * sc[3]! - want));
          scale = Math.max(scale, mag);
        }
      expect(worst / scale, `${transA}${transB}`).toBeLessThan(2 ** -21);
      for (const x of [s.a3, s.b3, s.sc]) ctx.release(x);
      release(ctx, a, b, c);
    }
  });

  it('precision is per context, highest by default; a wrong value is a ConfigError', () => {
    expect(f32MatmulPrecision(ctx)).toBe('highest');
    expect(() => setF32MatmulPrecision(ctx, 'medium' as never)).toThrow(ConfigError);
    const a = upload(ctx, new Float32Array(4), [2, 2]);
    expect(() => matmul(ctx, a, a, { precision: 'low' as never })).toThrow(ConfigError);
    release(ctx, a);
  });
});
