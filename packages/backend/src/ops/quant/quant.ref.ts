import { f16BitsToF32, f32ToF16Bits } from '../../dtype';
import { DQ_BLOCK, DYNAMIC_MAP, NF4_CODE, NF4_THRESHOLDS, QMAX, quantLayout, type QuantLayout, type QuantSpec } from './formats';

/**
 * Host reference of the quantized formats (float64 arithmetic on the stored values), for tests and for the
 * loader's file round trips. `codes` holds one code per padded element (row-major [N, Kp]: the signed int8 value,
 * or the 4-bit code u in 0..15); `scales` the first-level scales as stored (f16/f32 values) or, with double
 * quantization, as decoded.
 */
export interface HostQuant {
  layout: QuantLayout;
  codes: Int32Array;
  scales: Float64Array;
  /** Double quantization: u8 codes of the absmax values, the per-256 absmax2 and the offset. */
  dq?: { codes: Uint8Array; absmax2: Float64Array; offset: number };
}

const f16 = (x: number) => f16BitsToF32(f32ToF16Bits(x));

/** Round half to even (WGSL `round`). */
export function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The NF4 code of a normalised value (ties to the lower code, as bitsandbytes). */
export function nf4Code(x: number): number {
  let c = 0;
  for (const t of NF4_THRESHOLDS) if (x > t) c++;
  return c;
}

/** The index of the nearest DYNAMIC_MAP value (ties to the lower index). */
export function dynCode(x: number): number {
  let lo = 0;
  let hi = 255;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (DYNAMIC_MAP[mid]! <= x) lo = mid;
    else hi = mid;
  }
  return x - DYNAMIC_MAP[lo]! <= DYNAMIC_MAP[hi]! - x ? lo : hi;
}

/** Quantize W [N, K] (row-major numbers) on the host. */
export function quantizeRef(spec: QuantSpec, w: ArrayLike<number>, N: number, K: number): HostQuant {
  const l = quantLayout(spec, N, K);
  const codes = new Int32Array(N * l.Kp);
  const scales = new Float64Array(N * l.nb);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < l.nb; b++) {
      const k0 = b * l.G;
      const k1 = Math.min(K, k0 + l.G);
      let amax = 0;
      for (let k = k0; k < k1; k++) amax = Math.max(amax, Math.abs(w[n * K + k]!));
      let s: number;
      if (spec.format === 'nf4') s = Math.fround(amax);
      else if (spec.format === 'int8') s = Math.fround(amax / QMAX.int8);
      else s = f16(amax / QMAX.int4);
      scales[n * l.nb + b] = s;
      for (let k = k0; k < k0 + l.G; k++) {
        const x = k < K ? w[n * K + k]! : 0;
        let c: number;
        if (spec.format === 'nf4') c = s > 0 ? nf4Code(x / s) : 7;
        else {
          const qm = QMAX[spec.format];
          const q = s > 0 ? Math.min(qm, Math.max(-qm, roundEven(x / s))) : 0;
          c = spec.format === 'int4' ? q + 8 : q;
        }
        codes[n * l.Kp + k] = c;
      }
    }
  const out: HostQuant = { layout: l, codes, scales };
  if (spec.doubleQuant) {
    const L = scales.length;
    let sum = 0;
    for (const s of scales) sum += s;
    const offset = Math.fround(sum / L);
    const nb2 = Math.ceil(L / DQ_BLOCK);
    const absmax2 = new Float64Array(nb2);
    const dc = new Uint8Array(L);
    for (let b = 0; b < nb2; b++) {
      let m = 0;
      for (let i = b * DQ_BLOCK; i < Math.min(L, (b + 1) * DQ_BLOCK); i++) m = Math.max(m, Math.abs(scales[i]! - offset));
      absmax2[b] = Math.fround(m);
      for (let i = b * DQ_BLOCK; i < Math.min(L, (b + 1) * DQ_BLOCK); i++)
        dc[i] = m > 0 ? dynCode((scales[i]! - offset) / absmax2[b]!) : dynCode(0);
    }
    out.dq = { codes: dc, absmax2, offset };
    out.scales = dqScalesRef(out.dq, L);
  }
  return out;
}

/** Decode double-quantized absmax values: `DYNAMIC_MAP[c] * absmax2 + offset`. */
export function dqScalesRef(dq: NonNullable<HostQuant['dq']>, L: number): Float64Array {
  const s = new Float64Array(L);
  for (let i = 0; i < L; i++) s[i] = DYNAMIC_MAP[dq.codes[i]!]! * dq.absmax2[Math.floor(i / DQ_BLOCK)]! + dq.offset;
  return s;
}

/** The value a code stands for, before the scale. */
export function codeValue(spec: QuantSpec, c: number): number {
  return spec.format === 'nf4' ? NF4_CODE[c]! : spec.format === 'int4' ? c - 8 : c;
}

/** Dequantize to [N, K] float64 (the values the kernels must reproduce up to f32 rounding). */
export function dequantizeRef(spec: QuantSpec, q: Pick<HostQuant, 'layout' | 'codes' | 'scales'>): Float64Array {
  const { N, K, Kp, G, nb } = q.layout;
  const out = new Float64Array(N * K);
  for (let n = 0; n < N; n++)
    for (let k = 0; k < K; k++) out[n * K + k] = codeValue(spec, q.codes[n * Kp + k]!) * q.scales[n * nb + Math.floor(k / G)]!;
  return out;
}

/** Pack codes into the GPU's u32 words (int8: byte k = element k; 4-bit: high nibble first in each byte). */
export function packCodes(spec: QuantSpec, l: QuantLayout, codes: Int32Array): Uint32Array {
  const words = new Uint32Array(l.N * l.wpr);
  const bytes = new Uint8Array(words.buffer);
  if (spec.format === 'int8') for (let i = 0; i < codes.length; i++) bytes[i] = codes[i]! & 0xff;
  else for (let i = 0; i < codes.length; i += 2) bytes[i >> 1] = ((codes[i]! & 15) << 4) | (codes[i + 1]! & 15);
  return words;
}

/** Unpack u32 words (or their bytes) into one code per padded element. */
export function unpackCodes(spec: QuantSpec, l: QuantLayout, words: Uint32Array | Uint8Array): Int32Array {
  const bytes = words instanceof Uint8Array ? words : new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
  const n = l.N * l.Kp;
  const codes = new Int32Array(n);
  if (spec.format === 'int8') for (let i = 0; i < n; i++) codes[i] = (bytes[i]! << 24) >> 24;
  else
    for (let i = 0; i < n; i += 2) {
      codes[i] = bytes[i >> 1]! >> 4;
      codes[i + 1] = bytes[i >> 1]! & 15;
    }
  return codes;
}

/**
 * The largest error quantize-then-dequantize may leave in one block, given the block's absmax and the stored
 * scale: half a step of the integer grid (plus what rounding the scale to its storage costs at the clamp), or
 * half the widest gap between adjacent NF4 values.
 */
export function blockErrorBound(spec: QuantSpec, absmax: number, scale: number): number {
  if (spec.format === 'nf4') {
    let gap = 0;
    for (let i = 1; i < 16; i++) gap = Math.max(gap, NF4_CODE[i]! - NF4_CODE[i - 1]!);
    return (gap / 2) * Math.max(absmax, scale) + Math.abs(absmax - scale);
  }
  const qm = QMAX[spec.format];
  return scale / 2 + Math.max(0, absmax - qm * scale) + 1e-12;
}
