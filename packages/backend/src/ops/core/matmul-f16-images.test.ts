import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createContext } from '../../context';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { roundTo } from './core.ref';
import { matmul } from './matmul';
import { f16ImageOf, f16ImageStats, f16ImageTuning, imageChunks, imageExponent, prepareF16Images, releaseF16Images } from './matmul-f16-images';

const ctx = await createContext();
afterAll(() => ctx.destroy());
const defaults = { ...f16ImageTuning };
afterEach(() => {
  releaseF16Images(ctx);
  Object.assign(f16ImageTuning, defaults);
});

const bf16 = (x: ArrayLike<number>) => roundTo('bf16', x);
const f32 = Math.fround;

/** The path forced on this adapter (the plane product runs on the portable f16 kernels, exact there too). */
const forcePath = () => Object.assign(f16ImageTuning, { minRows: 1, minCols: 1, minK: 1, anywhere: true });

/** float64 reference of op(A) @ op(B) for A [M, K], B [K, N] or [N, K] (transB). */
function ref(a: ArrayLike<number>, b: ArrayLike<number>, M: number, N: number, K: number, transB: boolean): Float64Array {
  const c = new Float64Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += a[m * K + k]! * b[transB ? n * K + k : k * N + n]!;
      c[m * N + n] = s;
    }
  return c;
}

/** B [N, K]: one power-of-two entry per row n, at column (n * step) % K (every product exact, one term per output). */
function permutationWeight(N: number, K: number, step: number): Float32Array {
  const w = new Float32Array(N * K);
  for (let n = 0; n < N; n++) w[n * K + ((n * step) % K)] = 2 ** ((n % 9) - 4);
  return w;
}

describe('exact f32 products through f16 images (runs everywhere with the path forced)', () => {
  it('imageChunks: K in at most maxChunkK per chunk, dividing K, or none', () => {
    expect(imageChunks(4096)).toBe(1);
    expect(imageChunks(5632)).toBe(2);
    expect(imageChunks(32000)).toBe(8);
    expect(imageChunks(8198)).toBe(0); // 2 x 4099: no divisor from 3 to 64
  });

  it('imageExponent brings the maximum into [2^13, 2^14)', () => {
    for (const m of [1, 0.75, 3e-5, 6e4, 1e-40, 3.4e38, 2 ** 13, 2 ** 14 - 1])
      expect(2 ** imageExponent(m) * f32(m), `${m}`).toBeGreaterThanOrEqual(m < 1e-38 ? 0 : 2 ** 13);
    for (const m of [1, 0.75, 3e-5, 6e4, 2 ** 13, 2 ** 14 - 1]) expect(2 ** imageExponent(m) * m).toBeLessThan(2 ** 14);
    expect(imageExponent(0)).toBe(0);
    expect(imageExponent(Infinity)).toBe(0);
    expect(imageExponent(NaN)).toBe(0);
  });

  it('keeps exact images of bf16-valued weights and refuses weights that f16 cannot hold', async () => {
    const none = upload(ctx, [1, 2, 3, 4], [2, 2]);
    if (!ctx.info.features.subgroupMatrix) expect(await prepareF16Images(ctx, [none])).toBe(0); // no tensor cores: nothing to make
    release(ctx, none);
    forcePath();
    const K = 24;
    const N = 10;
    // bf16 values over 20 binades (f16 alone spans 40 with subnormals, so the scale matters)
    const wv = bf16(Array.from(randn(N * K, 3), (v, i) => v * 2 ** ((i % 21) - 12)));
    const w = upload(ctx, wv, [N, K]);
    const f32w = upload(ctx, Array.from(randn(N * K, 4)), [N, K]); // full 24-bit values
    const nanw = upload(ctx, Array.from(wv, (v, i) => (i === 7 ? NaN : v)), [N, K]);
    const widew = upload(ctx, bf16(Array.from(wv, (v, i) => (i === 3 ? 1e30 : v))), [N, K]); // 2^100 apart: not in one f16 scale
    expect(await prepareF16Images(ctx, [w, f32w, nanw, widew])).toBe(1);
    const img = f16ImageOf(ctx, w)!;
    expect(img).toBeDefined();
    for (const t of [f32w, nanw, widew]) expect(f16ImageOf(ctx, t)).toBeUndefined();
    const got = await download(ctx, img.img);
    for (let i = 0; i < wv.length; i++) expect(got[i]! * 2 ** -img.e, `${i}`).toBe(wv[i]);
    // a view of another shape is not the prepared weight
    expect(f16ImageOf(ctx, { ...w, shape: [K, N] })).toBeUndefined();
    expect(await prepareF16Images(ctx, [w])).toBe(1); // already there
    expect(f16ImageStats(ctx).count).toBe(1);
    // a weight smaller than any product would take an image for (N, K >= 512 by default) gets none
    releaseF16Images(ctx);
    Object.assign(f16ImageTuning, { minCols: defaults.minCols, minK: defaults.minK });
    expect(await prepareF16Images(ctx, [w])).toBe(0);
    release(ctx, w, f32w, nanw, widew);
  });

  it('is exact at highest precision: a permutation product returns every bit of A, rows over 80 binades', async () => {
    forcePath();
    const M = 6;
    const K = 64;
    const N = 64;
    // A: full 24-bit f32 values; rows scaled from 2^-60 to 2^60, one row of subnormal-range values, one of zeros
    const rowScale = [2 ** -60, 1, 2 ** 60, 2 ** -130, 0, 3.7];
    const av = Float32Array.from(randn(M * K, 11), (v, i) => v * rowScale[Math.floor(i / K)]! * (1 + (i % 5) * 1e-3));
    const wv = permutationWeight(N, K, 37);
    const a = upload(ctx, av, [M, K]);
    const w = upload(ctx, wv, [N, K]);
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    const want = ref(av, wv, M, N, K, true);
    const out = empty(ctx, [M, N]);
    poison(ctx, out);
    const c = await download(ctx, matmul(ctx, a, w, { transB: true, out }));
    for (let i = 0; i < M * N; i++) expect(c[i], `${i}`).toBe(f32(want[i]!));
    // in K chunks (4 of 16), summed apart: the same bits
    f16ImageTuning.maxChunkK = 16;
    poison(ctx, out);
    const cc = await download(ctx, matmul(ctx, a, w, { transB: true, out }));
    for (let i = 0; i < M * N; i++) expect(cc[i], `${i}`).toBe(f32(want[i]!));
    f16ImageTuning.maxChunkK = 4096;
    release(ctx, out);
    // precision 'high' keeps two planes: the low bits of A are gone (22 bits)
    const ch = await download(ctx, matmul(ctx, a, w, { transB: true, precision: 'high' }));
    let differ = 0;
    for (let i = 0; i < M * N; i++) if (ch[i] !== f32(want[i]!)) differ++;
    expect(differ).toBeGreaterThan(M * N / 8);
    release(ctx, a, w);
  });

  it('inf and NaN in A come out as the portable kernel gives them (inf stays inf, not NaN)', async () => {
    forcePath();
    const M = 3;
    const K = 64;
    const N = 64;
    const av = Float32Array.from(randn(M * K, 51), (v) => v * 1e-3);
    av[5] = Infinity; // row 0
    av[K + 9] = NaN; // row 1
    av[2 * K + 3] = -Infinity; // row 2, with large finite neighbours
    av[2 * K + 4] = 3e38;
    const wv = permutationWeight(N, K, 37);
    const a = upload(ctx, av, [M, K]);
    const w = upload(ctx, wv, [N, K]);
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    const got = await download(ctx, matmul(ctx, a, w, { transB: true }));
    const port = await download(ctx, matmul(ctx, a, w, { transB: true, tensorCores: false, variant: 'v1' }));
    for (let i = 0; i < M * N; i++) expect(Object.is(got[i], port[i]) || got[i] === port[i], `${i}: ${got[i]} vs ${port[i]}`).toBe(true);
    // (a dense row with inf gives inf where its weight is nonzero, NaN from inf x 0 elsewhere; a NaN row NaN)
    expect(got.filter((v) => v === Infinity || v === -Infinity).length).toBeGreaterThan(0);
    release(ctx, a, w);
  });

  it('matches float64 like the portable f32 kernel, NN and NT, with alpha, bias and accumulate', async () => {
    forcePath();
    const M = 9;
    const K = 70;
    const N = 13;
    const av = Float32Array.from(randn(M * K, 21), (v, i) => v * (i % 3 === 0 ? 1e-4 : 1));
    const wv = bf16(randn(N * K, 22, 0.05));
    const biasv = Array.from(randn(N, 23));
    const c0v = Array.from(randn(M * N, 24));
    const a = upload(ctx, av, [M, K]);
    const wNT = upload(ctx, wv, [N, K]);
    // B stored [K, N] for the NN product: the transpose of wv
    const wt = new Float64Array(K * N);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wt[k * N + n] = wv[n * K + k]!;
    const wKN = upload(ctx, wt, [K, N]);
    const bias = upload(ctx, biasv, [N], 'bf16');
    expect(await prepareF16Images(ctx, [wNT, wKN])).toBe(2);
    const biasR = roundTo('bf16', biasv);
    // maxChunkK 32: K = 70 is summed in 5 chunks of 14 (split-K), each a shorter sum on the tensor cores
    for (const [w, transB, chunk] of [[wNT, true, 4096], [wKN, false, 4096], [wNT, true, 32], [wKN, false, 32]] as const) {
      f16ImageTuning.maxChunkK = chunk;
      const want = ref(av, transB ? wv : wt, M, N, K, transB);
      const out = upload(ctx, c0v, [M, N]);
      matmul(ctx, a, w, { transB, alpha: 0.5, bias, accumulate: true, out });
      const got = await download(ctx, out);
      const portable = await download(ctx, matmul(ctx, a, w, { transB, tensorCores: false, variant: 'v1' }));
      let worst = 0;
      let worstPortable = 0;
      for (let i = 0; i < M * N; i++) {
        const n = i % N;
        const m = Math.floor(i / N);
        let mag = 0;
        for (let k = 0; k < K; k++) mag += Math.abs(av[m * K + k]! * (transB ? wv[n * K + k]! : wt[k * N + n]!));
        const e = 0.5 * want[i]! + biasR[n]! + c0v[i]!;
        worst = Math.max(worst, Math.abs(got[i]! - e) / (0.5 * mag + Math.abs(biasR[n]!) + Math.abs(c0v[i]!)));
        worstPortable = Math.max(worstPortable, Math.abs(portable[i]! - want[i]!) / mag);
      }
      // f32 rounding of a K = 70 sum: a few units of 2^-24 of the magnitude; the portable kernel's own error beside it
      expect(worst, `transB ${transB}, chunks of ${chunk}`).toBeLessThan(4 * 2 ** -24);
      expect(worstPortable).toBeLessThan(4 * 2 ** -24);
      release(ctx, out);
    }
    release(ctx, a, wNT, wKN, bias);
  });

  it('an f16 B is its own image: f32 x f16 products take the planes, exactly', async () => {
    forcePath();
    const M = 5;
    const K = 64;
    const N = 32;
    const av = Float32Array.from(randn(M * K, 41), (v, i) => v * 2 ** ((Math.floor(i / K) * 30) - 60));
    const wv = permutationWeight(N, K, 7);
    const a = upload(ctx, av, [M, K]);
    const w = upload(ctx, wv, [N, K], 'f16');
    const d0 = ctx.stats.dispatches;
    const c = await download(ctx, matmul(ctx, a, w, { transB: true }));
    expect(ctx.stats.dispatches - d0).toBe(3); // split, plane product, sum
    const want = ref(av, wv, M, N, K, true);
    for (let i = 0; i < M * N; i++) expect(c[i], `${i}`).toBe(f32(want[i]!));
    release(ctx, a, w);
  });

  it('drops an image when its weight is written, bound read-write or released, and then reads the new values', async () => {
    forcePath();
    const M = 4;
    const K = 8;
    const N = 8;
    const av = bf16(randn(M * K, 31));
    const w1 = bf16(randn(N * K, 32));
    const w2 = bf16(randn(N * K, 33));
    const a = upload(ctx, av, [M, K]);
    const w = upload(ctx, w1, [N, K]);
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    // a write through the queue
    ctx.write(w.buffer, new Float32Array(w2));
    expect(f16ImageOf(ctx, w)).toBeUndefined();
    let c = await download(ctx, matmul(ctx, a, w, { transB: true }));
    const want2 = ref(av, w2, M, N, K, true);
    for (let i = 0; i < M * N; i++) expect(c[i]).toBeCloseTo(want2[i]!, 5);
    // a dispatch that writes it (matmul into it as `out`)
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    const eye = upload(ctx, Array.from({ length: N * N }, (_, i) => +(i % (N + 1) === 0)), [N, N]);
    const w1t = upload(ctx, w1, [N, K]);
    matmul(ctx, eye, w1t, { out: w });
    expect(f16ImageOf(ctx, w)).toBeUndefined();
    c = await download(ctx, matmul(ctx, a, w, { transB: true }));
    const want1 = ref(av, w1, M, N, K, true);
    for (let i = 0; i < M * N; i++) expect(c[i]).toBeCloseTo(want1[i]!, 5);
    // a write while the image is being made (between its reads): not kept
    const pending = prepareF16Images(ctx, [w]);
    ctx.write(w.buffer, new Float32Array(w1));
    expect(await pending).toBe(0);
    expect(f16ImageOf(ctx, w)).toBeUndefined();
    // a copy into it, then its release
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    ctx.copy(eye.buffer, w.buffer, 16);
    expect(f16ImageOf(ctx, w)).toBeUndefined();
    expect(await prepareF16Images(ctx, [w])).toBe(1);
    expect(f16ImageStats(ctx).count).toBe(1);
    release(ctx, w);
    expect(f16ImageStats(ctx).count).toBe(0);
    release(ctx, a, eye, w1t);
  });
});
