import { cast, flashAttention, flashAttentionBackward, type Context, type DeviceTensor } from '@rusty/backend';
import { defineOp } from '../op';
import { releaseRef } from '../storage';
import type { Tensor } from '../tensor';
import { computeDtype } from './autocast';

export interface AttentionOpts {
  /** Causal mask (default true). */
  causal?: boolean;
  /** Score scale (default 1/sqrt(head_dim)). */
  scale?: number;
  /** Absolute position of query 0 when keys include a prefix (key s visible iff s <= qOffset + t). */
  qOffset?: number;
  /** Key padding mask, i32/u32 [B, S], 1 = keep. */
  keyMask?: DeviceTensor;
  /** Sliding window (causal only): the query at position p = qOffset + t sees keys s with
   *  p - slidingWindow < s <= p (HF `sliding_window`). Undefined or null: full causal attention. */
  slidingWindow?: number | null;
  /** Logit soft-capping (Gemma 2 `attn_logit_softcapping`): scores become softcap * tanh(score / softcap)
   *  before masking and softmax. Undefined or null: none. */
  softcap?: number | null;
}

/** `t` in f16: itself when it is f16 already, else a new cast (the caller releases what is not an input). */
const half = (ctx: Context, t: DeviceTensor): DeviceTensor => (t.dtype === 'f16' ? t : cast(ctx, t, 'f16'));

const attentionOp = defineOp<AttentionOpts & { f16: boolean }>({
  name: 'attention',
  forward: (ctx, [q, k, v], o) => {
    if (!o.f16) {
      const { out, lse } = flashAttention(ctx, q!, k!, v!, o);
      return { outputs: out, saved: [q!, k!, v!, out, lse] };
    }
    // mixed precision: f16 inputs (the f16 copies are what backward keeps), f32 softmax statistics and
    // accumulation inside the kernel, the output rounded to f16 (what the next projection reads anyway)
    const [qh, kh, vh] = [q!, k!, v!].map((t) => half(ctx, t)) as [DeviceTensor, DeviceTensor, DeviceTensor];
    const { out, lse } = flashAttention(ctx, qh, kh, vh, o);
    const oh = cast(ctx, out, 'f16');
    ctx.release(out.buffer);
    return { outputs: oh, saved: [qh, kh, vh, oh, lse] };
  },
  backward: (ctx, [g], [q, k, v, out, lse], inputs, o) => {
    const { dq, dk, dv } = flashAttentionBackward(ctx, g!, q!, k!, v!, out!, lse!, o);
    const grads = [dq, dk, dv];
    return grads.map((d, i) => {
      if (inputs[i]!.requiresGrad) return d;
      releaseRef(ctx, d.buffer);
      return null;
    });
  },
});

/**
 * Fused scaled-dot-product attention (flash style: the [T, S] scores never reach memory) with grouped-query
 * heads: q [B, T, Hq, D], k and v [B, S, Hkv, D] -> [B, T, Hq, D] (f32; f16 under an f16 {@link autocast}
 * scope, where q, k and v are rounded to f16 and kept in f16 for backward, softmax statistics f32). Backward
 * is deterministic; the gradients of q, k, v are f32.
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOpts = {}): Tensor {
  return attentionOp([q, k, v], {
    causal: opts.causal ?? true,
    scale: opts.scale,
    qOffset: opts.qOffset,
    keyMask: opts.keyMask,
    slidingWindow: opts.slidingWindow,
    softcap: opts.softcap,
    f16: computeDtype() === 'f16',
  });
}
