import decodeWgsl from '../../../../../shaders/attention-decode.wgsl';
import combineWgsl from '../../../../../shaders/attention-decode-combine.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { cachedKernel } from '../../kernel-cache';
import { empty, type DeviceTensor } from '../../tensor';
import {
  checkFits,
  checkFloat,
  checkMask,
  checkOut,
  dummyBuffer,
  fmt,
  MAX_HEAD_DIM,
  resolveScale,
  resolveSoftcap,
  resolveWindow,
  specialize,
  withMaskRule,
  type AttentionOptions,
} from './common';

/** Options of {@link attentionDecode}. */
export interface AttentionDecodeOptions {
  /** Score scale. Default `1 / sqrt(D)`. */
  scale?: number;
  /** Key padding mask, i32 or u32 `[B, Smax]` (1 = keep): e.g. left padding of a batch of prompts. */
  keyMask?: DeviceTensor;
  /** Output `f32 [B, 1, Hq, D]` to write into. */
  out?: DeviceTensor;
  /** Keys per split-K chunk (default: enough chunks to fill the GPU, at most 1024 keys each). */
  chunk?: number;
  /** Sliding window (see {@link AttentionOptions.slidingWindow}): the query at position `len - 1` sees keys
   *  `max(0, len - slidingWindow) .. len - 1` only, and only those are read. Undefined or null: all `len`. */
  slidingWindow?: number | null;
  /** Logit soft-capping (see {@link AttentionOptions.softcap}). */
  softcap?: number | null;
}

const NT = 128;
const CHMAX = 1024;

/** How many workgroups the split-K decode aims at (a few per multiprocessor of a large GPU). */
const TARGET_WORKGROUPS = 512;

/**
 * Attention of one new query per sequence against a KV cache (the decode step of generation).
 * `q` is `[B, 1, Hq, D]`; `kCache` and `vCache` are `[B, Smax, Hkv, D]` of which the first `len` positions
 * are valid (the query sits at position `len - 1` and sees keys `0 .. len - 1`, or the last `slidingWindow`
 * of them, minus those masked by `keyMask`). Split-K: the keys are cut into chunks handled by separate workgroups, merged by a second
 * dispatch in a fixed order (deterministic). Returns `f32 [B, 1, Hq, D]`; a row with no visible key is zeros.
 * Equals {@link flashAttention} with `T = 1`, `S = len`, `qOffset = len - 1` (and the same `slidingWindow`).
 * @throws ShapeError when shapes or dtypes do not fit or `len > Smax`.
 */
export function attentionDecode(
  ctx: Context,
  q: DeviceTensor,
  kCache: DeviceTensor,
  vCache: DeviceTensor,
  len: number,
  opts: AttentionDecodeOptions = {},
): DeviceTensor {
  if (q.shape.length !== 4 || q.shape[1] !== 1 || kCache.shape.length !== 4)
    throw new ShapeError(`attentionDecode: q must be [B, 1, Hq, D] and the caches [B, Smax, Hkv, D], got q ${fmt(q)}, k ${fmt(kCache)}`);
  checkFloat('q', q);
  checkFloat('kCache', kCache);
  checkFloat('vCache', vCache);
  const [B, , Hq, D] = q.shape as [number, number, number, number];
  const [Bk, Smax, Hkv, Dk] = kCache.shape as [number, number, number, number];
  if (kCache.shape.some((d, i) => d !== vCache.shape[i]))
    throw new ShapeError(`attentionDecode: kCache ${fmt(kCache)} and vCache ${fmt(vCache)} must have the same shape`);
  if (Bk !== B || Dk !== D)
    throw new ShapeError(`attentionDecode: q ${fmt(q)} and kCache ${fmt(kCache)} disagree in batch or head dim`);
  if (Hkv === 0 || Hq % Hkv !== 0)
    throw new ShapeError(`attentionDecode: kv heads of kCache ${fmt(kCache)} must divide the query heads of q ${fmt(q)}`);
  if (D < 1 || D > MAX_HEAD_DIM) throw new ShapeError(`attentionDecode: head dim ${D} of q ${fmt(q)} is outside 1..${MAX_HEAD_DIM}`);
  if (Hq > 65535 || B > 65535) throw new ShapeError(`attentionDecode: at most 65535 heads and batch rows, got q ${fmt(q)}`);
  if (!Number.isInteger(len) || len < 0 || len > Smax)
    throw new ShapeError(`attentionDecode: len ${len} must be an integer in 0..${Smax} (kCache ${fmt(kCache)})`);
  if (opts.keyMask) checkMask(opts.keyMask, B, Smax, kCache);
  for (const [w, t] of [['q', q], ['kCache', kCache], ['vCache', vCache]] as const) checkFits(ctx, w, t);
  checkOut('out', opts.out, [B, 1, Hq, D]);
  const scale = resolveScale(D, opts.scale);
  const w = resolveWindow('attentionDecode', opts.slidingWindow);
  const window = w < len ? w : 0; // a window of len or more hides nothing
  const cap = resolveSoftcap('attentionDecode', scale, opts.softcap);
  const out = opts.out ?? empty(ctx, [B, 1, Hq, D]);
  if (B * Hq === 0) return out;

  // Keys the query sees (the shader derives the same range from attn_key_range; here it sizes the chunks).
  const n = window ? Math.min(len, window) : len;
  let nChunks: number;
  if (opts.chunk !== undefined) {
    if (!Number.isInteger(opts.chunk) || opts.chunk < 1 || opts.chunk > CHMAX)
      throw new ConfigError(`attentionDecode: chunk must be an integer in 1..${CHMAX}, got ${opts.chunk}`);
    nChunks = Math.max(1, Math.ceil(n / opts.chunk));
  } else {
    nChunks = Math.min(Math.ceil(TARGET_WORKGROUPS / (B * Hq)), Math.ceil(n / 64));
    nChunks = Math.max(1, nChunks, Math.ceil(n / CHMAX));
  }
  const CH = Math.max(1, Math.ceil(n / nChunks));
  if (nChunks > 65535) throw new ShapeError(`attentionDecode: ${nChunks} chunks exceed the grid limit`);

  const DV = Math.ceil(D / 4);
  const mask = opts.keyMask;
  const maskDt = mask?.dtype ?? 'u32';
  const W = DV * 4 + 2;
  const part = nChunks > 1 ? ctx.alloc(B * Hq * nChunks * W * 4) : dummyBuffer(ctx, 1);
  const k = cachedKernel(ctx, `attn:decode:${D}:${q.dtype}:${kCache.dtype}:${vCache.dtype}:${maskDt}`, () => ({
    name: `attention_decode_d${D}`,
    code: specialize(withMaskRule(decodeWgsl), { D, DV, NT, CHMAX, NP: Math.floor(NT / DV) }),
    bindings: [
      { name: 'q', access: 'read', dtype: q.dtype },
      { name: 'k', access: 'read', dtype: kCache.dtype },
      { name: 'v', access: 'read', dtype: vCache.dtype },
      { name: 'mask', access: 'read', dtype: maskDt },
      { name: 'o', access: 'rw', dtype: 'f32' },
      { name: 'part', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:Smax', 'u32:len', 'u32:Hq', 'u32:Hkv', 'u32:G', 'u32:CH', 'u32:nChunks', 'u32:hasMask', 'u32:window', 'f32:scale2', 'f32:capmul'],
  }));
  ctx.dispatch(
    k,
    [q.buffer, kCache.buffer, vCache.buffer, mask?.buffer ?? dummyBuffer(ctx), out.buffer, part],
    [nChunks, Hq, B],
    [Smax, len, Hq, Hkv, Hq / Hkv, CH, nChunks, mask ? 1 : 0, window, cap.qscale, cap.capmul],
  );
  if (nChunks > 1) {
    const c = cachedKernel(ctx, 'attn:decode-combine', () => ({
      name: 'attention_decode_combine',
      code: combineWgsl,
      bindings: [
        { name: 'part', access: 'read', dtype: 'f32' },
        { name: 'o', access: 'rw', dtype: 'f32' },
      ],
      params: ['u32:nChunks', 'u32:W', 'u32:D', 'u32:Hq'],
    }));
    ctx.dispatch(c, [part, out.buffer], [Hq, B], [nChunks, W, D, Hq]);
    ctx.release(part);
  }
  return out;
}
