import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  ropeInvFreq,
  ShapeError,
  type Context,
  type DType,
} from '@rusty/backend';
import { add, attention, checkpoint, crossEntropy, linear, reshape, rope, swiglu, Tensor, tidy } from '@rusty/autograd';
import type { LlamaConfig } from './config';
import type { KVCache } from './kv-cache';
import { generate, generateStream, type GenerateOptions } from './generate';
import { Embedding, Linear, RMSNorm, type InitOptions } from './layers';
import { Module } from './module';

/** Anything with `forward(x)`: a Linear, or a LoRA-wrapped Linear. */
export interface Projection extends Module {
  forward(x: Tensor): Tensor;
}

export interface ModelOptions {
  /** Storage dtype of the weights (default f32). */
  dtype?: DType;
  /** Seed of the random init (models trained from scratch). */
  seed?: number;
  /** Std of the normal init (default 0.02, HF's `initializer_range`). */
  initStd?: number;
  /** Allocate the weights without initialising them (they are about to be loaded). */
  empty?: boolean;
  /**
   * Precision of the rotary inverse frequencies: f32 (default) as `from_pretrained` computes them whatever the
   * checkpoint's dtype; f16/bf16 round them as `model.to(float16)` on a built HF model does.
   */
  ropeDtype?: 'f32' | 'f16' | 'bf16';
  /** Recompute each decoder layer in backward instead of keeping its activations. */
  gradientCheckpointing?: boolean;
}

function proj(m: Module, name: string): Projection {
  return m.child(name) as Projection;
}

/** Grouped-query self-attention with rotary embeddings and the fused causal kernel. */
export class LlamaAttention extends Module {
  constructor(
    ctx: Context,
    readonly config: LlamaConfig,
    init: InitOptions,
    layer: number,
  ) {
    super(ctx);
    const { hiddenSize: h, numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d, attentionBias: bias } = config;
    const s = (init.seed ?? 0) * 1000 + layer * 10;
    this.registerModule('q_proj', new Linear(ctx, h, nq * d, { ...init, bias, seed: s + 1 }));
    this.registerModule('k_proj', new Linear(ctx, h, nkv * d, { ...init, bias, seed: s + 2 }));
    this.registerModule('v_proj', new Linear(ctx, h, nkv * d, { ...init, bias, seed: s + 3 }));
    this.registerModule('o_proj', new Linear(ctx, nq * d, h, { ...init, bias, seed: s + 4 }));
  }

  forward(x: Tensor, invFreq: Tensor, cache?: { kv: KVCache; layer: number }): Tensor {
    // tidy: temporaries the graph does not save go back to the pool as soon as the block returns
    return tidy(() => this.attend(x, invFreq, cache));
  }

  private attend(x: Tensor, invFreq: Tensor, cache?: { kv: KVCache; layer: number }): Tensor {
    const [b, t] = x.shape as [number, number, number];
    const { numAttentionHeads: nq, numKeyValueHeads: nkv, headDim: d } = this.config;
    const offset = cache ? cache.kv.length : 0;
    const q = rope(reshape(proj(this, 'q_proj').forward(x), [b, t, nq, d]), invFreq, { positionOffset: offset });
    const k = rope(reshape(proj(this, 'k_proj').forward(x), [b, t, nkv, d]), invFreq, { positionOffset: offset });
    const v = reshape(proj(this, 'v_proj').forward(x), [b, t, nkv, d]);
    const o = cache ? cache.kv.attend(cache.layer, q, k, v) : attention(q, k, v, { causal: true });
    return proj(this, 'o_proj').forward(reshape(o, [b, t, nq * d]));
  }
}

/** SwiGLU MLP: down(silu(gate(x)) * up(x)). */
export class LlamaMLP extends Module {
  constructor(ctx: Context, config: LlamaConfig, init: InitOptions, layer: number) {
    super(ctx);
    const { hiddenSize: h, intermediateSize: i, mlpBias: bias } = config;
    const s = (init.seed ?? 0) * 1000 + layer * 10;
    this.registerModule('gate_proj', new Linear(ctx, h, i, { ...init, bias, seed: s + 5 }));
    this.registerModule('up_proj', new Linear(ctx, h, i, { ...init, bias, seed: s + 6 }));
    this.registerModule('down_proj', new Linear(ctx, i, h, { ...init, bias, seed: s + 7 }));
  }

  forward(x: Tensor): Tensor {
    return tidy(() =>
      proj(this, 'down_proj').forward(swiglu(proj(this, 'gate_proj').forward(x), proj(this, 'up_proj').forward(x))),
    );
  }
}

/** Pre-norm decoder layer: h + attn(norm(h)), then + mlp(norm(.)); the second add is fused into the norm. */
export class LlamaDecoderLayer extends Module {
  readonly selfAttn: LlamaAttention;
  readonly mlp: LlamaMLP;
  readonly inputLayernorm: RMSNorm;
  readonly postAttentionLayernorm: RMSNorm;
  constructor(ctx: Context, config: LlamaConfig, init: InitOptions, layer: number) {
    super(ctx);
    this.selfAttn = this.registerModule('self_attn', new LlamaAttention(ctx, config, init, layer));
    this.mlp = this.registerModule('mlp', new LlamaMLP(ctx, config, init, layer));
    this.inputLayernorm = this.registerModule('input_layernorm', new RMSNorm(ctx, config.hiddenSize, config.rmsNormEps, init));
    this.postAttentionLayernorm = this.registerModule(
      'post_attention_layernorm',
      new RMSNorm(ctx, config.hiddenSize, config.rmsNormEps, init),
    );
  }

  forward(h: Tensor, invFreq: Tensor, cache?: { kv: KVCache; layer: number }): Tensor {
    return tidy(() => {
      const a = this.selfAttn.forward(this.inputLayernorm.forward(h), invFreq, cache);
      const [h1, x] = this.postAttentionLayernorm.forwardResidual(a, h);
      return add(h1, this.mlp.forward(x));
    });
  }
}

/** Output of `forwardWithHidden`. */
export interface CausalLMOutput {
  logits: Tensor;
  /** Embedding output, each layer's output, and the final normed state (like HF `hidden_states`, with the
   *  last entry after the final norm). */
  hiddenStates?: Tensor[];
}

/** A Llama (or Mistral) causal language model with HF parameter names. */
export class LlamaForCausalLM extends Module {
  readonly layers: LlamaDecoderLayer[] = [];
  readonly embedTokens: Embedding;
  readonly norm: RMSNorm;
  lmHead: Linear | null;
  gradientCheckpointing: boolean;
  private invFreq: Tensor;

  constructor(
    ctx: Context,
    readonly config: LlamaConfig,
    opts: ModelOptions = {},
  ) {
    super(ctx);
    const init: InitOptions = { dtype: opts.dtype, std: opts.initStd ?? 0.02, seed: opts.seed ?? 0, empty: opts.empty };
    const model = this.registerModule('model', new Module(ctx));
    this.embedTokens = model.registerModule('embed_tokens', new Embedding(ctx, config.vocabSize, config.hiddenSize, { ...init, seed: (init.seed ?? 0) * 1000 + 999 }));
    const layers = model.registerModule('layers', new Module(ctx));
    for (let i = 0; i < config.numHiddenLayers; i++)
      this.layers.push(layers.registerModule(String(i), new LlamaDecoderLayer(ctx, config, init, i)));
    this.norm = model.registerModule('norm', new RMSNorm(ctx, config.hiddenSize, config.rmsNormEps, init));
    this.lmHead = config.tieWordEmbeddings
      ? null
      : this.registerModule('lm_head', new Linear(ctx, config.hiddenSize, config.vocabSize, { ...init, seed: (init.seed ?? 0) * 1000 + 998 }));
    this.gradientCheckpointing = opts.gradientCheckpointing ?? false;
    const inv = ropeInvFreq({ ...config.rope, headDim: config.headDim, maxPositionEmbeddings: config.maxPositionEmbeddings });
    if (opts.ropeDtype === 'f16') inv.forEach((x, i) => (inv[i] = f16BitsToF32(f32ToF16Bits(x))));
    if (opts.ropeDtype === 'bf16') inv.forEach((x, i) => (inv[i] = bf16BitsToF32(f32ToBf16Bits(x))));
    this.invFreq = Tensor.fromArray(ctx, inv, [inv.length]).keep();
  }

  /** Logits [B, T, vocab] for token ids [B, T] (i32). */
  forward(inputIds: Tensor, cache?: KVCache): Tensor {
    return this.forwardWithHidden(inputIds, { cache }).logits;
  }

  forwardWithHidden(inputIds: Tensor, opts: { cache?: KVCache; outputHiddenStates?: boolean } = {}): CausalLMOutput {
    return tidy(() => {
      const hidden: Tensor[] = [];
      let h = this.embedTokens.forward(inputIds);
      this.layers.forEach((layer, i) => {
        if (opts.outputHiddenStates) hidden.push(h);
        const c = opts.cache ? { kv: opts.cache, layer: i } : undefined;
        const next =
          this.gradientCheckpointing && this.training && !c
            ? checkpoint((x) => layer.forward(x, this.invFreq), h)
            : layer.forward(h, this.invFreq, c);
        // the graph keeps what backward needs; drop our reference to the previous state early
        if (!opts.outputHiddenStates) h.dispose();
        h = next;
      });
      const last = h;
      h = this.norm.forward(h);
      last.dispose();
      if (opts.outputHiddenStates) hidden.push(h);
      if (opts.cache) opts.cache.advance(inputIds.shape[1]!);
      const logits = this.lmHead ? this.lmHead.forward(h) : linearTied(h, this.embedTokens.weight);
      if (!opts.outputHiddenStates) h.dispose();
      return { logits, hiddenStates: opts.outputHiddenStates ? hidden : undefined };
    });
  }

  /**
   * HF's causal-LM loss: position t predicts labels[t + 1] (labels default to the inputs), mean over targets
   * that are not `ignoreIndex` (-100).
   */
  loss(inputIds: Tensor, labels: ArrayLike<number>, opts: { ignoreIndex?: number } = {}): { loss: Tensor; logits: Tensor } {
    const [b, t] = inputIds.shape as [number, number];
    const ignore = opts.ignoreIndex ?? -100;
    const logits = this.forward(inputIds);
    const targets = Tensor.fromArray(this.ctx, shiftLabels(labels, b, t, ignore), [b * t], { dtype: 'i32' });
    const loss = crossEntropy(reshape(logits, [b * t, this.config.vocabSize]), targets, { ignoreIndex: ignore });
    targets.dispose();
    return { loss, logits };
  }

  /** Generate ids after `prompt` with a KV cache (see `GenerateOptions`). */
  generate(prompt: readonly number[], opts: GenerateOptions = {}): Promise<number[]> {
    return generate(this, prompt, opts);
  }

  /** The same, yielding each token as it is produced. */
  generateStream(prompt: readonly number[], opts: GenerateOptions = {}): AsyncGenerator<number> {
    return generateStream(this, prompt, opts);
  }

  override dispose(): void {
    super.dispose();
    this.invFreq.dispose();
  }
}

function linearTied(h: Tensor, embed: Tensor): Tensor {
  return linear(h, embed, null);
}

/** Targets for HF's label shift: row b, position t gets labels[b, t + 1]; the last position is ignored. */
export function shiftLabels(labels: ArrayLike<number>, b: number, t: number, ignoreIndex = -100): Int32Array {
  if (labels.length !== b * t) throw new ShapeError(`labels: ${labels.length} values for inputs [${b}, ${t}]`);
  const out = new Int32Array(b * t).fill(ignoreIndex);
  for (let i = 0; i < b; i++) for (let j = 0; j + 1 < t; j++) out[i * t + j] = labels[i * t + j + 1]!;
  return out;
}
