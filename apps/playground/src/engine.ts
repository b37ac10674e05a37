// What the page runs on the GPU: the context, the built-in tiny Llama, a picked HF model, the training loop
// (AdamW with `rusty finetune`'s parameter groups, warm-up + cosine schedule, gradient clipping, accumulation),
// streaming generation and the logits the browser test compares with the fixtures. Everything goes through the
// packages' public exports.
import { ConfigError, createContext, DeviceError, download, fmtBytes, OutOfMemoryError, upload, type Context } from '@rusty/backend';
import { AdamW, clipGradNorm, LinearWarmup, noGrad, scale, Tensor, tidy, WarmupCosineScheduler, type LRScheduler } from '@rusty/autograd';
import { LlamaForCausalLM, loraModules, parseLlamaConfig, type LlamaConfig } from '@rusty/graph';
import { ByteTokenizer, type Tokenizer } from '@rusty/loader';
import { batchAt, type Windows } from './data';
import { TINY_PRESET, warmupOf } from './options';

export type Model = LlamaForCausalLM;

const BROWSERS =
  'WebGPU is in Chrome and Edge 113+ on Windows, macOS and ChromeOS, Chrome 121+ on Android, Safari 26+ and Firefox 141+ on Windows; on Linux start Chrome with --enable-unsafe-webgpu --enable-features=Vulkan';

/** The WebGPU context, or a DeviceError that says which browsers have WebGPU. */
export async function openGpu(): Promise<Context> {
  const gpu = typeof navigator === 'undefined' ? undefined : navigator.gpu;
  if (!gpu) throw new DeviceError(`this browser has no WebGPU (navigator.gpu is missing; the page must come from https or localhost). ${BROWSERS}.`);
  if (!(await gpu.requestAdapter()))
    throw new DeviceError(`this browser has WebGPU but offers no adapter (is hardware acceleration turned off, or the GPU blocklisted?). ${BROWSERS}.`);
  return createContext();
}

/** The built-in model: `rusty train`'s tiny size with the byte tokenizer (256 bytes + 3 specials). */
export function builtinModel(ctx: Context, seed = 0): { model: Model; config: LlamaConfig; tokenizer: Tokenizer } {
  const tokenizer = new ByteTokenizer();
  const p = TINY_PRESET;
  const config = parseLlamaConfig(
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      vocab_size: tokenizer.vocabSize,
      hidden_size: p.hiddenSize,
      intermediate_size: p.intermediateSize,
      num_hidden_layers: p.layers,
      num_attention_heads: p.heads,
      num_key_value_heads: p.kvHeads,
      max_position_embeddings: 256,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      hidden_act: 'silu',
      tie_word_embeddings: false,
      bos_token_id: tokenizer.bosTokenId ?? null,
      eos_token_id: tokenizer.eosTokenId ?? null,
    }),
    'built-in tiny Llama',
  );
  return { model: new LlamaForCausalLM(ctx, config, { seed }), config, tokenizer };
}

/** Parameters and bytes of a model, and the trainable share. */
export function modelSize(model: Model): { params: number; trainable: number; bytes: number } {
  let params = 0;
  let bytes = 0;
  for (const t of model.parameters()) {
    params += t.size;
    bytes += t.size * (t.dtype === 'f32' ? 4 : 2);
  }
  const trainable = model.trainableParameters().reduce((n, [, t]) => n + t.size, 0);
  return { params, trainable, bytes };
}

/**
 * Refuse a model that cannot fit this adapter before loading it: a weight, or the logits or MLP activations of a
 * batch, larger than `maxBufferSize` (what `rusty finetune` checks), or all weights together beyond it many times.
 */
export function checkFits(ctx: Context, c: LlamaConfig, batch: number, seqLen: number, what: string): void {
  const max = ctx.info.limits.maxBufferSize ?? Infinity;
  const buffers: [string, number][] = [
    ['the embedding', c.vocabSize * c.hiddenSize * 4],
    ['an MLP weight', c.intermediateSize * c.hiddenSize * 4],
    ['an attention weight', c.numAttentionHeads * c.headDim * c.hiddenSize * 4],
    [`the logits of a batch (${batch} x ${seqLen} x ${c.vocabSize})`, batch * seqLen * c.vocabSize * 4],
    [`the MLP activations of a batch (${batch} x ${seqLen} x ${c.intermediateSize})`, batch * seqLen * c.intermediateSize * 4],
  ];
  for (const [name, bytes] of buffers)
    if (bytes > max) throw new OutOfMemoryError(`${what}: ${name} needs a ${fmtBytes(bytes)} buffer, more than this adapter's maxBufferSize (${fmtBytes(max)})`);
}

/** Logits [B, T, vocab] of token ids [B][T] (the browser test compares them with the fixtures). */
export async function logitsOf(model: Model, ids: number[][]): Promise<Float32Array> {
  const b = ids.length;
  const t = ids[0]!.length;
  const out = noGrad(() => {
    const input = Tensor.fromArray(model.ctx, ids.flat(), [b, t], { dtype: 'i32' });
    const logits = model.forward(input);
    input.dispose();
    return logits;
  });
  try {
    return (await out.toArray()) as Float32Array;
  } finally {
    out.dispose();
  }
}

/** Sampling settings of the generate panes. */
export interface SampleOptions {
  maxNewTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
}

/**
 * Stream a continuation of `prompt`: `onText` gets the whole decoded continuation after each token. `base`: run
 * without the LoRA update (the model before fine-tuning; weights untouched). Returns the new ids.
 */
export async function generateText(
  model: Model,
  tokenizer: Tokenizer,
  prompt: string,
  o: SampleOptions,
  onText: (text: string) => void,
  base = false,
): Promise<number[]> {
  const ids = tokenizer.encode(prompt);
  if (!ids.length) ids.push(tokenizer.bosTokenId ?? 0);
  const mods = base ? [...loraModules(model).values()].filter((m) => !m.merged) : [];
  for (const m of mods) m.merged = true; // forward skips the LoRA branch of a "merged" module
  const out: number[] = [];
  try {
    for await (const id of model.generateStream(ids, o)) {
      out.push(id);
      onText(tokenizer.decode(out));
    }
  } finally {
    for (const m of mods) m.merged = false;
  }
  return out;
}

/** The optimisation settings a run uses (pretraining and fine-tuning alike). */
export interface LoopOptions {
  steps: number;
  batchSize: number;
  gradientAccumulation: number;
  lr: number;
  lrSchedule: 'cosine' | 'constant';
  warmup?: number;
  weightDecay: number;
  gradClip: number;
  seed: number;
}

/** One finished optimizer step. */
export interface StepInfo {
  step: number;
  loss: number;
  lr: number;
  tokens: number;
  /** Seconds of this step (its loss read back). */
  seconds: number;
}

/** An optimizer and schedule over the model's trainable parameters, as `rusty finetune` builds them. */
export class Optimisation {
  readonly optimizer: AdamW;
  readonly scheduler: LRScheduler;
  readonly params: Tensor[];

  constructor(
    readonly model: Model,
    readonly o: LoopOptions,
  ) {
    const named = model.trainableParameters();
    const decay = named.filter(([, p]) => p.shape.length >= 2).map(([, p]) => p);
    const noDecay = named.filter(([, p]) => p.shape.length < 2).map(([, p]) => p);
    const groups = [...(decay.length ? [{ params: decay, weightDecay: o.weightDecay }] : []), ...(noDecay.length ? [{ params: noDecay, weightDecay: 0 }] : [])];
    this.params = [...decay, ...noDecay];
    this.optimizer = new AdamW(model.ctx, groups, { lr: o.lr, weightDecay: o.weightDecay });
    const warmup = Math.min(warmupOf(o.warmup, o.steps), Math.max(0, o.steps - 1));
    this.scheduler =
      o.lrSchedule === 'constant'
        ? new LinearWarmup(this.optimizer, { warmupSteps: Math.max(1, warmup) })
        : new WarmupCosineScheduler(this.optimizer, { warmupSteps: warmup, totalSteps: Math.max(o.steps, warmup + 1), minLr: o.lr * 0.1 });
  }

  /** One optimizer step on the batches of step `step` (0-based); resolves when its loss is read back. */
  async step(data: Windows, step: number): Promise<StepInfo> {
    const t0 = performance.now();
    const ctx = this.model.ctx;
    const acc = this.o.gradientAccumulation;
    const lr = this.optimizer.paramGroups[0]?.lr ?? 0;
    this.model.train();
    this.optimizer.zeroGrad();
    const losses: Tensor[] = [];
    let tokens = 0;
    for (let m = 0; m < acc; m++) {
      const b = batchAt(data, this.o.batchSize, step * acc + m, this.o.seed);
      tokens += b.batch * data.seqLen;
      const ids = Tensor.fromArray(ctx, b.ids, [b.batch, data.seqLen], { dtype: 'i32' });
      try {
        losses.push(
          tidy(() => {
            const { loss } = this.model.loss(ids, b.labels);
            (acc > 1 ? scale(loss, 1 / acc) : loss).backward();
            return loss;
          }),
        );
      } finally {
        ids.dispose();
      }
    }
    const clip = clipGradNorm(this.params, this.o.gradClip > 0 ? this.o.gradClip : Infinity);
    this.optimizer.step({ gradScale: this.o.gradClip > 0 ? clip : undefined });
    this.scheduler.step();
    ctx.release(clip.buffer);
    this.optimizer.zeroGrad();
    let loss = 0;
    for (const l of losses) {
      loss += (await l.toArray())[0]! / acc;
      l.dispose();
    }
    return { step: step + 1, loss, lr, tokens, seconds: (performance.now() - t0) / 1000 };
  }

  dispose(): void {
    this.optimizer.dispose();
  }
}

/** The trainable parameters by name, read back (for checkpoints). */
export async function trainableState(model: Model): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of model.trainableParameters()) out.set(name, { shape: [...t.shape], data: (await download(model.ctx, t.data)) as Float32Array });
  return out;
}

/** Put saved trainable parameters back (names and shapes must match). */
export function restoreTrainable(model: Model, saved: Map<string, Float32Array>): void {
  for (const [name, t] of model.trainableParameters()) {
    const v = saved.get(name);
    if (!v || v.length !== t.size) throw new ConfigError(`checkpoint: parameter '${name}' is missing or has another size`);
    t.assign(upload(model.ctx, v, t.shape));
  }
}
