/**
 * The storage format table: the one place that knows what each tensor storage format is. Every package asks
 * this table (through {@link formatOf}, {@link formatFromSafetensors}, {@link formatFromTorch}, or the
 * helpers in `dtype.ts` that delegate here) instead of keeping its own list of float dtypes, 16-bit decoders
 * or name mappings.
 *
 * A descriptor says:
 * - what the format is (`kind`, `description`), its element size (`bits`, `perWord`: `numel` elements occupy
 *   ceil(numel / perWord) u32 words, see `storageBytes` in dtype.ts: WGSL storage arrays are word arrays);
 * - its WGSL: the storage array's element type, an expression loading element `i` as f32 (or the integer
 *   type), and for packed formats the word-level `unpack` / `pack` expressions that vectorised kernels use
 *   (the 16-bit helpers they call live in `shaders/half.wgsl`, prepended to every kernel);
 * - its host conversions (numbers <-> storage bytes, and rounding a number to the format);
 * - its names in files: the safetensors dtype (`F32`, `BF16`, ...) and the HF config's `torch_dtype`
 *   (`float32`, `bfloat16`, ...).
 *
 * Layouts: 32-bit formats are one element per u32 word. 16-bit formats are packed two per word, element 2k in
 * the low half, 2k+1 in the high half (little-endian bytes, so a safetensors F16/BF16 byte stream uploads as is).
 *
 * ## Adding a format (one entry here, ~30-50 lines; nothing else is required to make it a `DType`)
 * 1. Add a descriptor to `FORMATS` below. Its key becomes a member of `DType` (the union is derived from this
 *    table), so tensors, uploads (`encode`), downloads (`decode`), `storageBytes` and the generated kernel
 *    readers (`read_<name>(i)` in `kernel.ts`) handle it at once.
 * 2. WGSL: `wgsl.load(arr, i)` must be a self-contained expression (helpers it calls go in
 *    `wgsl.helpers`, emitted once per kernel that binds the format). Packed formats set `perWord` and give
 *    `unpack(w)` (all elements of one word as `vecNf`, N = perWord, or f32 when perWord is 1). A format that
 *    kernels may write sets `pack(xs)` (one word from perWord f32 expressions).
 * 3. Quantized block formats (int8 / int4 / NF4: codes plus a scale per block) are not entries here: a quantized
 *    matrix is a `QuantTensor` (codes, scales, group size, padded rows) owned by `ops/quant/formats.ts`, whose
 *    host round trip is lossy and whose elements no generic kernel reads. Its scales are table formats (f32,
 *    f16), named in files through this table.
 * 4. Host: `encode`/`decode` between numbers and the storage bytes, exact both ways for values of the format;
 *    `round` where the format can represent any number approximately (tests use it to build references of
 *    rounded inputs).
 * 5. Names: `safetensors` (the dtype string in a safetensors header, or null) and `torch` (`torch_dtype`).
 * 6. Tests: add the format to the round-trip cases of `format.test.ts`.
 */

/** The float kinds kernels compute on and the integer kinds indices use. */
export type FormatKind = 'float' | 'int';

/** The WGSL side of a format. Expressions take the names of WGSL values (arrays, indices, words). */
export interface WgslFormat {
  /** Element type of the storage array a kernel declares for this format (`array<word>`). */
  readonly word: 'f32' | 'i32' | 'u32';
  /** Type the loader returns: `f32` for float formats, else the integer type. */
  readonly value: 'f32' | 'i32' | 'u32';
  /** Expression: element `i` (a u32 expression) of storage array `arr` as `value`. */
  load(arr: string, i: string): string;
  /** Expression: the `perWord` elements of u32 word `w` as f32 (perWord 1) or vecNf (N = perWord). */
  unpack(w: string): string;
  /** Expression: one u32 word holding `xs` (perWord f32 expressions, first element in the lowest bits). Absent
   *  where kernels never write the format. */
  pack?(xs: readonly string[]): string;
  /** WGSL functions `load`/`unpack`/`pack` call beyond `shaders/half.wgsl` (emitted once per kernel). */
  readonly helpers?: string;
}

/** A storage format: see the file header. */
export interface StorageFormat {
  readonly name: string;
  readonly kind: FormatKind;
  readonly description: string;
  /** Bits of one element. */
  readonly bits: number;
  /** Elements per u32 word (1 for 32-bit formats, 2 for 16-bit, 4 for 8-bit ones). */
  readonly perWord: number;
  readonly wgsl: WgslFormat;
  /** Numbers -> the storage bytes (whole words). */
  encode(data: ArrayLike<number>): Uint8Array;
  /** `numel` elements of the storage bytes -> numbers (exact). */
  decode(bytes: ArrayBuffer, numel: number): Float32Array | Int32Array | Uint32Array;
  /** The nearest value of the format (round to nearest even), for references; absent for integer formats. */
  round?(x: number): number;
  /** The dtype string in safetensors headers, or null if safetensors has none. */
  readonly safetensors: string | null;
  /** The `torch_dtype` name in HF configs (`torch.float16` -> `float16`), or null. */
  readonly torch: string | null;
}

// ---- host bit conversions of the 16-bit floats (the WGSL twins live in shaders/half.wgsl) ----

const f32b = new Float32Array(1);
const u32b = new Uint32Array(f32b.buffer);

/** f32 -> IEEE half bits, round to nearest even, subnormals, inf and NaN kept (NaN stays quiet NaN). */
export function f32ToF16Bits(x: number): number {
  f32b[0] = x;
  const b = u32b[0]!;
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
  f32b[0] = x;
  const b = u32b[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) return ((b >>> 16) | 0x40) & 0xffff;
  const rounded = b + 0x7fff + ((b >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** bfloat16 bits -> number (exact). */
export function bf16BitsToF32(h: number): number {
  u32b[0] = (h & 0xffff) << 16;
  return f32b[0]!;
}

// ---- descriptor builders ----

function word32<N extends 'f32' | 'i32' | 'u32', K extends FormatKind>(
  name: N,
  kind: K,
  description: string,
  st: string,
  torch: string,
): StorageFormat & { name: N; kind: K } {
  const Arr = name === 'f32' ? Float32Array : name === 'i32' ? Int32Array : Uint32Array;
  return {
    name,
    kind,
    description,
    bits: 32,
    perWord: 1,
    wgsl: {
      word: name,
      value: name,
      load: (arr, i) => `${arr}[${i}]`,
      unpack: (w) => (name === 'f32' ? `bitcast<f32>(${w})` : `${name}(${w})`),
      pack: (xs) => (name === 'f32' ? `bitcast<u32>(${xs[0]})` : `u32(${xs[0]})`),
    },
    encode: (data) => new Uint8Array(Arr.from(data).buffer),
    decode: (bytes, n) => new Arr(bytes, 0, n).slice(),
    ...(name === 'f32' ? { round: (x: number) => Math.fround(x) } : {}),
    safetensors: st,
    torch,
  };
}

function half16<N extends 'f16' | 'bf16'>(
  name: N,
  description: string,
  toBits: (x: number) => number,
  fromBits: (h: number) => number,
  w: { load: (arr: string, i: string) => string; unpack: (w: string) => string; enc: string },
  st: string,
  torch: string,
): StorageFormat & { name: N; kind: 'float' } {
  return {
    name,
    kind: 'float',
    description,
    bits: 16,
    perWord: 2,
    wgsl: {
      word: 'u32',
      value: 'f32',
      load: w.load,
      unpack: w.unpack,
      pack: (xs) => `(${w.enc}(${xs[0]}) | (${w.enc}(${xs[1]}) << 16u))`,
    },
    encode(data) {
      const n = data.length;
      const out = new Uint16Array(Math.ceil(n / 2) * 2);
      for (let i = 0; i < n; i++) out[i] = toBits(data[i]!);
      return new Uint8Array(out.buffer);
    },
    decode(bytes, n) {
      const h = new Uint16Array(bytes, 0, n);
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = fromBits(h[i]!);
      return out;
    },
    round: (x) => fromBits(toBits(x)),
    safetensors: st,
    torch,
  };
}

/**
 * Every storage format, by name. The order is the order `DTYPES` lists them in.
 */
export const FORMATS = {
  f32: word32('f32', 'float', 'IEEE binary32 float', 'F32', 'float32'),
  f16: half16(
    'f16',
    'IEEE binary16 float, two per u32 word (low half first); arithmetic in f32',
    f32ToF16Bits,
    f16BitsToF32,
    {
      load: (a, i) => `f16_bits_to_f32((${a}[(${i}) >> 1u] >> (((${i}) & 1u) * 16u)) & 0xffffu)`,
      unpack: (w) => `unpack2x16float(${w})`,
      enc: 'f32_to_f16_bits',
    },
    'F16',
    'float16',
  ),
  bf16: half16(
    'bf16',
    'bfloat16 (the top half of an f32), two per u32 word (low half first); arithmetic in f32',
    f32ToBf16Bits,
    bf16BitsToF32,
    {
      load: (a, i) => `bitcast<f32>(select(${a}[(${i}) >> 1u] << 16u, ${a}[(${i}) >> 1u] & 0xffff0000u, ((${i}) & 1u) == 1u))`,
      unpack: (w) => `vec2f(bitcast<f32>((${w}) << 16u), bitcast<f32>((${w}) & 0xffff0000u))`,
      enc: 'f32_to_bf16_bits',
    },
    'BF16',
    'bfloat16',
  ),
  i32: word32('i32', 'int', '32-bit signed integer (token ids, indices)', 'I32', 'int32'),
  u32: word32('u32', 'int', '32-bit unsigned integer', 'U32', 'uint32'),
} as const satisfies Record<string, StorageFormat>;

/** The name of a storage format (a key of {@link FORMATS}). */
export type FormatName = keyof typeof FORMATS;

/** The float formats kernels compute on (f32 and the 16-bit storage formats). */
export type FloatFormat = { [K in FormatName]: (typeof FORMATS)[K]['kind'] extends 'float' ? K : never }[FormatName];

const TABLE: Readonly<Record<string, StorageFormat>> = FORMATS;

/** Every format name, in table order. */
export const FORMAT_NAMES = Object.keys(FORMATS) as FormatName[];

/** The float formats, in table order (`['f32', 'f16', 'bf16']` today). */
export const FLOAT_FORMATS = FORMAT_NAMES.filter((n) => TABLE[n]!.kind === 'float') as FloatFormat[];

/** The descriptor of a format name (throws a TypeError for a name the table lacks: callers check names from
 *  users with `assertDType` first). */
export function formatOf(name: string): StorageFormat {
  const f = TABLE[name];
  if (!f) throw new TypeError(`unknown storage format '${name}'`);
  return f;
}

/** Is `name` a format kernels compute on as floats (f32, f16, bf16)? */
export function isFloatFormat(name: string): name is FloatFormat {
  return TABLE[name]?.kind === 'float';
}

/** A comma list of names, for messages: `f32, f16 or bf16`. */
export function listNames(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

/** The format a safetensors dtype string stores (`F32` -> f32, `BF16` -> bf16), or undefined when the table
 *  has none (F64, I64, BOOL, ...: the loader converts those). */
export function formatFromSafetensors(dtype: string): FormatName | undefined {
  return FORMAT_NAMES.find((n) => TABLE[n]!.safetensors === dtype);
}

/** The format an HF `torch_dtype` names (`float16`, `torch.bfloat16`, ...), or undefined. */
export function formatFromTorch(torchDtype: string): FormatName | undefined {
  const t = torchDtype.replace(/^torch\./, '');
  return FORMAT_NAMES.find((n) => TABLE[n]!.torch === t);
}
