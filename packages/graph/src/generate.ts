import { argmax, ConfigError, copyRows, download, empty, mulberry32, ShapeError } from '@rusty/backend';
import { noGrad, Tensor } from '@rusty/autograd';
import { KVCache } from './kv-cache';
import type { CausalLM } from './causal-lm';

export interface GenerateOptions {
  /** Tokens to generate at most (default 32). */
  maxNewTokens?: number;
  /** 0 (default) is greedy decoding; otherwise logits are divided by it before sampling. */
  temperature?: number;
  /** Sample only among the k most likely tokens (0: all). */
  topK?: number;
  /** Nucleus sampling: the smallest set of tokens whose probability reaches topP (1: all). */
  topP?: number;
  /** Seed of the sampler. */
  seed?: number;
  /** Stop after generating one of these ids (default: the config's eos ids). */
  stopTokens?: number[];
  /** Submit a step's GPU work every this many dispatches (default {@link GENERATE_SUBMIT_EVERY}), so that the GPU
   *  runs the first layers while the host still encodes the rest (`Context.capDispatchesPerSubmit`, released after). */
  submitEvery?: number;
  /** Greedy decoding (temperature 0): the steps the host may encode ahead of the last token it has read back
   *  (default {@link GENERATE_LOOKAHEAD}). Each step's token is picked on the GPU (`argmax`) and fed to the next
   *  step's embedding there, so the host encodes step t + 1 while the GPU runs step t, and reads the ids back
   *  4 bytes at a time. After a stop token, the steps already encoded are dropped. 0: every step's logits are read
   *  back and the token picked on the host before the next step is encoded (as sampling always does). */
  lookahead?: number;
}

/** Steps encoded ahead in greedy decoding (see {@link GenerateOptions.lookahead}). */
export const GENERATE_LOOKAHEAD = 2;

/** Dispatches per submit while generating (see {@link GenerateOptions.submitEvery}). */
export const GENERATE_SUBMIT_EVERY = 64;

/** Pick the next token from one row of logits. */
export function sampleToken(logits: ArrayLike<number>, o: GenerateOptions, rand: () => number): number {
  const temp = o.temperature ?? 0;
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  if (temp <= 0) return best;
  let idx = [...Array(logits.length).keys()];
  const topK = o.topK ?? 0;
  if (topK > 0 && topK < idx.length) idx = idx.sort((a, b) => logits[b]! - logits[a]!).slice(0, topK);
  const max = logits[best]!;
  let probs = idx.map((i) => Math.exp((logits[i]! - max) / temp));
  let z = probs.reduce((a, b) => a + b, 0);
  probs = probs.map((p) => p / z);
  const topP = o.topP ?? 1;
  if (topP < 1) {
    const order = [...probs.keys()].sort((a, b) => probs[b]! - probs[a]!);
    const keep: number[] = [];
    let acc = 0;
    for (const j of order) {
      keep.push(j);
      acc += probs[j]!;
      if (acc >= topP) break;
    }
    idx = keep.map((j) => idx[j]!);
    probs = keep.map((j) => probs[j]!);
    z = acc;
    probs = probs.map((p) => p / z);
  }
  let r = rand();
  for (let j = 0; j < idx.length; j++) {
    r -= probs[j]!;
    if (r <= 0) return idx[j]!;
  }
  return idx[idx.length - 1]!;
}

/**
 * Stream generated token ids for one prompt, with a KV cache: the prompt is processed once, then each new
 * token costs one single-position forward.
 */
export async function* generateStream(model: CausalLM, prompt: readonly number[], o: GenerateOptions = {}): AsyncGenerator<number> {
  const ctx = model.ctx;
  const maxNew = o.maxNewTokens ?? 32;
  if (!prompt.length) throw new ShapeError('generate: the prompt is empty');
  if (!Number.isInteger(maxNew) || maxNew < 0) throw new ConfigError(`maxNewTokens must be a non-negative integer, got ${maxNew}`);
  const v = model.config.vocabSize;
  for (const id of prompt) if (!Number.isInteger(id) || id < 0 || id >= v) throw new ShapeError(`generate: token id ${id} is outside the vocabulary (0..${v - 1})`);
  const stop = new Set(o.stopTokens ?? model.config.eosTokenId);
  const rand = mulberry32(o.seed ?? 0);
  const every = o.submitEvery ?? GENERATE_SUBMIT_EVERY;
  if (!Number.isInteger(every) || every < 1) throw new ConfigError(`submitEvery must be a positive integer, got ${every}`);
  const ahead = o.lookahead ?? GENERATE_LOOKAHEAD;
  if (!Number.isInteger(ahead) || ahead < 0) throw new ConfigError(`lookahead must be a non-negative integer, got ${ahead}`);
  const cache = new KVCache(ctx, model.config, 1, prompt.length + maxNew);
  const wasTraining = model.training;
  model.eval();
  const uncap = ctx.capDispatchesPerSubmit(every);
  try {
    if ((o.temperature ?? 0) <= 0 && ahead > 0) {
      yield* greedyOnGpu(model, prompt, maxNew, ahead, stop, cache);
      return;
    }
    let ids = [...prompt];
    for (let step = 0; step < maxNew; step++) {
      const last = noGrad(() => {
        const input = Tensor.fromArray(ctx, ids, [1, ids.length], { dtype: 'i32' });
        const logits = model.forward(input, cache);
        const l = empty(ctx, [1, 1, v]);
        copyRows(ctx, logits.data, l, 1, ids.length - 1, 0);
        input.dispose();
        logits.dispose();
        return l;
      });
      const row = await download(ctx, last);
      ctx.release(last.buffer);
      const next = sampleToken(row, o, rand);
      yield next;
      if (stop.has(next)) return;
      ids = [next];
    }
  } finally {
    cache.dispose();
    model.train(wasTraining);
    uncap();
  }
}

/**
 * Greedy decoding with the tokens picked on the GPU: each step's last row of logits goes through `argmax` into an
 * i32 [1, 1] tensor that is the next step's input, and a read of those 4 bytes is started; the host waits for the
 * oldest read only when more than `ahead` are in flight. The ids are those of the host's pick (`argmax` keeps its
 * rule: the first of equal maxima, NaN passed over).
 */
async function* greedyOnGpu(model: CausalLM, prompt: readonly number[], maxNew: number, ahead: number, stop: Set<number>, cache: KVCache): AsyncGenerator<number> {
  const ctx = model.ctx;
  const v = model.config.vocabSize;
  const reads: Promise<number>[] = [];
  let input = Tensor.fromArray(ctx, prompt, [1, prompt.length], { dtype: 'i32' });
  try {
    for (let step = 0; step < maxNew; step++) {
      const t = input.shape[1]!;
      const next = noGrad(() => {
        const logits = model.forward(input, cache);
        let last = logits.data;
        if (t > 1) {
          last = empty(ctx, [1, 1, v]);
          copyRows(ctx, logits.data, last, 1, t - 1, 0);
        }
        const id = argmax(ctx, last);
        if (last !== logits.data) ctx.release(last.buffer);
        logits.dispose();
        return new Tensor(ctx, id, false);
      });
      input.dispose();
      input = next;
      reads.push(download(ctx, next.data).then((a) => a[0]!));
      while (reads.length > ahead || (step === maxNew - 1 && reads.length)) {
        const id = await reads.shift()!;
        yield id;
        if (stop.has(id)) return;
      }
    }
  } finally {
    input.dispose();
    // the reads of dropped steps still finish (their staging buffers unmap); nothing waits on their ids
    await Promise.allSettled(reads);
  }
}

/** Generate up to `maxNewTokens` ids after `prompt` (greedy when temperature is 0); returns the new ids. */
export async function generate(model: CausalLM, prompt: readonly number[], o: GenerateOptions = {}): Promise<number[]> {
  const out: number[] = [];
  for await (const t of generateStream(model, prompt, o)) out.push(t);
  return out;
}
