import {
  bf16BitsToF32,
  ConfigError,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  ropeInvFreq,
  ShapeError,
  type Context,
  type DType,
} from '@rusty/backend';
import { autocast, checkpoint, computeDtype, crossEntropy, linear, linearCrossEntropy, reshape, scale, tanh, Tensor, tidy, type ComputeDtype } from '@rusty/autograd';
import { checkpointSegments } from './checkpoint-segments';
import type { DecoderLayer } from './architecture';
import type { ModelConfig, RopeConfig } from './config';
import type { KVCache } from './kv-cache';
import { generate, generateStream, type GenerateOptions } from './generate';
import { Embedding, Linear, RMSNorm, type InitOptions } from './layers';
import { Module } from './module';
import { architectureOf } from './registry';

export interface ModelOptions {
  /** Storage dtype of the weights (default f32). */
  dtype?: DType;
  /** Seed of the random init (models trained from scratch). */
  seed?: number;
  /** Std of the normal init (default 0.02, HF's `initializer_range`). */
  initStd?: number;
  /** Allocate the weights without initialising them (they are about to be loaded); `'placeholder'`: 4-byte
   *  stand-ins that the loader replaces (see `InitOptions.empty`). */
  empty?: boolean | 'placeholder';
  /**
   * Precision of the rotary inverse frequencies: f32 (default) as `from_pretrained` computes them whatever the
   * checkpoint's dtype; f16/bf16 round them as `model.to(float16)` on a built HF model does.
   */
  ropeDtype?: 'f32' | 'f16' | 'bf16';
  /** Recompute the decoder layers in backward instead of keeping their activations (see
   *  {@link CausalLM.checkpointEvery}). */
  gradientCheckpointing?: boolean;
  /** Decoder layers per checkpointed segment (see {@link CausalLM.checkpointEvery}); default null: chosen from
   *  the config. */
  checkpointEvery?: number | null;
  /** Precision of the projections and attention (see {@link CausalLM.computeDtype}). Default null: the
   *  enclosing `autocast` scope's. */
  computeDtype?: ComputeDtype | null;
}

/** Options of {@link CausalLM.loss}. */
export interface LossOptions {
  /** Targets equal to this are not counted (default -100). */
  ignoreIndex?: number;
  /** The input ids on the host as well (row-major [B, T]): the embedding lookup gathers rows there while its table
   *  waits on the host ({@link CausalLM.offloadEmbedding}). */
  hostIds?: ArrayLike<number>;
}

/** Output of `forwardWithHidden`. */
export interface CausalLMOutput {
  logits: Tensor;
  /** Embedding output, each layer's output, and the final normed state (like HF `hidden_states`, with the
   *  last entry after the final norm). */
  hiddenStates?: Tensor[];
}

function invFreqTensor(ctx: Context, c: ModelConfig, rope: RopeConfig, dtype: ModelOptions['ropeDtype']): Tensor {
  const inv = ropeInvFreq({ ...rope, headDim: c.headDim, maxPositionEmbeddings: c.maxPositionEmbeddings });
  if (dtype === 'f16') inv.forEach((x, i) => (inv[i] = f16BitsToF32(f32ToF16Bits(x))));
  if (dtype === 'bf16') inv.forEach((x, i) => (inv[i] = bf16BitsToF32(f32ToBf16Bits(x))));
  return Tensor.fromArray(ctx, inv, [inv.length]).keep();
}

/**
 * A decoder-only causal language model with HF parameter names, for every architecture in the registry: the
 * shared parts (token embedding, decoder layers from the architecture, final norm, LM head or tied
 * embeddings, rotary tables per layer type) built from the config.
 */
export class CausalLM extends Module {
  readonly layers: DecoderLayer[] = [];
  readonly embedTokens: Embedding;
  readonly norm: RMSNorm;
  lmHead: Linear | null;
  gradientCheckpointing: boolean;
  /**
   * Under gradient checkpointing the decoder layers run in segments: the forward keeps each segment's input (f32
   * [tokens, hidden]) and nothing else, backward recomputes a segment and backpropagates through it. Every layer is
   * recomputed once whatever the lengths, so they change memory only, never the values: fewer checkpoints against
   * more layers' saved activations during a segment's backward. A number: segments of that many layers. null
   * (default): the schedule `checkpointSegments` picks for the config and compute dtype (the 1.1B shape under f16:
   * 7 segments of 2 layers, then 8 of 1; 15 checkpoints of 16 MiB at 4 x 512 tokens instead of 22).
   */
  checkpointEvery: number | null;
  /**
   * Precision of every projection (the decoder's Linear and LoRA layers, the LM head or tied embedding head)
   * and of attention, as PyTorch's autocast: `'f16'` rounds their inputs to f16 and accumulates in f32 (tensor
   * cores where the adapter has subgroup matrices), keeping the f16 copies for backward; norms, softmax, rotary
   * tables, residual adds, the loss and reductions stay f32, as do the outputs and all gradients. `'f32'`: all
   * f32. `null` (default): whatever the enclosing `autocast` scope says (`'f32'` outside one; the Trainer's
   * `mixedPrecision` opens one). Set it with {@link setComputeDtype}.
   */
  computeDtype: ComputeDtype | null;
  private invFreq: Tensor;
  private localInvFreq: Tensor | null;

  constructor(
    ctx: Context,
    readonly config: ModelConfig,
    opts: ModelOptions = {},
  ) {
    super(ctx);
    const arch = architectureOf(config);
    const init: InitOptions = { dtype: opts.dtype, std: opts.initStd ?? 0.02, seed: opts.seed ?? 0, empty: opts.empty };
    const model = this.registerModule('model', new Module(ctx));
    this.embedTokens = model.registerModule(
      'embed_tokens',
      // HF builds nn.Embedding(vocab, hidden, padding_idx=pad_token_id): the pad row gets no lookup gradient
      new Embedding(ctx, config.vocabSize, config.hiddenSize, { ...init, seed: (init.seed ?? 0) * 1000 + 999 }, padRow(config)),
    );
    const layers = model.registerModule('layers', new Module(ctx));
    for (let i = 0; i < config.numHiddenLayers; i++) this.layers.push(layers.registerModule(String(i), arch.createLayer(ctx, config, init, i)));
    this.norm = model.registerModule('norm', new RMSNorm(ctx, config.hiddenSize, config.rmsNormEps, init, config.normWeightOffset));
    this.lmHead = config.tieWordEmbeddings
      ? null
      : this.registerModule('lm_head', new Linear(ctx, config.hiddenSize, config.vocabSize, { ...init, seed: (init.seed ?? 0) * 1000 + 998 }));
    this.gradientCheckpointing = opts.gradientCheckpointing ?? false;
    this.checkpointEvery = opts.checkpointEvery ?? null;
    const k = this.checkpointEvery;
    if (k !== null && !(Number.isInteger(k) && k >= 1)) throw new ConfigError(`checkpointEvery must be a positive integer or null, got ${k}`);
    this.computeDtype = opts.computeDtype ?? null;
    this.invFreq = invFreqTensor(ctx, config, config.rope, opts.ropeDtype);
    const local = config.localRope && config.layerTypes.includes('sliding_attention');
    this.localInvFreq = local ? invFreqTensor(ctx, config, config.localRope!, opts.ropeDtype) : null;
  }

  /** Logits [B, T, vocab] for token ids [B, T] (i32). */
  forward(inputIds: Tensor, cache?: KVCache): Tensor {
    return this.forwardWithHidden(inputIds, { cache }).logits;
  }

  /** Set {@link computeDtype} (`null`: follow the enclosing `autocast` scope). */
  setComputeDtype(dtype: ComputeDtype | null): this {
    this.computeDtype = dtype;
    return this;
  }

  forwardWithHidden(inputIds: Tensor, opts: { cache?: KVCache; outputHiddenStates?: boolean } = {}): CausalLMOutput {
    return autocast(this.computeDtype, () => this.run(inputIds, opts));
  }

  private run(inputIds: Tensor, opts: { cache?: KVCache; outputHiddenStates?: boolean; noHead?: boolean; hostIds?: ArrayLike<number> }): CausalLMOutput {
    return tidy(() => {
      const c = this.config;
      const hidden: Tensor[] = [];
      let h = this.embedTokens.forward(inputIds, opts.hostIds);
      if (c.embedScale !== 1) {
        const e = h;
        h = scale(e, c.embedScale);
        e.dispose();
      }
      const invOf = (i: number) => (this.localInvFreq && c.layerTypes[i] === 'sliding_attention' ? this.localInvFreq : this.invFreq);
      const n = this.layers.length;
      // under checkpointing, segments of layers (one layer each when every state is asked for)
      const ckpt = this.gradientCheckpointing && this.training && !opts.cache;
      const k = this.checkpointEvery;
      const lengths =
        !ckpt || opts.outputHiddenStates
          ? Array<number>(n).fill(1)
          : k !== null
            ? Array.from({ length: Math.ceil(n / k) }, (_, s) => Math.min(k, n - s * k))
            : checkpointSegments(c, computeDtype());
      let i = 0;
      for (const len of lengths) {
        if (opts.outputHiddenStates) hidden.push(h);
        const [i0, j] = [i, i + len];
        const slot = opts.cache ? { kv: opts.cache, layer: i0 } : undefined;
        const next = ckpt ? checkpoint((x) => this.runLayers(x, i0, j, invOf), h) : this.layers[i0]!.forward(h, invOf(i0), slot);
        // the graph keeps what backward needs; drop our reference to the previous state early
        if (!opts.outputHiddenStates) h.dispose();
        h = next;
        i = j;
      }
      const last = h;
      h = this.norm.forward(h);
      last.dispose();
      if (opts.outputHiddenStates) hidden.push(h);
      if (opts.cache) opts.cache.advance(inputIds.shape[1]!);
      if (opts.noHead) return { logits: h }; // the final normed state, for the fused head + loss
      let logits = this.lmHead ? this.lmHead.forward(h) : linear(h, this.embedTokens.weight, null);
      if (c.finalSoftcap !== null) logits = scale(tanh(scale(logits, 1 / c.finalSoftcap)), c.finalSoftcap);
      if (!opts.outputHiddenStates) h.dispose();
      return { logits, hiddenStates: opts.outputHiddenStates ? hidden : undefined };
    });
  }

  /** Layers i..j-1 on x (a checkpointed segment), dropping each intermediate state once the next layer has run. */
  private runLayers(x: Tensor, i: number, j: number, invOf: (l: number) => Tensor): Tensor {
    let y = x;
    for (let l = i; l < j; l++) {
      const z = this.layers[l]!.forward(y, invOf(l));
      if (y !== x) y.dispose();
      y = z;
    }
    return y;
  }

  /**
   * HF's causal-LM loss: position t predicts labels[t + 1] (labels default to the inputs), mean over targets
   * that are not `ignoreIndex` (-100). With `logits: false` the logits are not returned, and a plain LM head (or
   * tied embeddings) without soft-capping is fused with the loss: the [tokens, vocab] logits are computed and
   * dropped in row chunks (`linearCrossEntropy`) instead of being materialised with their gradient. `hostIds`:
   * the input ids on the host too (for an embedding table waiting on the host: {@link offloadEmbedding}).
   */
  loss(inputIds: Tensor, labels: ArrayLike<number>, opts?: LossOptions & { logits?: true }): { loss: Tensor; logits: Tensor };
  loss(inputIds: Tensor, labels: ArrayLike<number>, opts: LossOptions & { logits: false }): { loss: Tensor };
  loss(inputIds: Tensor, labels: ArrayLike<number>, opts: LossOptions & { logits?: boolean } = {}): { loss: Tensor; logits?: Tensor } {
    const [b, t] = inputIds.shape as [number, number];
    const ignore = opts.ignoreIndex ?? -100;
    const targets = Tensor.fromArray(this.ctx, shiftLabels(labels, b, t, ignore), [b * t], { dtype: 'i32' });
    try {
      const head = this.child('lm_head') ?? null;
      const fusable = this.config.finalSoftcap === null && (head === null || (head.constructor === Linear && !(head as Linear).bias));
      if (opts.logits === false && fusable) {
        const w = head ? (head as Linear).weight : this.embedTokens.weight;
        const loss = autocast(this.computeDtype, () =>
          tidy(() =>
            linearCrossEntropy(reshape(this.run(inputIds, { noHead: true, hostIds: opts.hostIds }).logits, [b * t, this.config.hiddenSize]), w, targets, { ignoreIndex: ignore }),
          ),
        );
        return { loss };
      }
      const logits = autocast(this.computeDtype, () => this.run(inputIds, { hostIds: opts.hostIds })).logits;
      const loss = crossEntropy(reshape(logits, [b * t, this.config.vocabSize]), targets, { ignoreIndex: ignore });
      if (opts.logits === false) {
        logits.dispose();
        return { loss };
      }
      return { loss, logits };
    } finally {
      targets.dispose();
    }
  }

  /**
   * The parameters every reader rounds to f16 when the model computes in f16 (the model's {@link computeDtype},
   * else `scope`, the compute dtype of the autocast scope it will run under): parameters read only as operands of
   * f16 matrix products. That is the LM head's weight when the head is a plain Linear (not tied to the embedding,
   * whose lookup reads it as stored; not wrapped by LoRA); none under f32 compute. Stored in f16 for an f16 run,
   * such a parameter gives its readers the values they read before, bit for bit (the Trainer does this for the
   * duration of a LoRA run: the fused loss then makes no f16 copy of a bf16 head per step).
   */
  f16OperandParameters(scope: ComputeDtype | null): [string, Tensor][] {
    if ((this.computeDtype ?? scope) !== 'f16') return [];
    const head = this.child('lm_head');
    return head && head.constructor === Linear ? [['lm_head.weight', (head as Linear).weight]] : [];
  }

  /** Every matrix a product reads as its B operand: the 2-D `weight` of each module but the token embedding
   *  (Linear, a LoRA layer's base, the LM head), and the embedding's when the head is tied to it. For the Trainer's
   *  f16 images of frozen f32 weights (`prepareF16Images`). */
  linearWeights(): Tensor[] {
    const out = new Set<Tensor>();
    for (const [, m] of this.namedModules()) {
      if (m instanceof Embedding) continue;
      for (const [n, p] of m.namedParameters()) if (n === 'weight' && p.rank === 2) out.add(p);
    }
    if (!this.lmHead) out.add(this.embedTokens.weight);
    return [...out];
  }

  /**
   * For a training run that does not train the token embedding: keep its table in host memory (125 MiB at the 1.1B
   * shape in bf16) until the returned function puts it back, bit for bit (`Embedding.offloadToHost`); a lookup
   * given the ids on the host (`loss(..., { hostIds })`, as the Trainer calls it) uploads only its rows. null when
   * the table trains or is tied to the LM head (the head reads all of it).
   */
  async offloadEmbedding(): Promise<(() => void) | null> {
    if (!this.lmHead || this.embedTokens.weight.requiresGrad) return null;
    return this.embedTokens.offloadToHost();
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
    this.localInvFreq?.dispose();
  }
}

function padRow(c: ModelConfig): number | null {
  const p = c.padTokenId;
  return p !== null && p >= 0 && p < c.vocabSize ? p : null;
}

/** The Llama-era name of {@link CausalLM}: it builds every supported architecture. */
export const LlamaForCausalLM = CausalLM;
export type LlamaForCausalLM = CausalLM;

/** Targets for HF's label shift: row b, position t gets labels[b, t + 1]; the last position is ignored. */
export function shiftLabels(labels: ArrayLike<number>, b: number, t: number, ignoreIndex = -100): Int32Array {
  if (labels.length !== b * t) throw new ShapeError(`labels: ${labels.length} values for inputs [${b}, ${t}]`);
  const out = new Int32Array(b * t).fill(ignoreIndex);
  for (let i = 0; i < b; i++) for (let j = 0; j + 1 < t; j++) out[i * t + j] = labels[i * t + j + 1]!;
  return out;
}
