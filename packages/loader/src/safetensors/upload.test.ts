import { join } from 'node:path';
import { createContext, download, f16BitsToF32, bf16BitsToF32, release, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, tempDir } from '../testing/fixtures';
import { numberToBf16Bits, numberToF16Bits, readSafetensors, writeSafetensors } from './index';

const { dir: TMP, cleanup } = tempDir();
let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => {
  ctx?.destroy();
  cleanup();
});

describe('upload to the GPU', () => {
  it('keeps f16 weights packed on the GPU and converts them exactly to f32', async () => {
    const st = await readSafetensors(join(FIXTURES, 'llama-tiny-f16', 'model.safetensors'));
    const name = 'model.layers.0.self_attn.q_proj.weight';
    const raw = (await st.read(name)) as Uint16Array;
    const h = await st.upload(ctx, name);
    expect(h.dtype).toBe('f16');
    expect(h.shape).toEqual([64, 64]);
    expect(Array.from(await download(ctx, h))).toEqual(Array.from(raw, f16BitsToF32));
    const f = await st.upload(ctx, name, { dtype: 'f32', chunkBytes: 1000 });
    expect(Array.from(await download(ctx, f))).toEqual(Array.from(raw, f16BitsToF32));
    release(ctx, h, f);
    await st.close();
  });

  // bf16 values beyond f16's range, at its rounding edge, subnormal in f16, and below it
  const WIDE = [70000, -1e6, 3e38, 65504, 65520, -65536, 1e-5, -3e-6, 1e-8, 0, -0];
  // and f32 values at f16's and bf16's rounding ties (even and odd), beyond f16, subnormal in f16
  const WIDE32 = [...WIDE, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 65519.99, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 1e-40];

  it('converts between dtypes in chunks, with odd element counts', async () => {
    const n = 1001;
    const f64 = Float64Array.from({ length: n }, (_, i) => Math.sin(i) * 10 ** ((i % 9) - 4));
    const path = join(TMP, 'up.safetensors');
    await writeSafetensors(path, {
      f64: { shape: [7, 143], data: f64 },
      f32: { shape: [n], data: Float32Array.from(f64) },
      bf16: { dtype: 'BF16', shape: [n], data: Uint16Array.from(f64, numberToBf16Bits) },
      f16: { dtype: 'F16', shape: [n], data: Uint16Array.from(f64, numberToF16Bits) },
      i64: { shape: [n], data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i * 1000 - 500000)) },
      u8: { shape: [n], data: Uint8Array.from({ length: n }, (_, i) => i % 256) },
      big: { shape: [2], data: BigInt64Array.of(1n, 2n ** 40n) },
      wide: { dtype: 'BF16', shape: [WIDE.length], data: Uint16Array.from(WIDE, numberToBf16Bits) },
      wide32: { shape: [WIDE32.length], data: Float32Array.from(WIDE32) },
    });
    const st = await readSafetensors(path);
    for (const chunkBytes of [16, 136, undefined]) {
      const opts = { chunkBytes };
      const cases: [string, Parameters<typeof st.upload>[2], number[]][] = [
        ['f64', { ...opts }, Array.from(Float32Array.from(f64))],
        ['f64', { ...opts, dtype: 'f16' }, Array.from(f64, (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['f64', { ...opts, dtype: 'bf16' }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['f32', { ...opts }, Array.from(Float32Array.from(f64))],
        ['f32', { ...opts, dtype: 'bf16' }, Array.from(Float32Array.from(f64), (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['f32', { ...opts, dtype: 'bf16', cpuConvert: true }, Array.from(Float32Array.from(f64), (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['f32', { ...opts, dtype: 'f16' }, Array.from(Float32Array.from(f64), (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['f32', { ...opts, dtype: 'f16', cpuConvert: true }, Array.from(Float32Array.from(f64), (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['wide32', { ...opts, dtype: 'f16' }, Array.from(Float32Array.from(WIDE32), (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['wide32', { ...opts, dtype: 'bf16' }, Array.from(Float32Array.from(WIDE32), (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['bf16', { ...opts }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['bf16', { ...opts, dtype: 'f32' }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['bf16', { ...opts, dtype: 'f32', cpuConvert: true }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(x)))],
        ['f16', { ...opts, dtype: 'f32' }, Array.from(f64, (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['f16', { ...opts, dtype: 'f32', cpuConvert: true }, Array.from(f64, (x) => f16BitsToF32(numberToF16Bits(x)))],
        ['bf16', { ...opts, dtype: 'f16' }, Array.from(f64, (x) => f16BitsToF32(numberToF16Bits(bf16BitsToF32(numberToBf16Bits(x)))))],
        ['bf16', { ...opts, dtype: 'f16', cpuConvert: true }, Array.from(f64, (x) => f16BitsToF32(numberToF16Bits(bf16BitsToF32(numberToBf16Bits(x)))))],
        ['f16', { ...opts, dtype: 'bf16' }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(f16BitsToF32(numberToF16Bits(x)))))],
        ['f16', { ...opts, dtype: 'bf16', cpuConvert: true }, Array.from(f64, (x) => bf16BitsToF32(numberToBf16Bits(f16BitsToF32(numberToF16Bits(x)))))],
        ['wide', { ...opts, dtype: 'f16' }, Array.from(WIDE, (x) => f16BitsToF32(numberToF16Bits(bf16BitsToF32(numberToBf16Bits(x)))))],
        ['wide', { ...opts, dtype: 'f16', cpuConvert: true }, Array.from(WIDE, (x) => f16BitsToF32(numberToF16Bits(bf16BitsToF32(numberToBf16Bits(x)))))],
        ['i64', { ...opts }, Array.from({ length: n }, (_, i) => i * 1000 - 500000)],
        ['i64', { ...opts, dtype: 'f32' }, Array.from({ length: n }, (_, i) => i * 1000 - 500000)],
        ['u8', { ...opts }, Array.from({ length: n }, (_, i) => i % 256)],
        ['u8', { ...opts, dtype: 'i32' }, Array.from({ length: n }, (_, i) => i % 256)],
      ];
      for (const [name, o, want] of cases) {
        const t = await st.upload(ctx, name, o);
        expect(t.dtype).toBe(o?.dtype ?? { f64: 'f32', f32: 'f32', bf16: 'bf16', f16: 'f16', i64: 'i32', u8: 'u32', wide: 'bf16', wide32: 'f32' }[name]);
        expect(Array.from(await download(ctx, t)), `${name} -> ${t.dtype}, chunk ${chunkBytes}`).toEqual(want);
        release(ctx, t);
      }
    }
    await expect(st.upload(ctx, 'big')).rejects.toThrow(/tensor 'big': element 1 = 1099511627776 does not fit in i32/);
    await expect(st.upload(ctx, 'f32', { dtype: 'i32' })).rejects.toThrow(/cannot upload a F32 tensor as i32/);
    await expect(st.upload(ctx, 'f32', { dtype: 'f8' as 'f32' })).rejects.toThrow(/unknown dtype 'f8'/);
    await st.close();
  });
});
