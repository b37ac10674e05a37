import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { randn, relErr } from '../../testing';
import { download, poison, release, upload } from '../../tensor';
import { matmulRef } from './core.ref';
import { autoChoice, matmul, setMatmulTuning, type MatmulVariant } from './matmul';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('split-K matmul (skinny products: LoRA and weight gradients)', () => {
  // K chunks are a batch with strides into the whole operands (row strides lda / ldb stay those of A and B)
  it.each([
    ['TN', true, false],
    ['NN', false, false],
    ['NT', false, true],
  ] as const)('%s matches the float64 reference for several chunk counts, into a poisoned out', async (_l, transA, transB) => {
    const [K, M, N] = [96, 13, 10];
    const a = randn(K * M, 21);
    const b = randn(K * N, 22);
    const ref = matmulRef(a, b, { M, N, K, batch: 1, sa: 0, sb: 0, transA, transB, alpha: 0.5 });
    const A = upload(ctx, a, transA ? [K, M] : [M, K]);
    const B = upload(ctx, b, transB ? [N, K] : [K, N]);
    for (const s of [1, 4, 6]) {
      const out = upload(ctx, new Float32Array(M * N), [M, N]);
      poison(ctx, out);
      matmul(ctx, A, B, { transA, transB, splitK: s, out, alpha: 0.5 });
      expect(relErr(await download(ctx, out), ref), `splitK ${s}`).toBeLessThan(1e-5);
      release(ctx, out);
    }
    expect(() => matmul(ctx, A, B, { transA, transB, splitK: 5 })).toThrow(/divisor/);
    expect(() => matmul(ctx, A, B, { transA, transB, splitK: 2, bias: upload(ctx, new Float32Array(N), [N]) })).toThrow(/splitK/);
    release(ctx, A, B);
  });

  it("auto's choice on a GPU for the training step's products (and LoRA's), and on a software adapter", () => {
    const gpu = { info: { ...ctx.info, isSoftware: false } };
    const pick = (M: number, N: number, K: number, l: 'NN' | 'NT' | 'TN', o = {}) => {
      const c = autoChoice(gpu, M, N, K, l, o);
      return `${c.variant}/s${c.splitK}`;
    };
    // [4096 x 512] outputs (128 tiles of 128 x 128): NT on that tile unsplit, NN on the split-K tile's 256 unsplit
    // over a short K; over a long K the 128 x 128 tile split to about 320 workgroups (8192 / 3 is not whole: 2)
    expect(pick(4096, 512, 512, 'NT')).toBe('v4/s1');
    expect(pick(4096, 512, 512, 'NN')).toBe('v8/s1');
    expect(pick(4096, 512, 1376, 'NN')).toBe('v8/s1');
    expect(pick(4096, 512, 8192, 'NN')).toBe('v4/s2');
    // (accumulating: no split; the split-K tile unsplit, 1165 against v4's 1225 us in the H100 sweep)
    expect(pick(4096, 512, 8192, 'NN', { accumulate: true })).toBe('v8/s1');
    expect(pick(4096, 512, 8192, 'NT', { accumulate: true })).toBe('v4/s1');
    // weight gradients over 4096 tokens: 88 tiles of TN's 128 x 64 split to about 320 workgroups; 32 tiles: v8
    // split to about 1024 workgroups (chunks of at least 256)
    expect(pick(512, 512, 4096, 'TN')).toBe('v8/s16');
    expect(pick(1376, 512, 4096, 'TN')).toBe('v5/s4');
    expect(pick(512, 1376, 4096, 'TN')).toBe('v5/s4');
    // enough tiles: the layout's default, unsplit
    expect(pick(4096, 1376, 512, 'NT')).toBe('v4/s1');
    expect(pick(8192, 512, 4096, 'TN')).toBe('v5/s1');
    // LoRA r = 16 (2048 tokens, hidden 2048): skinny tiles, and v1 + split-K for the TN products
    expect(pick(2048, 16, 2048, 'NT')).toBe('v6/s8');
    expect(pick(2048, 16, 2048, 'TN')).toBe('v1/s8');
    expect(pick(16, 2048, 2048, 'TN')).toBe('v1/s8');
    // small products keep the small tile
    expect(pick(256, 256, 256, 'NN')).toBe('v1/s1');
    expect(autoChoice(ctx, 4096, 512, 512, 'NT').variant).toBe(ctx.info.isSoftware ? 'v0' : 'v4');
  });

  it('a tuning table replaces auto for its shapes only (tile, sliced K and split-K), and rejects bad entries', async () => {
    const [M, N, K] = [20, 12, 64];
    const a = randn(M * K, 31);
    const b = randn(K * N, 32);
    const A = upload(ctx, a, [K, M]);
    const B = upload(ctx, b, [K, N]);
    const want = matmulRef(a, b, { M, N, K, batch: 1, sa: 0, sb: 0, transA: true });
    setMatmulTuning(ctx, [{ M, N, K, layout: 'TN', tile: { bm: 32, bn: 32, bk: 8, tm: 4, tn: 4, ks: 2 }, splitK: 4 }]);
    for (const [transA, dispatches] of [[true, 2], [false, 1]] as const) {
      const out = upload(ctx, new Float32Array(M * N), [M, N]);
      poison(ctx, out);
      const d0 = ctx.stats.dispatches;
      // TN hits the entry (partial products + their sum); the same sizes in NN do not
      matmul(ctx, transA ? A : upload(ctx, a, [M, K]), B, { transA, out });
      expect(ctx.stats.dispatches - d0).toBe(dispatches);
      if (transA) expect(relErr(await download(ctx, out), want)).toBeLessThan(1e-5);
      release(ctx, out);
    }
    expect(() => setMatmulTuning(ctx, [{ M, N, K, layout: 'TN', splitK: 3 }])).toThrow(/divisor/);
    expect(() => setMatmulTuning(ctx, [{ M, N, K, layout: 'TN', tile: { bm: 32, bn: 32, bk: 8, tm: 3, tn: 4 } }])).toThrow(/tile rules/);
    setMatmulTuning(ctx, []);
    release(ctx, A, B);
  });

  it('skinny tiles v6 (N <= 16) and v7 (M <= 16), split and not, at tile and non-tile sizes', async () => {
    const cases: [MatmulVariant, number, number, number, boolean, boolean, number][] = [
      ['v6', 130, 16, 64, false, true, 1],
      ['v6', 77, 7, 48, false, false, 4],
      ['v7', 16, 130, 64, true, false, 2],
      ['v7', 5, 67, 40, true, false, 1],
    ];
    for (const [variant, M, N, K, transA, transB, s] of cases) {
      const a = randn(K * M, M + N);
      const b = randn(K * N, K);
      const A = upload(ctx, a, transA ? [K, M] : [M, K]);
      const B = upload(ctx, b, transB ? [N, K] : [K, N]);
      const out = upload(ctx, new Float32Array(M * N), [M, N]);
      poison(ctx, out);
      matmul(ctx, A, B, { transA, transB, out, variant, splitK: s });
      const want = matmulRef(a, b, { M, N, K, batch: 1, sa: 0, sb: 0, transA, transB });
      expect(relErr(await download(ctx, out), want), `${variant} ${M}x${N}x${K} split ${s}`).toBeLessThan(1e-5);
      release(ctx, A, B, out);
    }
  });
});
