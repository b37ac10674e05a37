import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { refAttention } from './attention.ref';
import { attentionDecode } from './decode';
import { flashAttention } from './flash';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

interface DecCase {
  B: number;
  Smax: number;
  len: number;
  Hq: number;
  Hkv: number;
  D: number;
  chunk?: number;
  mask?: boolean;
  dtype?: DType;
}

const CASES: DecCase[] = [
  { B: 2, Smax: 40, len: 33, Hq: 4, Hkv: 2, D: 16 },
  { B: 1, Smax: 300, len: 300, Hq: 2, Hkv: 1, D: 64, chunk: 64 },
  { B: 2, Smax: 200, len: 150, Hq: 4, Hkv: 1, D: 80, mask: true },
  { B: 1, Smax: 8, len: 1, Hq: 2, Hkv: 2, D: 64 },
  { B: 2, Smax: 2500, len: 2100, Hq: 2, Hkv: 1, D: 16, mask: true },
  { B: 1, Smax: 70, len: 70, Hq: 4, Hkv: 4, D: 64, dtype: 'f16', chunk: 32 },
];

describe('attentionDecode', () => {
  for (const c of CASES)
    it(`B${c.B} Smax${c.Smax} len${c.len} Hq${c.Hq} Hkv${c.Hkv} D${c.D}${c.chunk ? ` chunk${c.chunk}` : ''}${c.mask ? ' mask' : ''}${c.dtype ? ` ${c.dtype}` : ''}`, async () => {
      const dt = c.dtype ?? 'f32';
      const { B, Smax, len, Hq, Hkv, D } = c;
      const q = upload(ctx, randn(B * Hq * D, len + 1), [B, 1, Hq, D], dt);
      const kc = upload(ctx, randn(B * Smax * Hkv * D, len + 2), [B, Smax, Hkv, D], dt);
      const vc = upload(ctx, randn(B * Smax * Hkv * D, len + 3), [B, Smax, Hkv, D], dt);
      // mask: sequence 0 left-padded by 5, every 7th key of the others dropped; sequence 1 (if any) fully
      // masked when len is small enough to test the empty-row rule elsewhere.
      const mv = new Int32Array(B * Smax).map((_, i) => {
        const b = Math.floor(i / Smax);
        const s = i % Smax;
        return b === 0 ? (s < 5 ? 0 : 1) : s % 7 === 3 ? 0 : 1;
      });
      const mask = c.mask ? upload(ctx, mv, [B, Smax], 'u32') : undefined;
      const out = empty(ctx, [B, 1, Hq, D]);
      poison(ctx, out);
      attentionDecode(ctx, q, kc, vc, len, { keyMask: mask, out, chunk: c.chunk });
      const got = await download(ctx, out);

      // float64 reference on the first len positions, query at position len - 1
      const qv = Float64Array.from(await download(ctx, q));
      const kAll = await download(ctx, kc);
      const vAll = await download(ctx, vc);
      const kv = new Float64Array(B * len * Hkv * D);
      const vv = new Float64Array(B * len * Hkv * D);
      for (let b = 0; b < B; b++)
        for (let s = 0; s < len; s++)
          for (let x = 0; x < Hkv * D; x++) {
            kv[(b * len + s) * Hkv * D + x] = kAll[(b * Smax + s) * Hkv * D + x]!;
            vv[(b * len + s) * Hkv * D + x] = vAll[(b * Smax + s) * Hkv * D + x]!;
          }
      const mSub = new Int32Array(B * len).map((_, i) => mv[Math.floor(i / len) * Smax + (i % len)]!);
      const dims = { B, T: 1, S: len, Hq, Hkv, D };
      const opts = { causal: true, scale: 1 / Math.sqrt(D), qOffset: len - 1, mask: c.mask ? mSub : undefined };
      const ref = refAttention(dims, opts, qv, kv, vv);
      expect(relErr(got, ref.out)).toBeLessThan(2e-6);

      // and the flash forward with T = 1 and qOffset = len - 1 on the same keys
      const kt = upload(ctx, kv, [B, len, Hkv, D]);
      const vt = upload(ctx, vv, [B, len, Hkv, D]);
      const mt = c.mask ? upload(ctx, mSub, [B, len], 'u32') : undefined;
      const f = flashAttention(ctx, upload(ctx, qv, [B, 1, Hq, D]), kt, vt, { qOffset: len - 1, keyMask: mt });
      expect(relErr(got, await download(ctx, f.out))).toBeLessThan(2e-6);
      release(ctx, q, kc, vc, out, kt, vt, f.out, f.lse, ...(mask ? [mask] : []), ...(mt ? [mt] : []));
    });

  // Sliding window at lengths before, at and past the window (chunked inside the window, windows that are not
  // chunk multiples), on the decode pipelines compiled above (D 16 and 64).
  for (const [D, window, chunk, lens, softcap] of [
    [16, 5, 2, [1, 4, 5, 6, 13, 40]],
    [64, 100, 64, [99, 100, 101, 300]],
    [16, 7, undefined, [8, 2100]],
    [16, 6, 4, [3, 20], 1.5],
    [64, undefined, undefined, [70], 2],
  ] as [number, number | undefined, number | undefined, number[], number?][])
    it(`${window ? `sliding window ${window}` : 'full'}, D${D}${chunk ? ` chunk${chunk}` : ''}${softcap ? ` softcap${softcap}` : ''}, len ${lens.join(', ')}`, async () => {
      const B = 2;
      const Hq = 4;
      const Hkv = 2;
      const Smax = Math.max(...lens) + 3;
      const seed = (window ?? 0) + D;
      const q = upload(ctx, randn(B * Hq * D, seed, 2), [B, 1, Hq, D]);
      const kc = upload(ctx, randn(B * Smax * Hkv * D, seed + 1), [B, Smax, Hkv, D]);
      const vc = upload(ctx, randn(B * Smax * Hkv * D, seed + 2), [B, Smax, Hkv, D]);
      const qv = Float64Array.from(await download(ctx, q));
      const kAll = Float64Array.from(await download(ctx, kc));
      const vAll = Float64Array.from(await download(ctx, vc));
      for (const len of lens) {
        const out = empty(ctx, [B, 1, Hq, D]);
        poison(ctx, out);
        attentionDecode(ctx, q, kc, vc, len, { out, chunk, slidingWindow: window, softcap });
        // the reference sees the whole cache; its window and causal mask (query at len - 1) hide the rest
        const dims = { B, T: 1, S: Smax, Hq, Hkv, D };
        const ref = refAttention(dims, { causal: true, scale: 1 / Math.sqrt(D), qOffset: len - 1, window, softcap }, qv, kAll, vAll);
        expect({ len, err: relErr(await download(ctx, out), ref.out) < 2e-6 }).toEqual({ len, err: true });
        release(ctx, out);
      }
      release(ctx, q, kc, vc);
    });

  it('writes zeros for a sequence with no visible key, and for len = 0', async () => {
    const q = upload(ctx, randn(2 * 2 * 16, 1), [2, 1, 2, 16]);
    const kc = upload(ctx, randn(2 * 10 * 2 * 16, 2), [2, 10, 2, 16]);
    const mask = upload(ctx, [...Array(10).fill(0), ...Array(10).fill(1)], [2, 10], 'u32');
    for (const len of [0, 10]) {
      const out = empty(ctx, [2, 1, 2, 16]);
      poison(ctx, out);
      attentionDecode(ctx, q, kc, kc, len, { keyMask: mask, out, chunk: 4 });
      const got = await download(ctx, out);
      expect(Array.from(got.slice(0, 32))).toEqual(Array(32).fill(0));
      if (len) expect(got.slice(32).every((x) => Number.isFinite(x) && x !== 0)).toBe(true);
      release(ctx, out);
    }
    release(ctx, q, kc, mask);
  });

  it('throws ShapeError naming the shapes', () => {
    const q = empty(ctx, [1, 1, 4, 16]);
    const kc = empty(ctx, [1, 8, 2, 16]);
    expect(() => attentionDecode(ctx, q, kc, kc, 9)).toThrow(ShapeError);
    expect(() => attentionDecode(ctx, q, kc, kc, 9)).toThrow(/f32\[1, 8, 2, 16\]/);
    expect(() => attentionDecode(ctx, empty(ctx, [1, 2, 4, 16]), kc, kc, 4)).toThrow(/\[B, 1, Hq, D\]/);
    expect(() => attentionDecode(ctx, q, empty(ctx, [1, 8, 3, 16]), empty(ctx, [1, 8, 3, 16]), 4)).toThrow(/divide/);
    expect(() => attentionDecode(ctx, q, kc, kc, 4, { slidingWindow: 0 })).toThrow(ConfigError);
    expect(() => attentionDecode(ctx, q, kc, kc, 4, { softcap: 0 })).toThrow(ConfigError);
    release(ctx, q, kc);
  });
});
