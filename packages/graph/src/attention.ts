import type { Context } from '@rusty/backend';
import { attention, isGradEnabled, reshape, rope, ropePair, Tensor, tidy, toCompute } from '@rusty/autograd';
import type { ModelConfig } from './config';
import { fusedProjections, fusionSettings } from './fused-projections';
import type { KVCache } from './kv-cache';
import { Linear, RMSNorm, type InitOptions } from './layers';
import { Module } from './module';

/** Anything with `forward(x)`: a Linear, or a LoRA-wrapped Linear. */
export interface Projection extends Module {
  forward(x: Tensor): Tensor;
  /** Whether backward reads the output's gradient only rounded to f16 (`Linear.gradInF16`); absent: no. */
  gradInF16?(): boolean;
}

/** Settings of one layer's attention that the kernels and the KV cache need. */
export interface AttentionKernelOptions {
  scale?: number;
  slidingWindow?: number;
  softcap?: number;
}

/** A layer's place in a KV cache. */
export interface CacheSlot {
  kv: KVCache;
  layer: number;
}

export function proj(m: Module, name: string): Projection {
  return m.child(name) as Projection;
}

/** `x` in the compute dtype (`toCompute`), and `x` itself disposed when a copy was made (the graph keeps what
 *  backward needs). */
export function compute(x: Tensor): Tensor {
  const c = toCompute(x);
  if (c !== x) x.dispose();
  return c;
}

/**
 * Grouped-query self-attention with rotary embeddings and the fused causal kernel, configured by the model
 * config: biases (`qkvBias`, `oBias`), per-head q/k RMSNorm before RoPE (`qkNorm`), the score scale, the
 * sliding window of `sliding_attention` layers and logit soft-capping. HF names: q_proj, k_proj, v_proj,
 * o_proj, q_norm, k_norm.
 */
export class Attention extends Module {
  readonly kernel: AttentionKernelOptions;
  readonly qNorm: RMSNorm | null = null;
  readonly kNorm: RMSNorm | null = null;

  constructor(
    ctx: Context,
    readonly config: ModelConfig,
    init: InitOptions,
    readonly layer: number,
  ) {
    super(ctx);
    const c = config;
    const { hiddenSize: h, numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = c;
    const s = (init.seed ?? 0) * 1000 + layer * 10;
    this.registerModule('q_proj', new Linear(ctx, h, nq * d, { ...init, bias: c.qkvBias, seed: s + 1 }));
    this.registerModule('k_proj', new Linear(ctx, h, nkv * d, { ...init, bias: c.qkvBias, seed: s + 2 }));
    this.registerModule('v_proj', new Linear(ctx, h, nkv * d, { ...init, bias: c.qkvBias, seed: s + 3 }));
    this.registerModule('o_proj', new Linear(ctx, nq * d, h, { ...init, bias: c.oBias, seed: s + 4 }));
    if (c.qkNorm) {
      this.qNorm = this.registerModule('q_norm', new RMSNorm(ctx, d, c.rmsNormEps, init, c.normWeightOffset));
      this.kNorm = this.registerModule('k_norm', new RMSNorm(ctx, d, c.rmsNormEps, init, c.normWeightOffset));
    }
    const sliding = c.layerTypes[layer] === 'sliding_attention' && c.slidingWindow !== null;
    this.kernel = {
      scale: c.attnScale ?? undefined,
      slidingWindow: sliding ? c.slidingWindow! : undefined,
      softcap: c.attnSoftcap ?? undefined,
    };
  }

  /** x [B, T, hidden] -> [B, T, hidden]; with a cache, x holds the positions after the cached ones. `limbs`: x as
   *  int8 limbs (a decoding step's norm writes them where `limbsWanted` says so) for q, k and v. */
  forward(x: Tensor, invFreq: Tensor, cache?: CacheSlot, limbs?: Tensor): Tensor {
    // tidy: temporaries the graph does not save go back to the pool as soon as the block returns
    return tidy(() => this.attend(x, invFreq, cache, limbs));
  }

  /** The projections of the input: q, k and v. */
  inputProjections(): Projection[] {
    return (['q_proj', 'k_proj', 'v_proj'] as const).map((n) => proj(this, n));
  }

  private attend(x: Tensor, invFreq: Tensor, cache?: CacheSlot, limbs?: Tensor): Tensor {
    const [b, t] = x.shape as [number, number, number];
    const { numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = this.config;
    const offset = cache ? cache.kv.length : 0;
    // under f16 autocast: one f16 copy of x for the three projections (what their backward keeps)
    const xc = toCompute(x);
    // decoding: q, k and v in one GEMV dispatch where they allow it
    const [qy, ky, vy] = fusedProjections(this.inputProjections(), xc, limbs) ?? [null, null, null];
    let q = reshape(qy ?? proj(this, 'q_proj').forward(xc), [b, t, nq, d]);
    let k = reshape(ky ?? proj(this, 'k_proj').forward(xc), [b, t, nkv, d]);
    if (this.qNorm) q = this.qNorm.forward(q);
    if (this.kNorm) k = this.kNorm.forward(k);
    const v = reshape(vy ?? proj(this, 'v_proj').forward(xc), [b, t, nkv, d]);
    // one dispatch for both where no gradient is recorded (decoding; see `fusionSettings`), which with a cache
    // (`kv`) also stores the rotated keys and the values in it
    const fuse = fusionSettings.projections && fusionSettings.rope;
    const store = cache && fuse && fusionSettings.kv && !isGradEnabled() ? cache.kv.storeTarget(cache.layer, b, t) : null;
    if (fuse) [q, k] = ropePair(q, k, invFreq, { positionOffset: offset, ...(store ? { store: { v: v.data, ...store } } : {}) });
    else [q, k] = [rope(q, invFreq, { positionOffset: offset }), rope(k, invFreq, { positionOffset: offset })];
    const o = cache ? cache.kv.attend(cache.layer, q, k, v, this.kernel, !!store) : attention(q, k, v, { causal: true, ...this.kernel });
    return proj(this, 'o_proj').forward(reshape(o, [b, t, nq * d]));
  }

  /** HF parameter names (relative to the module) and shapes for a config. */
  static parameterShapes(c: ModelConfig): [string, number[]][] {
    const { hiddenSize: h, numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = c;
    const out: [string, number[]][] = [];
    const lin = (name: string, o: number, i: number, bias: boolean) => {
      out.push([`${name}.weight`, [o, i]]);
      if (bias) out.push([`${name}.bias`, [o]]);
    };
    lin('q_proj', nq * d, h, c.qkvBias);
    lin('k_proj', nkv * d, h, c.qkvBias);
    lin('v_proj', nkv * d, h, c.qkvBias);
    lin('o_proj', h, nq * d, c.oBias);
    if (c.qkNorm) out.push(['q_norm.weight', [d]], ['k_norm.weight', [d]]);
    return out;
  }
}
