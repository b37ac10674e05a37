import { ConfigError, ShapeError } from '../../errors';
import type { DeviceTensor } from '../../tensor';

/**
 * Quantized weight formats: the one owner of their byte layouts, code books and WGSL decoders.
 *
 * A quantized weight is a matrix `W [N, K]` (HF Linear layout `[out, in]`) split along K into blocks of `G`
 * inputs; every block has one scale. Each row is padded with zeros to `Kp = nb * G` elements (`nb = ceil(K / G)`
 * blocks per row), so no block spans two rows. Storage (all little-endian, rows contiguous):
 *
 * | format | codes | code -> value | scale | block G |
 * | --- | --- | --- | --- | --- |
 * | `int8` | one signed byte per element, `Kp` bytes a row; element k in byte k | `q * s`, q in [-127, 127] (`s = absmax / 127`) | f32 per block | 32 / 64 / 128, or 0: one per row (G = Kp = K rounded up to 4) |
 * | `int4` | two per byte, `Kp / 2` bytes a row; element 2j in the HIGH nibble of byte j, 2j+1 in the low nibble | `(u - 8) * s`, u in [1, 15] (`s = absmax / 7`, rounded to f16 first) | f16 per block | 32 / 64 / 128 |
 * | `nf4` | as int4 (bitsandbytes' nibble order) | `NF4_CODE[u] * absmax` | f32 absmax per block, or double-quantized | 64 (32 / 128 allowed) |
 *
 * NF4 is QLoRA's 4-bit NormalFloat exactly as bitsandbytes defines it: the 16 values of {@link NF4_CODE}
 * (`create_normal_map`), each value x of a block normalised by the block's absmax and mapped to the nearest code
 * value (ties to the lower one, as bitsandbytes' decision tree does). Where K is a multiple of the block,
 * the codes and absmax are byte for byte bitsandbytes' (which blocks the flattened tensor).
 *
 * Double quantization (`doubleQuant`, NF4 only; bitsandbytes' `compress_statistics`): the f32 absmax list
 * (`N * nb` values, row-major) is centred on its mean `offset`, then quantized blockwise in blocks of 256 with
 * bitsandbytes' 8-bit signed dynamic map ({@link DYNAMIC_MAP}): one u8 code per absmax (packed four per u32 word,
 * value i in byte i) and one f32 `absmax2` per 256-block. Decoding: `absmax = DYNAMIC_MAP[c] * absmax2 + offset`.
 *
 * On the GPU the codes live in `u32` words (`Kp * bits / 32` words a row); scales in their own tensor.
 *
 * Relation to the storage format table (`format.ts`): the scales (f32, f16) are table formats, and the loader
 * names them in files through it. The quantized formats themselves are not `DType`s: a quantized matrix is a
 * {@link QuantTensor} (codes + scales + optional double-quantization state, with a group size chosen per matrix
 * and rows padded to whole blocks), which no elementwise kernel reads, and whose host round trip is lossy, so
 * it would not satisfy the table's contract (exact encode/decode, `read_<name>(i)` of any element of an
 * unpadded tensor). Kernels that read quantized weights take a QuantTensor and decode it with the WGSL of
 * {@link codeBookWgsl} and `shaders/quant-common.wgsl`.
 */
export type QuantFormat = 'int8' | 'int4' | 'nf4';

export const QUANT_FORMATS: readonly QuantFormat[] = ['int8', 'int4', 'nf4'];

/** Block sizes a format accepts (0: one scale per output row). */
export const QUANT_BLOCKS: Readonly<Record<QuantFormat, readonly number[]>> = {
  int8: [0, 32, 64, 128],
  int4: [32, 64, 128],
  nf4: [32, 64, 128],
};

/** The default block per format (QLoRA: NF4 in blocks of 64). */
export const QUANT_DEFAULT_BLOCK: Readonly<Record<QuantFormat, number>> = { int8: 0, int4: 64, nf4: 64 };

/** Absmax values per second-level block in NF4 double quantization (bitsandbytes: 256). */
export const DQ_BLOCK = 256;

/** How a matrix is quantized. */
export interface QuantSpec {
  format: QuantFormat;
  /** Inputs per scale: 32, 64 or 128; 0 (int8 only) for one scale per output row. */
  groupSize: number;
  /** NF4 only: quantize the absmax scales too (8-bit, blocks of 256, around their mean). */
  doubleQuant?: boolean;
}

/** The geometry of one quantized [N, K] matrix. */
export interface QuantLayout {
  N: number;
  K: number;
  /** Elements per block. */
  G: number;
  /** Blocks per row. */
  nb: number;
  /** Padded row length, nb * G. */
  Kp: number;
  /** Codes per u32 word: 4 (int8) or 8 (4-bit). */
  epw: number;
  /** u32 words per row. */
  wpr: number;
  /** Storage of the (first-level) scales: f32 (int8, nf4) or f16 (int4). */
  scaleDtype: 'f32' | 'f16';
}

/** A quantized matrix on the GPU. */
export interface QuantTensor {
  spec: QuantSpec;
  layout: QuantLayout;
  /** u32 [N, wpr]: the packed codes. */
  data: DeviceTensor;
  /** f32/f16 [N, nb]: the block scales; with double quantization u32 [ceil(N * nb / 4)] (u8 codes). */
  scales: DeviceTensor;
  /** Double quantization: f32 [ceil(N * nb / 256)]. */
  absmax2?: DeviceTensor;
  /** Double quantization: f32 [1], the mean of the absmax values. */
  offset?: DeviceTensor;
}

/** Parse and check a quantization spec (format name, block size), with messages that name `what`. */
export function quantSpec(format: string, groupSize?: number, doubleQuant = false, what = 'quantize'): QuantSpec {
  if (!(QUANT_FORMATS as readonly string[]).includes(format))
    throw new ConfigError(`${what}: unknown quantization format '${format}' (expected ${QUANT_FORMATS.join(', ')})`);
  const f = format as QuantFormat;
  const g = groupSize ?? QUANT_DEFAULT_BLOCK[f];
  if (!QUANT_BLOCKS[f].includes(g))
    throw new ConfigError(`${what}: group size ${g} is not supported by ${f} (expected ${QUANT_BLOCKS[f].join(', ')}; 0 = per row)`);
  if (doubleQuant && f !== 'nf4') throw new ConfigError(`${what}: double quantization is defined for nf4 only, not ${f}`);
  return { format: f, groupSize: g, doubleQuant: f === 'nf4' ? doubleQuant : false };
}

/** Bits per code. */
export function quantBits(f: QuantFormat): 4 | 8 {
  return f === 'int8' ? 8 : 4;
}

/** The layout of an [N, K] matrix in `spec`. */
export function quantLayout(spec: QuantSpec, N: number, K: number): QuantLayout {
  if (!Number.isInteger(N) || !Number.isInteger(K) || N < 1 || K < 1)
    throw new ShapeError(`quantize: a weight [${N}, ${K}] needs positive integer dims`);
  const epw = 32 / quantBits(spec.format);
  const G = spec.groupSize === 0 ? Math.ceil(K / 4) * 4 : spec.groupSize;
  const nb = Math.ceil(K / G);
  const Kp = nb * G;
  return { N, K, G, nb, Kp, epw, wpr: Kp / epw, scaleDtype: spec.format === 'int4' ? 'f16' : 'f32' };
}

/** Bytes a quantized [N, K] matrix occupies on the GPU (codes, scales and double-quantization state). */
export function quantBytes(spec: QuantSpec, N: number, K: number): number {
  const l = quantLayout(spec, N, K);
  let b = N * l.wpr * 4;
  const ns = N * l.nb;
  if (spec.doubleQuant) b += Math.ceil(ns / 4) * 4 + Math.ceil(ns / DQ_BLOCK) * 4 + 4;
  else b += l.scaleDtype === 'f16' ? Math.ceil(ns / 2) * 4 : ns * 4;
  return b;
}

/** Largest code magnitude of the integer formats (symmetric). */
export const QMAX: Readonly<Record<'int8' | 'int4', number>> = { int8: 127, int4: 7 };

/** QLoRA's NF4 code book, bitsandbytes' `create_normal_map()` values as f32 (index = 4-bit code). */
export const NF4_CODE: readonly number[] = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
];

/** Decision thresholds between adjacent NF4 values (their midpoints, f32): code = number of thresholds < x. */
export const NF4_THRESHOLDS: readonly number[] = NF4_CODE.slice(1).map((v, i) => Math.fround((v + NF4_CODE[i]!) / 2));

/**
 * bitsandbytes' signed 8-bit dynamic map (`create_dynamic_map(signed=True)`, 7 exponent bits): for i = 0..6,
 * the means of adjacent points of `linspace(0.1, 1, 2^i + 1)` scaled by 10^(i - 6), with both signs, plus 0 and
 * 1; 256 values sorted ascending, computed in float64 and rounded to f32.
 */
export const DYNAMIC_MAP: readonly number[] = (() => {
  const data: number[] = [];
  for (let i = 0; i < 7; i++) {
    const items = 2 ** i + 1;
    const scale = 10 ** (i - 6);
    for (let j = 0; j + 1 < items; j++) {
      const a = 0.1 + (0.9 * j) / (items - 1);
      const b = 0.1 + (0.9 * (j + 1)) / (items - 1);
      const m = (a + b) / 2;
      data.push(scale * m, -scale * m);
    }
  }
  data.push(0, 1);
  return data.sort((x, y) => x - y).map((v) => Math.fround(v));
})();

/** WGSL literal of an f32 value. */
function lit(v: number): string {
  const s = Math.fround(v).toPrecision(9);
  return s.includes('.') || s.includes('e') ? s : `${s}.0`;
}

/** WGSL `const` arrays of the code books (prepended to the quantization shaders). */
export function codeBookWgsl(): string {
  return (
    `const NF4_CODE = array<f32, 16>(${NF4_CODE.map(lit).join(', ')});\n` +
    `const NF4_THRESH = array<f32, 15>(${NF4_THRESHOLDS.map(lit).join(', ')});\n` +
    `const DYN_MAP = array<f32, 256>(${DYNAMIC_MAP.map(lit).join(', ')});\n`
  );
}

/** WGSL format id used as the `FMT` override. */
export const FMT_ID: Readonly<Record<QuantFormat, number>> = { int8: 0, int4: 1, nf4: 2 };
