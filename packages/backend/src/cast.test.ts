import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from './context';
import { f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from './dtype';
import { cast } from './ops/cast';
import { download, empty, poison, release, uploadBytes } from './tensor';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('cast kernels', () => {
  it('f16 -> f32 -> f16 is exact for all 65536 half values', async () => {
    const bits = new Uint16Array(65536).map((_, i) => i);
    const h = uploadBytes(ctx, bits, [65536], 'f16');
    const f = empty(ctx, [65536], 'f32');
    poison(ctx, f);
    cast(ctx, h, 'f32', f);
    const got = (await download(ctx, f)) as Float32Array;
    for (let i = 0; i < 65536; i++) {
      const want = f16BitsToF32(i);
      if (Number.isNaN(want)) expect(Number.isNaN(got[i]!)).toBe(true);
      else if (!Object.is(got[i], want)) expect([i, got[i]]).toEqual([i, want]);
    }
    const back = empty(ctx, [65536], 'f16');
    poison(ctx, back);
    cast(ctx, f, 'f16', back);
    const raw = new Uint16Array(await ctx.read(back.buffer, 65536 * 2));
    for (let i = 0; i < 65536; i++) {
      const isNan = (i & 0x7c00) === 0x7c00 && (i & 0x3ff) !== 0;
      const want = isNan ? i | 0x200 : i;
      if (raw[i] !== want) expect([i, raw[i]]).toEqual([i, want]);
    }
    release(ctx, h, f, back);
  });

  it('f32 -> f16 and bf16 round to nearest even like the CPU reference, odd lengths included', async () => {
    const n = 100_003;
    const vals = new Float32Array(n);
    const u = new Uint32Array(vals.buffer);
    for (let i = 0; i < n; i++) u[i] = (Math.random() * 2 ** 32) >>> 0;
    // ties, overflow edges, subnormal boundaries
    vals.set([65504, 65519.99, 65520, 2 ** -24, 2 ** -25, 1.5 * 2 ** -25, 2 ** -14, 1 + 2 ** -11, 1 + 3 * 2 ** -11, -0, Infinity, -Infinity, NaN]);
    const f = uploadBytes(ctx, vals, [n], 'f32');
    for (const dt of ['f16', 'bf16'] as const) {
      const h = empty(ctx, [n], dt);
      poison(ctx, h, 0xdeadbeef);
      cast(ctx, f, dt, h);
      const raw = new Uint16Array(await ctx.read(h.buffer, n * 2));
      const conv = dt === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
      let bad = 0;
      for (let i = 0; i < n; i++) if (raw[i] !== conv(vals[i]!)) bad++;
      expect(bad).toBe(0);
      const back = empty(ctx, [n], 'f32');
      poison(ctx, back);
      cast(ctx, h, 'f32', back);
      const got = (await download(ctx, back)) as Float32Array;
      const ref = (await download(ctx, h)) as Float32Array;
      for (let i = 0; i < n; i++) if (!Object.is(got[i], ref[i]) && !(Number.isNaN(got[i]!) && Number.isNaN(ref[i]!))) bad++;
      expect(bad).toBe(0);
      release(ctx, h, back);
    }
    release(ctx, f);
  });
});
