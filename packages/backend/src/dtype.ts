import { ConfigError } from './errors';

/** Storage dtypes. `f16` and `bf16` are packed two per u32 word (element i in word i>>1, low half first). */
export type DType = 'f32' | 'f16' | 'bf16' | 'i32' | 'u32';

export const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'u32'];

export function isDType(s: string): s is DType {
  return (DTYPES as readonly string[]).includes(s);
}

export function assertDType(s: string): DType {
  if (!isDType(s)) throw new ConfigError(`unknown dtype '${s}' (expected one of ${DTYPES.join(', ')})`);
  return s;
}

/** Is it a 16-bit float storage format (packed, arithmetic in f32)? */
export function isHalf(d: DType): boolean {
  return d === 'f16' || d === 'bf16';
}

/** Bytes a tensor of `numel` elements occupies, rounded up to whole u32 words. */
export function storageBytes(dtype: DType, numel: number): number {
  return isHalf(dtype) ? Math.ceil(numel / 2) * 4 : numel * 4;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 -> IEEE half bits, round to nearest even, subnormals, inf and NaN kept (NaN stays quiet NaN). */
export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const man = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 | (man >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = man | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (man >>> 13);
  const rem = man & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** IEEE half bits -> number (exact). */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0) return sign * man * 2 ** -24;
  if (exp === 0x1f) return man ? NaN : sign * Infinity;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

/** f32 -> bfloat16 bits, round to nearest even; NaN stays NaN. */
export function f32ToBf16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) return ((b >>> 16) | 0x40) & 0xffff;
  const rounded = b + 0x7fff + ((b >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** bfloat16 bits -> number (exact). */
export function bf16BitsToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

/** Encode numbers into the storage bytes of `dtype` (16-bit formats packed two per word). */
export function encode(dtype: DType, data: ArrayLike<number>): Uint8Array {
  const n = data.length;
  switch (dtype) {
    case 'f32':
      return new Uint8Array(Float32Array.from(data).buffer);
    case 'i32':
      return new Uint8Array(Int32Array.from(data).buffer);
    case 'u32':
      return new Uint8Array(Uint32Array.from(data).buffer);
    case 'f16':
    case 'bf16': {
      const out = new Uint16Array(Math.ceil(n / 2) * 2);
      const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
      for (let i = 0; i < n; i++) out[i] = conv(data[i]!);
      return new Uint8Array(out.buffer);
    }
  }
}

/** Decode `numel` elements of `dtype` storage bytes into a Float32Array (or Int32Array/Uint32Array). */
export function decode(dtype: DType, bytes: ArrayBuffer, numel: number): Float32Array | Int32Array | Uint32Array {
  switch (dtype) {
    case 'f32':
      return new Float32Array(bytes, 0, numel).slice();
    case 'i32':
      return new Int32Array(bytes, 0, numel).slice();
    case 'u32':
      return new Uint32Array(bytes, 0, numel).slice();
    case 'f16':
    case 'bf16': {
      const h = new Uint16Array(bytes, 0, numel);
      const out = new Float32Array(numel);
      const conv = dtype === 'f16' ? f16BitsToF32 : bf16BitsToF32;
      for (let i = 0; i < numel; i++) out[i] = conv(h[i]!);
      return out;
    }
  }
}
