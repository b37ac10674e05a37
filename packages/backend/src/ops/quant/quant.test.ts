import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, release, upload } from '../../tensor';
import { relErr } from '../../testing';
import { DQ_BLOCK, DYNAMIC_MAP, NF4_CODE, quantBytes, quantLayout, quantSpec } from './formats';
import { dequantizeRef, packCodes, quantizeRef, unpackCodes } from './quant.ref';
import { dequantize, quantize, releaseQuant } from './quantize';
import { checkBlockError, name, readQuant, SPECS, weights } from './quant.test-util';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

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
        const host = await readQuant(ctx, q);
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
