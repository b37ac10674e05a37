import { flashAttention, flashAttentionBackward, type DeviceTensor } from '@rusty/backend';
import { defineOp } from '../op';
import { releaseRef } from '../storage';
import type { Tensor } from '../tensor';

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

const attentionOp = defineOp<AttentionOpts>({
  name: 'attention',
  forward: (ctx, [q, k, v], o) => {
    const { out, lse } = flashAttention(ctx, q!, k!, v!, o);
    return { outputs: out, saved: [q!, k!, v!, out, lse] };
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
 * heads: q [B, T, Hq, D], k and v [B, S, Hkv, D] -> [B, T, Hq, D]. Backward is deterministic.
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOpts = {}): Tensor {
  return attentionOp([q, k, v], {
    causal: opts.causal ?? true,
    scale: opts.scale,
    qOffset: opts.qOffset,
    keyMask: opts.keyMask,
    slidingWindow: opts.slidingWindow,
    softcap: opts.softcap,
  });
}
