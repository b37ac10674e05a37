// The subgroup GEMV (quantized and 16-bit float weights) against float64 references of the same values.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr } from '../../testing';
import { quantSpec, type QuantSpec } from './formats';
import { gemv16, gemvSource, gemvSubgroupsAvailable, gemvTuning, gemvTuningCopy, quantGemvDispatch, setGemvTuning } from './gemv';
import { quantLinear, quantTuning } from './qmatmul';
import { quantize, releaseQuant } from './quantize';
import { weights } from './quant.test-util';
import { GEMV_TOL, gemvCaseName, runGemvCase, type GemvTune } from './gemv.cases';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());
afterEach(() => {
  quantTuning.gemv = 'auto';
});

function poisoned(shape: number[]): DeviceTensor {
  const t = empty(ctx, shape);
  poison(ctx, t);
  return t;
}

const hasSg = () => gemvSubgroupsAvailable(ctx);

describe('subgroup GEMV, quantized weights', () => {
  // [spec, M, N, K, x dtype, tuning]: 16-byte and single-word rows (int8/row with K % 16 != 0), partial last
  // chunks (K not a multiple of the block), N not a multiple of R, several chunks per thread (32 threads),
  // chunk-level and pre-scaled accumulation (M * R > 16); main_rows; the next chunk prefetched (per-row and
  // per-block scales, partial chunks); rolled and unrolled. The NF4 cases name small layouts: lavapipe takes
  // tens of seconds to compile NF4 at 8 rows.
  const sgr = (rows: number, threads = 0, prefetch = false) => ({ subgroupRows: true, rows, threads, prefetch });
  const main = (rows: number, threads = 0, prefetch = false) => ({ subgroupRows: false, rows, threads, prefetch });
  const cases: [QuantSpec, number, number, number, DType, GemvTune][] = [
    [quantSpec('int4', 64), 1, 37, 200, 'f32', {}],
    [quantSpec('int4', 32), 3, 9, 96, 'f32', { few: main(1) }],
    [quantSpec('int4', 128), 1, 21, 700, 'f32', { few: main(8, 32), unroll: true }],
    [quantSpec('nf4', 64), 1, 19, 130, 'f32', { few: main(2) }],
    [quantSpec('nf4', 64, true), 1, 40, 320, 'bf16', { few: main(2) }],
    [quantSpec('nf4', 64, true), 1, 70, 320, 'f32', { few: main(2) }], // 350 scales: two absmax2 blocks
    [quantSpec('int8', 0), 1, 13, 99, 'f32', {}],
    [quantSpec('int8', 0), 5, 11, 64, 'f16', { many: main(4), unroll: true }],
    [quantSpec('int8', 32), 16, 6, 160, 'f32', { many: main(2) }],
    [quantSpec('int4', 64), 7, 10, 256, 'f32', { many: main(3, 32) }],
    [quantSpec('int4', 64), 9, 9, 128, 'f32', { many: main(4, 32) }], // more outputs (36) than threads
    [quantSpec('int4', 64), 16, 13, 320, 'f32', {}],
    // main_rows
    [quantSpec('int4', 64), 1, 37, 700, 'f32', { few: sgr(4) }],
    [quantSpec('nf4', 64), 2, 21, 610, 'f16', { few: sgr(2) }],
    [quantSpec('int8', 0), 5, 11, 99, 'f32', { many: sgr(2, 64) }],
    // prefetch
    [quantSpec('int4', 64), 1, 37, 700, 'f32', { few: sgr(2, 0, true) }],
    [quantSpec('int4', 32), 3, 9, 1000, 'f16', { few: main(2, 16, true) }],
    [quantSpec('int8', 0), 6, 11, 99, 'f32', { many: sgr(1, 16, true) }],
    [quantSpec('nf4', 64), 1, 19, 610, 'f32', { few: sgr(3, 0, true), unroll: true }],
    // chunks of 2 and 1 words (a vec2u, a u32 per load)
    [quantSpec('int4', 64), 1, 37, 700, 'f32', { few: { ...main(8, 32), chunkWords: 2 } }],
    [quantSpec('int4', 32), 3, 9, 200, 'f16', { few: { ...main(2), chunkWords: 1 } }],
    [quantSpec('int8', 32), 1, 13, 160, 'f32', { few: { ...main(4, 16, true), chunkWords: 2 } }],
    [quantSpec('nf4', 64), 1, 19, 130, 'f32', { few: { ...main(2), chunkWords: 2 } }],
    [quantSpec('int8', 0), 2, 11, 99, 'f32', { few: { ...sgr(2), chunkWords: 1 } }],
    [quantSpec('int4', 64), 1, 37, 1000, 'f32', { few: { ...main(6, 16, true), chunkWords: 2 } }],
    // the shift decode (the default is 'mask')
    [quantSpec('int4', 64), 1, 37, 200, 'f32', { decode: 'shift' }],
    [quantSpec('int8', 32), 3, 11, 160, 'f16', { decode: 'shift', unroll: true }],
  ];
  for (const [spec, M, N, K, xd, tune] of cases)
    it.runIf(hasSg())(gemvCaseName({ w: spec, M, N, K, x: xd, bias: N % 2 === 1, tune }), async () => {
      expect(await runGemvCase(ctx, { w: spec, M, N, K, x: xd, bias: N % 2 === 1, tune })).toBeLessThan(GEMV_TOL);
    });

  it.runIf(hasSg())('one row of X takes the small-weight layout below gemvTuning.oneSmall.below elements, `one` from there', () => {
    const q = quantize(ctx, upload(ctx, weights(37, 256, 4), [37, 256]), quantSpec('int4', 64));
    const x = upload(ctx, randn(256, 5), [1, 256]);
    const y = empty(ctx, [1, 37]);
    const saved = gemvTuningCopy();
    try {
      gemvTuning.oneSmall = { below: 37 * 256 + 1, set: { rows: 4, threads: 32, subgroupRows: false } };
      gemvTuning.one = { rows: 8, threads: 32, subgroupRows: false };
      expect(quantGemvDispatch(ctx, x, q, y).workgroups[0]).toBe(10); // ceil(37 / 4)
      gemvTuning.oneSmall.below = 37 * 256;
      expect(quantGemvDispatch(ctx, x, q, y).workgroups[0]).toBe(5); // ceil(37 / 8)
    } finally {
      setGemvTuning(saved);
      releaseQuant(ctx, q);
    }
  });

  it.runIf(hasSg())('the portable kernel stays reachable (quantTuning.gemv) and agrees', async () => {
    const spec = quantSpec('int4', 64);
    const [M, N, K] = [1, 12, 128];
    const q = quantize(ctx, upload(ctx, weights(N, K, 1), [N, K]), spec);
    const xt = upload(ctx, randn(M * K, 2), [M, K]);
    const a = poisoned([M, N]);
    quantLinear(ctx, xt, q, { out: a, variant: 'gemv' });
    quantTuning.gemv = 'portable';
    const b = poisoned([M, N]);
    quantLinear(ctx, xt, q, { out: b, variant: 'gemv' });
    expect(relErr(await download(ctx, a), await download(ctx, b))).toBeLessThan(2e-6);
    releaseQuant(ctx, q);
  });

  it('the generated kernel unrolls every accumulator and reads 16 bytes per weight load', () => {
    const src = gemvSource({ MR: 2, R: 3, WG: 64, NSG: 8, CW: 4, epw: 8, fmt: 1, xVec: true, hasBias: false, preScale: false, unroll: true });
    expect(src).toContain('var a_2_1 = 0.0;');
    expect(src).toContain('let w_2 = q4[row_2 * p.nc + c];');
    expect(src).toContain('x4[(1u * p.K + k0 + 28u) >> 2u]');
    expect(src).not.toMatch(/^\s*\/\/@/m);
    const rolled = gemvSource({ MR: 2, R: 3, WG: 64, NSG: 8, CW: 4, epw: 8, fmt: 1, xVec: true, hasBias: false, preScale: true, unroll: false });
    expect(rolled).toContain('var a: array<f32, R * MR>;');
    expect(rolled).not.toMatch(/^\s*\/\/@/m);
    // prefetch: the first chunk's words before the loop, the next one's in it
    const pf = gemvSource({ MR: 1, R: 2, WG: 64, NSG: 2, CW: 4, epw: 8, fmt: 1, G: 64, xVec: true, hasBias: false, preScale: false, unroll: true, prefetch: true });
    expect(pf).toContain('var pw_1 = q4[row_1 * p.nc + min(c0, p.nc - 1u)];');
    expect(pf).toContain('let w_1 = pw_1; pw_1 = q4[row_1 * p.nc + min(c + cstep, p.nc - 1u)];');
    expect(pf).toContain('let s_1 = ps_1; ps_1 = scale_at(row_1 * p.nb + (min(c + cstep, p.nc - 1u)) * CE / 64u);');
  });
});

describe('gemv16 (the float-weight GEMV: f16 / bf16, the baseline of the quantized ones, and f32)', () => {
  // K % 8 == 0: 16-byte loads; K even otherwise: one word per load; K odd: matmul (f32: K % 4 == 0 16-byte
  // loads, K % 2 == 0 8-byte loads, K odd matmul)
  const cases: ['f16' | 'bf16' | 'f32', number, number, number, GemvTune?][] = [
    ['f32', 1, 33, 136],
    ['f32', 3, 10, 50],
    ['f32', 16, 7, 40],
    ['f32', 2, 9, 31],
    ['f32', 1, 11, 300, { few: { subgroupRows: true, rows: 2, threads: 0, prefetch: true } }],
    ['f32', 1, 13, 204, { few: { subgroupRows: false, rows: 4, threads: 32, chunkWords: 2 } }],
    ['f32', 2, 9, 70, { few: { subgroupRows: false, rows: 2, threads: 0, chunkWords: 1 } }], // f32 chunks stay 2 words
    ['f16', 1, 33, 136],
    ['bf16', 2, 17, 64],
    ['f16', 3, 10, 50],
    ['f16', 16, 7, 40],
    ['f16', 2, 9, 31],
    ['f16', 4, 9, 72, { few: { subgroupRows: true, rows: 2, threads: 0 } }],
    ['bf16', 1, 11, 300, { few: { subgroupRows: true, rows: 2, threads: 0, prefetch: true } }],
    ['f16', 1, 13, 204, { few: { subgroupRows: false, rows: 4, threads: 32, chunkWords: 2 } }],
    ['bf16', 3, 7, 100, { few: { subgroupRows: false, rows: 2, threads: 0, chunkWords: 1 } }],
  ];
  for (const [wd, M, N, K, tune] of cases)
    it(gemvCaseName({ w: wd, M, N, K, bias: M === 2, tune }), async () => {
      expect(await runGemvCase(ctx, { w: wd, M, N, K, bias: M === 2, tune })).toBeLessThan(GEMV_TOL);
    });

  it('shape errors', () => {
    const w = upload(ctx, randn(8 * 16, 1), [8, 16], 'f16');
    expect(() => gemv16(ctx, upload(ctx, randn(15, 1), [1, 15]), w)).toThrow(/in_features 16/);
    expect(() => gemv16(ctx, upload(ctx, randn(17 * 16, 1), [17, 16]), w)).toThrow(ShapeError);
    expect(() => gemv16(ctx, upload(ctx, randn(16, 1), [1, 16]), upload(ctx, randn(16, 1), [1, 16], 'i32'))).toThrow(/f16, bf16 or f32/);
  });
});
