/**
 * Storage dtypes: the names of the formats in the format table (`format.ts`, which owns what each format is,
 * its size, WGSL, host conversions and file names). The helpers here are the short forms every package uses.
 */
import { ConfigError } from './errors';
import { FLOAT_FORMATS, FORMAT_NAMES, formatOf, isFloatFormat, listNames, type FloatFormat, type FormatName } from './format';

export { f32ToF16Bits, f16BitsToF32, f32ToBf16Bits, bf16BitsToF32 } from './format';

/** Storage dtypes: every format of the table. `f16` and `bf16` are packed two per u32 word (element i in word
 *  i>>1, low half first). */
export type DType = FormatName;

/** The float storage dtypes kernels compute on (arithmetic in f32): f32, f16, bf16. */
export type FloatDType = FloatFormat;

export const DTYPES: readonly DType[] = FORMAT_NAMES;

/** The float dtypes, in table order. */
export const FLOAT_DTYPES: readonly FloatDType[] = FLOAT_FORMATS;

export function isDType(s: string): s is DType {
  return (DTYPES as readonly string[]).includes(s);
}

export function assertDType(s: string): DType {
  if (!isDType(s)) throw new ConfigError(`unknown dtype '${s}' (expected one of ${DTYPES.join(', ')})`);
  return s;
}

/** Is it a float storage dtype (f32, f16, bf16)? */
export function isFloat(d: string): d is FloatDType {
  return isFloatFormat(d);
}

/** `f32, f16 or bf16`: the float dtypes, for messages. */
export function floatNames(): string {
  return listNames(FLOAT_FORMATS);
}

/** Is it a 16-bit float storage format (packed, arithmetic in f32)? */
export function isHalf(d: DType): boolean {
  const f = formatOf(d);
  return f.kind === 'float' && f.bits === 16;
}

/** Bytes a tensor of `numel` elements occupies, rounded up to whole u32 words. */
export function storageBytes(dtype: DType, numel: number): number {
  return Math.ceil(numel / formatOf(dtype).perWord) * 4;
}

/** Encode numbers into the storage bytes of `dtype` (16-bit formats packed two per word). */
export function encode(dtype: DType, data: ArrayLike<number>): Uint8Array {
  return formatOf(dtype).encode(data);
}

/** Decode `numel` elements of `dtype` storage bytes into a Float32Array (or Int32Array/Uint32Array). */
export function decode(dtype: DType, bytes: ArrayBuffer, numel: number): Float32Array | Int32Array | Uint32Array {
  return formatOf(dtype).decode(bytes, numel);
}
