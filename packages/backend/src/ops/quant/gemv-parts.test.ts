// gemvParts: 2 or 3 weights in one GEMV dispatch, each result against float64 of its own weight, into poisoned
// outputs; what it refuses.
import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { ShapeError } from '../../errors';
import { download, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { quantSpec } from './formats';
import { gemvSubgroupsAvailable } from './gemv';
import { GEMV_TOL, gemvCaseName, runGemvCase, type GemvCase } from './gemv.cases';
import { gemvParts, gemvPartsProblem } from './gemv-parts';
import { quantLinear } from './qmatmul';
import { quantize, releaseQuant } from './quantize';
import { weights } from './quant.test-util';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());
const hasSg = () => gemvSubgroupsAvailable(ctx);

describe('gemvParts', () => {
  // q/k/v-like (3 parts, the middle ones short) and gate/up-like (2 parts); row counts not multiples of the
  // workgroup's rows, so that workgroups straddle part boundaries; every format, 1 and several rows of x, biases
  const main = (rows: number, threads = 0) => ({ subgroupRows: false, rows, threads });
  const cases: GemvCase[] = [
    { w: quantSpec('int4', 64), M: 1, N: 0, K: 256, parts: [37, 13, 13] },
    { w: quantSpec('int4', 32), M: 3, N: 0, K: 96, parts: [20, 9], bias: true },
    { w: quantSpec('nf4', 64, true), M: 1, N: 0, K: 128, parts: [11, 5, 5], tune: { few: main(2) } },
    { w: quantSpec('int8', 0), M: 2, N: 0, K: 99, parts: [7, 6, 9], bias: true },
    { w: quantSpec('int8', 32), M: 1, N: 0, K: 160, parts: [19, 19], tune: { few: { ...main(4, 16), chunkWords: 2 } } },
    { w: 'bf16', M: 1, N: 0, K: 130, parts: [21, 7, 7] },
    { w: 'f16', M: 5, N: 0, K: 64, parts: [9, 12], bias: true, tune: { many: main(2) } },
    { w: 'f32', M: 1, N: 0, K: 132, parts: [21, 7, 7], bias: true },
    { w: 'f32', M: 3, N: 0, K: 66, parts: [9, 12] },
    { w: quantSpec('int4', 64), M: 1, N: 0, K: 320, parts: [17, 9, 9], tune: { few: { subgroupRows: true, rows: 2, threads: 0, prefetch: true } } },
  ];
  for (const c of cases)
    it.runIf(hasSg())(gemvCaseName(c), async () => {
      expect(await runGemvCase(ctx, c)).toBeLessThan(GEMV_TOL);
    });

  it.runIf(hasSg())('gives what quantLinear gives for each weight, to f32 rounding, as sub-buffers of one buffer', async () => {
    const spec = quantSpec('int4', 64);
    const K = 128;
    const qs = [24, 8, 8].map((N, j) => {
      const w = upload(ctx, weights(N, K, 7 + j), [N, K]);
      const q = quantize(ctx, w, spec);
      release(ctx, w);
      return q;
    });
    const x = upload(ctx, randn(K, 9), [1, 1, K]);
    const ys = gemvParts(ctx, x, qs.map((weight) => ({ weight })));
    expect(ys.map((y) => y.shape)).toEqual([[1, 1, 24], [1, 1, 8], [1, 1, 8]]);
    for (const [j, q] of qs.entries()) {
      const one = quantLinear(ctx, x, q, { variant: 'gemv' });
      const a = await download(ctx, ys[j]!);
      const b = await download(ctx, one);
      for (let i = 0; i < b.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(1e-6 * (1 + Math.abs(b[i]!)));
      release(ctx, one);
    }
    release(ctx, x, ...ys);
    for (const q of qs) releaseQuant(ctx, q);
  });

  it('names what it cannot run, and gemvParts refuses it with a ShapeError', () => {
    const K = 64;
    const a = upload(ctx, randn(8 * K, 1, 0.1), [8, K], 'f16');
    const b = upload(ctx, randn(8 * K, 2, 0.1), [8, K], 'bf16');
    const c = upload(ctx, randn(8 * 32, 3, 0.1), [8, 32], 'f16');
    const f = upload(ctx, randn(8 * K, 4, 0.1), [8, K]);
    const x = upload(ctx, randn(K, 5), [1, K]);
    const x17 = upload(ctx, randn(17 * K, 5), [17, K]);
    const q = quantize(ctx, f, quantSpec('int4', 32));
    const q8 = quantize(ctx, f, quantSpec('int8', 0));
    const bias = upload(ctx, randn(8, 6), [8]);
    const problem = (x_: typeof x, ws: Parameters<typeof gemvPartsProblem>[2]) => gemvPartsProblem(ctx, x_, ws);
    if (hasSg()) {
      expect(problem(x, [{ weight: a }, { weight: a }])).toBeNull();
      expect(problem(x, [{ weight: q }, { weight: q }, { weight: q }])).toBeNull();
    } else expect(problem(x, [{ weight: a }, { weight: a }])).toMatch(/subgroups/);
    if (hasSg()) {
      expect(problem(x, [{ weight: a }])).toMatch(/2 or 3 weights/);
      expect(problem(x, [{ weight: a }, { weight: a }, { weight: a }, { weight: a }])).toMatch(/2 or 3 weights/);
      expect(problem(x, [{ weight: a }, { weight: b }])).toMatch(/different dtypes/);
      expect(problem(x, [{ weight: a }, { weight: c }])).toMatch(/different in_features/);
      expect(problem(x, [{ weight: f }, { weight: f }])).toBeNull(); // f32
      expect(problem(x, [{ weight: upload(ctx, new Int32Array(8 * K), [8, K], 'i32') }, { weight: f }])).toMatch(/f16, bf16 or f32/);
      expect(problem(x, [{ weight: q }, { weight: a }])).toMatch(/mixed/);
      expect(problem(x, [{ weight: q }, { weight: q8 }])).toMatch(/different quantizations/);
      expect(problem(x, [{ weight: q, bias }, { weight: q }])).toMatch(/some weights only/);
      expect(problem(x17, [{ weight: q }, { weight: q }])).toMatch(/1\.\.16 rows/);
      expect(problem(c, [{ weight: q }, { weight: q }])).toMatch(/does not end in in_features 64/);
      expect(() => gemvParts(ctx, x, [{ weight: a }, { weight: b }])).toThrow(ShapeError);
    }
    release(ctx, a, b, c, f, x, x17, bias);
    releaseQuant(ctx, q);
    releaseQuant(ctx, q8);
  });
});
