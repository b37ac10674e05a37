// X as int8 limbs (x-limbs.ts): the words against the host's, bit for bit; what they hold against x; the RMSNorm
// that writes them; the integer int4 GEMV on them against float64 of the values they hold.
import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { ShapeError } from '../../errors';
import { download, empty, upload } from '../../tensor';
import { randn, relErr, toF32 } from '../../testing';
import { addRmsNorm, rmsNorm } from '../llm/rmsnorm';
import { quantSpec } from './formats';
import { gemvSubgroupsAvailable, gemvTakesLimbs, gemvTuning } from './gemv';
import { GEMV_TOL, gemvCaseName, runGemvCase, type GemvCase } from './gemv.cases';
import { quantLinear } from './qmatmul';
import { quantize, releaseQuant } from './quantize';
import { decodeLimbs, LIMB_QMAX, limbsRef, limbWords, xLimbs, xLimbsAvailable } from './x-limbs';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());
const has = () => xLimbsAvailable(ctx);

/** Rows with the groups that matter: a zero group, one large element among small ones, negative extremes,
 *  exact powers of two (where the step changes) and elements at QMAX's edge. */
function hostileRows(rows: number, K: number): Float32Array {
  const x = Float32Array.from(randn(rows * K, 11, 3));
  x.fill(0, 16, 32); // group 1 of row 0: zeros
  x[32] = 1e4; // group 2: one large element, the others ~3
  for (let i = 48; i < 64; i++) x[i] = -(2 ** (i - 52)); // group 3: powers of two, negative
  for (let i = 64; i < 80; i++) x[i] = (i % 2 ? -1 : 1) * 0.99609375 * 2 ** 5; // group 4: 1.f just over QMAX / 2^23
  for (let i = 80; i < 96; i++) x[i] = 1e-30 * (i - 87.5); // group 5: tiny
  return x;
}

describe('xLimbs', () => {
  it.runIf(has())('writes the host reference bit for bit, and holds every element within m 2^-23 of its group', async () => {
    const K = 128;
    const xs = hostileRows(3, K);
    const x = upload(ctx, xs, [3, K]);
    const xl = xLimbs(ctx, x);
    expect(xl.shape).toEqual([3, limbWords(K)]);
    const words = (await download(ctx, xl)) as Uint32Array;
    expect(Array.from(words)).toEqual(Array.from(limbsRef(xs, K)));
    const back = decodeLimbs(words, K);
    let worst = 0;
    for (let g = 0; g < (3 * K) / 16; g++) {
      let m = 0;
      for (let i = 0; i < 16; i++) m = Math.max(m, Math.abs(xs[16 * g + i]!));
      for (let i = 0; i < 16; i++) {
        const e = Math.abs(back[16 * g + i]! - xs[16 * g + i]!);
        expect(e).toBeLessThanOrEqual(m * 2 ** -23);
        worst = Math.max(worst, m ? e / m : e);
      }
    }
    expect(worst).toBeGreaterThan(0); // the values are rounded (not a copy)
    // the zero group decodes to zeros, and the large element's group keeps the large one to f32's precision
    expect(Array.from(back.slice(16, 32))).toEqual(new Array(16).fill(0));
    expect(back[32]).toBe(1e4);
  });

  it.runIf(has())('uses every limb value it may: |a| <= 127 at QMAX, the largest element at q = QMAX', () => {
    const K = 16;
    const x = new Float32Array(K).fill(0);
    x[0] = LIMB_QMAX;
    x[1] = -LIMB_QMAX;
    const w = limbsRef(x, K);
    // step 2^0: q = +-QMAX, a = b = c = +-127 in the first byte of the even / odd words of each limb
    for (const L of [0, 1, 2]) {
      expect(w[2 * L]! & 255).toBe(127);
      expect(w[2 * L + 1]! & 255).toBe(256 - 127);
    }
    expect(decodeLimbs(w, K)[0]).toBe(LIMB_QMAX);
  });

  it.runIf(has())('refuses x that is not f32 or whose rows are not groups of 16', () => {
    expect(() => xLimbs(ctx, upload(ctx, new Float32Array(24), [1, 24]))).toThrow(ShapeError);
    expect(() => xLimbs(ctx, upload(ctx, new Float32Array(32), [1, 32], 'f16'))).toThrow(ShapeError);
  });
});

describe('rmsNorm with limbs', () => {
  // D 96: the row in registers; 4096: a 7B model's row, on more threads than the plain norm takes (so the sum of
  // squares is added in another order); 65552: longer than the registers hold (read twice, the limbs' rounds a loop)
  for (const [residual, D] of [[false, 96], [true, 96], [true, 4096], [false, 65552]] as const)
    it.runIf(has())(`${residual ? 'addRmsNorm' : 'rmsNorm'}, rows of ${D}: y is the plain kernel's to f32 rounding, its limbs those the host writes of y, bit for bit`, async () => {
      const rows = 2;
      const x = upload(ctx, toF32(randn(rows * D, 3, 2)), [rows, D]);
      const r = upload(ctx, toF32(randn(rows * D, 4)), [rows, D]);
      const w = upload(ctx, toF32(randn(D, 5)), [D], 'bf16');
      const norm = (limbs: boolean) => (residual ? addRmsNorm(ctx, x, r, w, { eps: 1e-5, limbs }) : { sum: undefined, ...rmsNorm(ctx, x, w, { eps: 1e-5, limbs }) });
      const plain = norm(false);
      const withL = norm(true);
      const y = await download(ctx, withL.y);
      expect(relErr(y, await download(ctx, plain.y))).toBeLessThan(1e-6);
      if (residual) expect(Array.from(await download(ctx, withL.sum!))).toEqual(Array.from(await download(ctx, plain.sum!)));
      expect(withL.limbs!.shape).toEqual([rows, limbWords(D)]);
      expect(Array.from(await download(ctx, withL.limbs!))).toEqual(Array.from(limbsRef(y, D)));
    });

  it.runIf(has())('refuses limbs of a row that is not groups of 16', () => {
    const x = upload(ctx, new Float32Array(40), [1, 40]);
    expect(() => rmsNorm(ctx, x, upload(ctx, new Float32Array(40), [40]), { limbs: true })).toThrow(ShapeError);
  });
});

describe('the integer int4 GEMV on limbs', () => {
  const hasGemv = () => has() && gemvSubgroupsAvailable(ctx);
  // rolled (lavapipe's default) and unrolled; chunks of 2 and 4 words (K 1008: 4 falls back to 2); parts
  const cases: GemvCase[] = [
    { w: quantSpec('int4', 64), M: 1, N: 37, K: 256, limbs: true },
    { w: quantSpec('int4', 32), M: 1, N: 9, K: 1008, bias: true, limbs: true, tune: { limbs: { chunkWords: 4 } } },
    { w: quantSpec('int4', 128), M: 1, N: 21, K: 512, limbs: true, tune: { limbs: { rows: 2, threads: 32, chunkWords: 4, prefetch: true }, unroll: true } },
    { w: quantSpec('int4', 64), M: 1, N: 0, K: 256, parts: [37, 9, 9], bias: true, limbs: true },
    { w: quantSpec('int4', 64), M: 1, N: 0, K: 128, parts: [21, 21], limbs: true, tune: { unroll: true } },
    // limbs the RMSNorm writes
    { w: quantSpec('int4', 64), M: 1, N: 21, K: 272, limbs: 'norm' },
    { w: quantSpec('int4', 32), M: 1, N: 0, K: 96, parts: [9, 13], limbs: 'norm', bias: true },
    // the codes as signed bytes 16 (u - 8) instead of their offset subtracted
    { w: quantSpec('int4', 64), M: 1, N: 37, K: 256, limbs: true, tune: { limbsDecode: 'signed' } },
    { w: quantSpec('int4', 32), M: 1, N: 0, K: 1008, parts: [9, 5], limbs: true, tune: { limbsDecode: 'signed', limbs: { chunkWords: 4 }, unroll: true } },
  ];
  for (const c of cases)
    it.runIf(hasGemv())(gemvCaseName(c), async () => {
      expect(await runGemvCase(ctx, c)).toBeLessThan(GEMV_TOL);
    });

  it.runIf(hasGemv())('is taken for one row of int4 only; quantLinear reads x where it is not, and checks the limbs it takes', async () => {
    const K = 64;
    const wt = upload(ctx, toF32(randn(8 * K, 2, 0.1)), [8, K]);
    const i4 = quantize(ctx, wt, quantSpec('int4', 32));
    const nf4 = quantize(ctx, wt, quantSpec('nf4', 64));
    expect(gemvTakesLimbs(ctx, i4, 1)).toBe(true);
    expect(gemvTakesLimbs(ctx, i4, 2)).toBe(false);
    expect(gemvTakesLimbs(ctx, nf4, 1)).toBe(false);
    const saved = gemvTuning.limbs;
    gemvTuning.limbs = null;
    expect(gemvTakesLimbs(ctx, i4, 1)).toBe(false);
    gemvTuning.limbs = saved;
    const x = upload(ctx, toF32(randn(K, 3)), [1, K]);
    const xl = xLimbs(ctx, x);
    // NF4 ignores the limbs: the same result as without them
    const a = await download(ctx, quantLinear(ctx, x, nf4, { variant: 'gemv', xLimbs: xl }));
    expect(Array.from(a)).toEqual(Array.from(await download(ctx, quantLinear(ctx, x, nf4, { variant: 'gemv' }))));
    // limbs of another row length
    const short = empty(ctx, [limbWords(48)], 'u32');
    expect(() => quantLinear(ctx, x, i4, { variant: 'gemv', xLimbs: short })).toThrow(ShapeError);
    releaseQuant(ctx, i4);
    releaseQuant(ctx, nf4);
  });
});
