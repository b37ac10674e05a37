import type { Context, QuantSpec } from '@rusty/backend';
import type { CausalLM } from '@rusty/graph';
import type { Tokenizer } from '@rusty/loader';
import { flag, parseArgs, withDefault, type CommandSpec } from '../args';
import { EXIT_OK, UsageError } from '../errors';
import { noteSavedQuantized, quantFlags, quantSpecOf } from '../quant-flags';
import { checkAdapterFits, checkWeights, loadAdapter, loadModel, readModelConfig, requirePath } from '../model-io';
import { fmtDuration } from '../progress';
import { openContext } from './common';

export const samplingFlags = {
  'max-new-tokens': withDefault(flag.int('tokens to generate at most (generation also stops at an end-of-sequence token)', { short: 'n', min: 1 }), 100),
  temperature: withDefault(flag.num('sampling temperature; 0 is greedy decoding', { short: 't', min: 0 }), 0.8),
  'top-k': withDefault(flag.int('sample among the k most likely tokens (0: all)', { min: 0 }), 40),
  'top-p': withDefault(flag.num('nucleus sampling: the smallest set of tokens whose probability reaches p (1: all)', { positive: true, max: 1 }), 0.95),
  seed: withDefault(flag.int('seed of the sampler (same seed, same text)', { min: 0 }), 0),
};

const flags = {
  model: flag.str('the model: an HF directory or a .safetensors file beside its config.json', { short: 'm', value: '<dir|file>' }),
  adapter: flag.str('a PEFT LoRA adapter directory to apply', { short: 'a', value: '<dir>' }),
  prompt: flag.str('the text to continue (\\n and \\t are newline and tab)', { short: 'p', value: '<text>' }),
  ids: flag.list('token ids to continue instead of --prompt; prints the new ids as JSON (no tokenizer needed)', { value: '<id,id,...>' }),
  tokenizer: flag.str("a tokenizer.json to use instead of the model directory's", { value: '<file>' }),
  dtype: withDefault(flag.choice(['f32', 'f16', 'bf16'], 'storage of the weights on the GPU (16 bits: half the memory)'), 'f32'),
  ...quantFlags,
  ...samplingFlags,
  echo: withDefault(flag.bool('print the prompt before the generated text (--no-echo: only the new text)'), true),
};

export const generateSpec: CommandSpec<typeof flags> = {
  name: 'generate',
  summary: 'generate text from a prompt, streaming tokens as they come',
  usage: 'rusty generate --model <dir> [--adapter <dir>] --prompt "..." [options]',
  description: `Loads the model (and a LoRA adapter), encodes the prompt with the model's tokenizer and samples new tokens with
a KV cache, printing each as it is produced. Timing goes to stderr.`,
  flags,
  examples: [
    'rusty generate --model rusty-model --prompt "export function"',
    'rusty generate --model ./SmolLM2-135M --adapter rusty-lora --prompt "Q: what is LoRA?\\nA:" --temperature 0',
    'rusty generate -m ./TinyLlama-1.1B -p "Once upon a time" -n 200 --top-k 50 --top-p 0.9 --seed 7',
  ],
};

/** Decode escapes a shell cannot type easily: `\n`, `\t`, `\\`. */
export function unescapePrompt(s: string): string {
  return s.replace(/\\(n|t|\\)/g, (_, c: string) => (c === 'n' ? '\n' : c === 't' ? '\t' : '\\'));
}

export interface SampleOptions {
  maxNewTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
}

/**
 * Generate after `prompt`, calling `write` with each new piece of text (held back while it ends in an incomplete
 * UTF-8 sequence). Returns the generated text and counts.
 */
export async function streamText(
  model: CausalLM,
  tok: Tokenizer,
  prompt: string,
  s: SampleOptions,
  write: (text: string) => void,
): Promise<{ text: string; tokens: number; seconds: number; firstTokenSeconds: number; secondTokenSeconds: number }> {
  const ids = tok.encode(prompt);
  if (!ids.length) throw new UsageError('generate: the prompt encodes to no tokens');
  if (ids.length + s.maxNewTokens > model.config.maxPositionEmbeddings)
    throw new UsageError(
      `generate: the prompt (${ids.length} tokens) plus --max-new-tokens ${s.maxNewTokens} exceeds the model's max_position_embeddings ${model.config.maxPositionEmbeddings}`,
    );
  const out: number[] = [];
  let shown = '';
  const t0 = performance.now();
  let first = NaN;
  let second = NaN;
  for await (const id of model.generateStream(ids, { maxNewTokens: s.maxNewTokens, temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed })) {
    if (Number.isNaN(first)) first = (performance.now() - t0) / 1000;
    else if (Number.isNaN(second)) second = (performance.now() - t0) / 1000;
    out.push(id);
    const text = tok.decode(out, { skipSpecialTokens: true });
    const stable = text.endsWith('\uFFFD') ? text.replace(/\uFFFD+$/, '') : text;
    if (stable.length > shown.length && stable.startsWith(shown)) {
      write(stable.slice(shown.length));
      shown = stable;
    }
  }
  const final = tok.decode(out, { skipSpecialTokens: true });
  if (final.startsWith(shown) && final.length > shown.length) write(final.slice(shown.length));
  return { text: final, tokens: out.length, seconds: (performance.now() - t0) / 1000, firstTokenSeconds: first, secondTokenSeconds: second };
}

async function load(ctx: Context, o: { model: string; adapter?: string; tokenizer?: string; dtype?: 'f32' | 'f16' | 'bf16'; quantize?: QuantSpec }) {
  const r = await loadModel(ctx, o.model, { dtype: o.dtype ?? 'f32', requiresGrad: false, tokenizer: o.tokenizer, quantize: o.quantize });
  return withAdapter(r, o.adapter);
}

async function withAdapter<R extends { model: CausalLM }>(r: R, adapter: string | undefined): Promise<R> {
  try {
    if (adapter) await loadAdapter(r.model, adapter);
  } catch (e) {
    r.model.dispose();
    throw e;
  }
  r.model.eval();
  return r;
}

/** Checks that need no GPU: model config and weight headers (a model saved quantized is noted, and a
 *  `quantize` other than its format refused), adapter config, tokenizer path. */
export async function preflightModel(o: { model?: string; adapter?: string; tokenizer?: string }, cmd: string, quantize?: QuantSpec): Promise<void> {
  if (!o.model) throw new UsageError(`${cmd}: --model <dir> is required (see rusty ${cmd} --help)`);
  const { config } = await readModelConfig(o.model);
  noteSavedQuantized(cmd, o.model, await checkWeights(o.model, config), quantize);
  if (o.adapter) await checkAdapterFits(o.adapter, config, o.model);
  if (o.tokenizer) await requirePath(o.tokenizer, '--tokenizer', 'file');
}

export { load as loadForInference };

/**
 * The summary line of a run: tokens, time, the first token's time and the rate after it; from 3 tokens on, also the
 * rate after the first decoding step, the one that builds the decoding kernels (0.7-1.7 s for a 7B model on an
 * H100 the first time a machine runs them; the driver caches them for later runs: docs/PERFORMANCE.md).
 */
export function generateSummary(r: { tokens: number; seconds: number; firstTokenSeconds: number; secondTokenSeconds: number }): string {
  const rate = r.tokens > 1 ? (r.tokens - 1) / Math.max(1e-9, r.seconds - r.firstTokenSeconds) : NaN;
  const steady = r.tokens > 2 ? (r.tokens - 2) / Math.max(1e-9, r.seconds - r.secondTokenSeconds) : NaN;
  const after = Number.isFinite(steady) ? `; ${steady.toFixed(1)} tokens/s after the first decoding step, which builds its kernels` : '';
  return `generate: ${r.tokens} tokens in ${fmtDuration(r.seconds)} (first token ${fmtDuration(r.firstTokenSeconds)}${Number.isFinite(rate) ? `, then ${rate.toFixed(1)} tokens/s${after}` : ''})`;
}

export async function generateCommand(argv: string[]): Promise<number> {
  const { opts: o } = parseArgs(generateSpec, argv);
  if (o.prompt === undefined && !o.ids) throw new UsageError('generate: --prompt "..." is required (see rusty generate --help)');
  if (o.prompt !== undefined && o.ids) throw new UsageError('generate: give --prompt or --ids, not both');
  const ids = o.ids?.map((s) => {
    const v = Number(s);
    if (!Number.isInteger(v) || v < 0) throw new UsageError(`generate: option '--ids' must be non-negative integers, got '${s}'`);
    return v;
  });
  const quantize = quantSpecOf(o);
  await preflightModel(o, 'generate', quantize);
  const ctx = await openContext();
  try {
    if (ids) {
      const r = await withAdapter(await loadModel(ctx, o.model!, { dtype: o.dtype, requiresGrad: false, tokenizer: o.tokenizer, optionalTokenizer: true, quantize }), o.adapter);
      r.model.eval();
      const out: number[] = [];
      for await (const id of r.model.generateStream(ids, { maxNewTokens: o.maxNewTokens, temperature: o.temperature, topK: o.topK, topP: o.topP, seed: o.seed })) out.push(id);
      process.stdout.write(JSON.stringify(out) + '\n');
      r.model.dispose();
      return EXIT_OK;
    }
    const { model, tokenizer } = await load(ctx, { model: o.model!, adapter: o.adapter, tokenizer: o.tokenizer, dtype: o.dtype, quantize });
    const prompt = unescapePrompt(o.prompt!);
    if (o.echo) process.stdout.write(prompt);
    const r = await streamText(model, tokenizer, prompt, o, (t) => process.stdout.write(t));
    process.stdout.write('\n');
    process.stderr.write(generateSummary(r) + '\n');
    model.dispose();
    return EXIT_OK;
  } finally {
    ctx.destroy();
  }
}
