import commonWgsl from '../../../../../shaders/quant-common.wgsl';
import encodeWgsl from '../../../../../shaders/quant-encode.wgsl';
import dqEncodeWgsl from '../../../../../shaders/quant-dq-encode.wgsl';
import dqDecodeWgsl from '../../../../../shaders/dequant-dq-scales.wgsl';
import dequantWgsl from '../../../../../shaders/dequant-weight.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { cast } from '../cast';
import { reduce } from '../core/reduce';
import { assertFloat, checkBinding, fmtShape } from '../core/util';
import { codeBookWgsl, DQ_BLOCK, FMT_ID, quantLayout, type QuantFormat, type QuantSpec, type QuantTensor } from './formats';

/** The WGSL text every quantization kernel starts with: code books, then the format decoders. */
export function quantPrelude(): string {
  return codeBookWgsl() + commonWgsl;
}

/**
 * Quantize a float matrix `w [N, K]` (f32, f16 or bf16; HF Linear layout `[out, in]`) on the GPU into `spec`'s
 * packed format (layouts: `formats.ts`). `w` is left as it is; the caller releases it.
 */
export function quantize(ctx: Context, w: DeviceTensor, spec: QuantSpec): QuantTensor {
  assertFloat(w, 'quantize', 'weight');
  if (w.shape.length !== 2) throw new ShapeError(`quantize: weight ${fmtShape(w.shape)} must be 2-D [out, in]`);
  checkBinding(ctx, w, 'quantize', 'weight');
  const [N, K] = w.shape as [number, number];
  const l = quantLayout(spec, N, K);
  const data = empty(ctx, [N, l.wpr], 'u32');
  const s32 = empty(ctx, [N, l.nb], 'f32');
  const k = cachedKernel(ctx, `quant-encode:${spec.format}:${w.dtype}`, () => ({
    name: 'quant-encode',
    code: quantPrelude() + encodeWgsl,
    bindings: [
      { name: 'w', access: 'read', dtype: w.dtype },
      { name: 'q', access: 'rw', dtype: 'u32' },
      { name: 's', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:wpr', 'u32:row'],
    constants: { FMT: FMT_ID[spec.format] },
  }));
  const { wg, row } = grid1d(N * l.nb, 64);
  ctx.dispatch(k, [w.buffer, data.buffer, s32.buffer], wg, [N, K, l.G, l.nb, l.wpr, row]);
  const q: QuantTensor = { spec, layout: l, data, scales: s32 };
  if (l.scaleDtype === 'f16') {
    q.scales = cast(ctx, s32, 'f16');
    ctx.release(s32.buffer);
  } else if (spec.doubleQuant) {
    Object.assign(q, doubleQuantize(ctx, s32));
    ctx.release(s32.buffer);
  }
  return q;
}

/** NF4 double quantization of an f32 absmax list [N, nb]: u8 codes around the mean, absmax2 per 256 values. */
function doubleQuantize(ctx: Context, a: DeviceTensor): Pick<QuantTensor, 'scales' | 'absmax2' | 'offset'> {
  const L = numel(a.shape);
  const flat = { ...a, shape: [L] };
  const total = reduce(ctx, 'sum', flat, 0, { keepDims: true });
  const codes = empty(ctx, [Math.ceil(L / 4)], 'u32');
  const absmax2 = empty(ctx, [Math.ceil(L / DQ_BLOCK)], 'f32');
  const offset = empty(ctx, [1], 'f32');
  const k = cachedKernel(ctx, 'quant-dq-encode', () => ({
    name: 'quant-dq-encode',
    code: codeBookWgsl() + dqEncodeWgsl,
    bindings: [
      { name: 'a', access: 'read', dtype: 'f32' },
      { name: 'total', access: 'read', dtype: 'f32' },
      { name: 'codes', access: 'rw', dtype: 'u32' },
      { name: 'absmax2', access: 'rw', dtype: 'f32' },
      { name: 'offset', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:L', 'u32:row'],
  }));
  const { wg, row } = grid1d(Math.ceil(L / DQ_BLOCK), 64);
  ctx.dispatch(k, [a.buffer, total.buffer, codes.buffer, absmax2.buffer, offset.buffer], wg, [L, row]);
  ctx.release(total.buffer);
  return { scales: codes, absmax2, offset };
}

/** A double-quantized weight's second-level state (absmax2, offset); a ShapeError where it is missing. */
export function dqState(q: QuantTensor): { absmax2: DeviceTensor; offset: DeviceTensor } {
  if (!q.absmax2 || !q.offset) throw new ShapeError('quantized weight: double quantization state (absmax2, offset) is missing');
  return { absmax2: q.absmax2, offset: q.offset };
}

/**
 * The first-level scales a kernel reads: the stored tensor itself, or (double quantization) a new f32 [N, nb]
 * tensor decoded on the GPU. `owned` says whether the caller must release it.
 */
export function quantScales(ctx: Context, q: QuantTensor): { scales: DeviceTensor; owned: boolean } {
  if (!q.spec.doubleQuant) return { scales: q.scales, owned: false };
  const { absmax2, offset } = dqState(q);
  const L = q.layout.N * q.layout.nb;
  const s = empty(ctx, [q.layout.N, q.layout.nb], 'f32');
  const k = cachedKernel(ctx, 'dequant-dq-scales', () => ({
    name: 'dequant-dq-scales',
    code: codeBookWgsl() + dqDecodeWgsl,
    bindings: [
      { name: 'codes', access: 'read', dtype: 'u32' },
      { name: 'absmax2', access: 'read', dtype: 'f32' },
      { name: 'offset', access: 'read', dtype: 'f32' },
      { name: 's', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:L', 'u32:row'],
  }));
  const { wg, row } = grid1d(L, 256);
  ctx.dispatch(k, [q.scales.buffer, absmax2.buffer, offset.buffer, s.buffer], wg, [L, row]);
  return { scales: s, owned: true };
}

/** Dequantize to a float matrix [N, K] in f32 or f16 (f16: round to nearest even). */
export function dequantize(ctx: Context, q: QuantTensor, dtype: 'f32' | 'f16' = 'f32'): DeviceTensor {
  const { N, K, G, nb, wpr } = q.layout;
  const out = empty(ctx, [N, K], dtype);
  checkBinding(ctx, out, 'dequantize', 'output');
  const { scales, owned } = quantScales(ctx, q);
  const total = dtype === 'f16' ? Math.ceil((N * K) / 2) : N * K;
  const k = cachedKernel(ctx, `dequant-weight:${q.spec.format}:${scales.dtype}:${dtype}`, () => ({
    name: 'dequant-weight',
    code: quantPrelude() + dequantWgsl,
    bindings: [
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: scales.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:wpr', 'u32:total', 'u32:row'],
    constants: { FMT: FMT_ID[q.spec.format], OUT_F16: +(dtype === 'f16') },
  }));
  const { wg, row } = grid1d(total, 256);
  ctx.dispatch(k, [q.data.buffer, scales.buffer, out.buffer], wg, [N, K, G, nb, wpr, total, row]);
  if (owned) ctx.release(scales.buffer);
  return out;
}

/** Release a quantized tensor's buffers. */
export function releaseQuant(ctx: Context, q: QuantTensor): void {
  for (const t of [q.data, q.scales, q.absmax2, q.offset]) if (t) ctx.release(t.buffer);
}

/** The format names for messages. */
export function describeQuant(q: { spec: QuantSpec; layout: { N: number; K: number } }): string {
  const s = q.spec;
  return `${s.format}${s.groupSize ? `/g${s.groupSize}` : '/row'}${s.doubleQuant ? '+dq' : ''} [${q.layout.N}, ${q.layout.K}]`;
}

export type { QuantFormat };
