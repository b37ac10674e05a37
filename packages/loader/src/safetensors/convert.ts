import { f16BitsToF32 } from '@rusty/backend';
import { SafetensorsError } from '../errors';
import { arrayOf, dtypeSize, type SafetensorsDType } from './dtypes';

let f16Table: Float32Array | undefined;
let e4m3Table: Float32Array | undefined;
let e5m2Table: Float32Array | undefined;
let e8m0Table: Float32Array | undefined;

function f16Lut(): Float32Array {
  if (!f16Table) {
    f16Table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = f16BitsToF32(h);
  }
  return f16Table;
}

/** fp8 E4M3 ("fn": no infinities, S.1111.111 is NaN, bias 7). */
function e4m3Lut(): Float32Array {
  if (!e4m3Table) {
    e4m3Table = new Float32Array(256);
    for (let b = 0; b < 256; b++) {
      const s = b & 0x80 ? -1 : 1;
      const e = (b >> 3) & 0xf;
      const m = b & 7;
      e4m3Table[b] = e === 15 && m === 7 ? NaN : e === 0 ? s * (m / 8) * 2 ** -6 : s * (1 + m / 8) * 2 ** (e - 7);
    }
  }
  return e4m3Table;
}

/** fp8 E5M2 (IEEE-like: the top byte of an f16). */
function e5m2Lut(): Float32Array {
  if (!e5m2Table) {
    e5m2Table = new Float32Array(256);
    for (let b = 0; b < 256; b++) e5m2Table[b] = f16BitsToF32(b << 8);
  }
  return e5m2Table;
}

/** fp8 E8M0 (an unsigned power of two 2^(b - 127); 0xFF is NaN). */
function e8m0Lut(): Float32Array {
  if (!e8m0Table) {
    e8m0Table = new Float32Array(256);
    for (let b = 0; b < 256; b++) e8m0Table[b] = b === 255 ? NaN : 2 ** (b - 127);
  }
  return e8m0Table;
}

/**
 * Convert `n` elements of `dtype` stored in `src` (byteOffset aligned to the element size) to f32 in
 * `out[outStart ..]`. f16, bf16 and fp8 convert exactly; f64 and 64-bit integers round to nearest.
 */
export function decodeToF32(dtype: SafetensorsDType, src: Uint8Array, n: number, out: Float32Array, outStart = 0): void {
  const buf = src.buffer as ArrayBuffer;
  const off = src.byteOffset;
  switch (dtype) {
    case 'F32':
      out.set(new Float32Array(buf, off, n), outStart);
      return;
    case 'F16': {
      const h = new Uint16Array(buf, off, n);
      const lut = f16Lut();
      for (let i = 0; i < n; i++) out[outStart + i] = lut[h[i]!]!;
      return;
    }
    case 'BF16': {
      const h = new Uint16Array(buf, off, n);
      const o = new Uint32Array(out.buffer, out.byteOffset + outStart * 4, n);
      for (let i = 0; i < n; i++) o[i] = h[i]! << 16;
      return;
    }
    case 'F8_E4M3':
    case 'F8_E5M2':
    case 'F8_E8M0': {
      const lut = dtype === 'F8_E4M3' ? e4m3Lut() : dtype === 'F8_E5M2' ? e5m2Lut() : e8m0Lut();
      for (let i = 0; i < n; i++) out[outStart + i] = lut[src[i]!]!;
      return;
    }
    case 'BOOL':
      for (let i = 0; i < n; i++) out[outStart + i] = src[i] ? 1 : 0;
      return;
    case 'I64':
    case 'U64': {
      const a = arrayOf(dtype, buf, off, n) as BigInt64Array | BigUint64Array;
      for (let i = 0; i < n; i++) out[outStart + i] = Number(a[i]!);
      return;
    }
    default: {
      const a = arrayOf(dtype, buf, off, n) as Exclude<ReturnType<typeof arrayOf>, BigInt64Array | BigUint64Array>;
      for (let i = 0; i < n; i++) out[outStart + i] = a[i]!;
    }
  }
}

function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
}

/** A binary float format narrower than f64, for exact rounding of numbers into it. */
interface HalfFormat {
  mantBits: number;
  bias: number;
  expMax: number; // all-ones exponent field
}
const F16: HalfFormat = { mantBits: 10, bias: 15, expMax: 31 };
const BF16: HalfFormat = { mantBits: 7, bias: 127, expMax: 255 };

/** A number (any double) rounded to nearest-even into a 16-bit float format; NaN becomes a quiet NaN. */
function toHalfBits(x: number, f: HalfFormat): number {
  const mant = 1 << f.mantBits;
  const expShift = f.mantBits;
  const inf = f.expMax << expShift;
  if (Number.isNaN(x)) return inf | (mant >> 1);
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | inf;
  const minNormalExp = 1 - f.bias;
  if (a < 2 ** minNormalExp) return sign | roundHalfEven(a * 2 ** (f.mantBits - minNormalExp));
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  const bits = ((e + f.bias) << expShift) + roundHalfEven((a / 2 ** e - 1) * mant);
  return sign | Math.min(bits, inf);
}

/** A number rounded to nearest-even into IEEE half bits (exact for any double input, no double rounding). */
export function numberToF16Bits(x: number): number {
  return toHalfBits(x, F16);
}

/** A number rounded to nearest-even into bfloat16 bits (exact for any double input). */
export function numberToBf16Bits(x: number): number {
  return toHalfBits(x, BF16);
}

/** Convert `n` elements of `dtype` in `src` to 16-bit float bits of `target` in `out[outStart ..]`. */
export function encodeHalf(target: 'f16' | 'bf16', dtype: SafetensorsDType, src: Uint8Array, n: number, out: Uint16Array, outStart = 0): void {
  if ((dtype === 'F16' && target === 'f16') || (dtype === 'BF16' && target === 'bf16')) {
    out.set(new Uint16Array(src.buffer, src.byteOffset, n), outStart);
    return;
  }
  const tmp = new Float32Array(n);
  let wide: Float64Array | undefined;
  if (dtype === 'F64') wide = new Float64Array(src.buffer, src.byteOffset, n);
  else decodeToF32(dtype, src, n, tmp);
  const conv = target === 'f16' ? numberToF16Bits : numberToBf16Bits;
  for (let i = 0; i < n; i++) out[outStart + i] = conv(wide ? wide[i]! : tmp[i]!);
}

/**
 * Convert `n` integer elements to i32 or u32 in `out[outStart ..]`, checking the range.
 * @throws SafetensorsError naming the tensor when a value does not fit or the dtype is not an integer type
 */
export function encodeInt32(
  target: 'i32' | 'u32',
  dtype: SafetensorsDType,
  src: Uint8Array,
  n: number,
  out: Int32Array | Uint32Array,
  outStart: number,
  where: string,
): void {
  if (dtype.startsWith('F'))
    throw new SafetensorsError(`${where}: cannot upload a ${dtype} tensor as ${target} (choose f32, f16 or bf16)`);
  const lo = target === 'i32' ? -(2 ** 31) : 0;
  const hi = target === 'i32' ? 2 ** 31 - 1 : 2 ** 32 - 1;
  const a = dtype === 'BOOL' ? src.subarray(0, n) : arrayOf(dtype, src.buffer as ArrayBuffer, src.byteOffset, n);
  for (let i = 0; i < n; i++) {
    const v = Number(a[i]!);
    if (v < lo || v > hi) throw new SafetensorsError(`${where}: element ${outStart + i} = ${a[i]} does not fit in ${target}`);
    out[outStart + i] = dtype === 'BOOL' ? (v ? 1 : 0) : v;
  }
}

/** Bytes per element of a chunk boundary: chunks hold whole elements and whole 4-byte output words. */
export function chunkElements(dtype: SafetensorsDType, chunkBytes: number): number {
  const n = Math.max(2, Math.floor(chunkBytes / dtypeSize(dtype)));
  return n - (n % 2);
}
