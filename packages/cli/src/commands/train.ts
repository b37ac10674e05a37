import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Context } from '@rusty/backend';
import { architectureOf, CausalLM, parseModelConfig, type ModelConfig } from '@rusty/graph';
import type { Tokenizer } from '@rusty/loader';
import { flag, parseArgs, withDefault, type CommandSpec, type OptionsOf } from '../args';
import { defaultCorpus, type CorpusSource } from '../corpus';
import { EXIT_OK, UsageError } from '../errors';
import { defaultTokenizer, loadTokenizer, requirePath, saveModelDir } from '../model-io';
import { presetFor } from '../presets';
import { fmtCount } from '../progress';
import { checkOutTarget, prepareOutDir } from '../out-dir';
import {
  checkDataPaths,
  checkFits,
  checkWarmup,
  loadData,
  markExported,
  runTraining,
  saveRunOptions,
  summaryLines,
  type RunResult,
} from '../training';
import { dataFlags, loopFlags, noteSoftware, openContext, warmupOf } from './common';
import { reportInterrupted, resumedOptions } from './run-control';

const flags = {
  data: flag.strs('text files, directories (walked) or JSONL files to train on (default: the embedded corpus)', { short: 'd' }),
  ...dataFlags,
  out: withDefault(flag.str('output directory: config.json, model.safetensors, tokenizer.json, metrics, loss.svg', { short: 'o', value: '<dir>' }), 'rusty-model'),
  tokenizer: flag.str('a tokenizer.json to use (default: a byte-level tokenizer, 256 bytes + 3 specials)', { value: '<file>' }),
  'model-config': flag.str('take the architecture from an HF config.json (vocab, sizes, rope) instead of the size flags', { value: '<file>' }),
  'hidden-size': flag.int('model width (default 64 on a CPU adapter, 256 on a GPU)', { min: 2 }),
  layers: flag.int('decoder layers (default 2 / 4)', { min: 1 }),
  heads: flag.int('attention heads (default 4 / 8)', { min: 1 }),
  'kv-heads': flag.int('key/value heads, grouped-query attention (default heads / 2)', { min: 1 }),
  'intermediate-size': flag.int('MLP width (default about 8/3 x hidden, a multiple of 16)', { min: 1 }),
  'seq-len': flag.int('tokens per training sequence (default 64 / 256)', { min: 2 }),
  'max-position': flag.int('max_position_embeddings of the config (default max(seq-len, 512))', { min: 2 }),
  'rope-theta': withDefault(flag.num('rotary embedding base', { positive: true }), 10000),
  'tie-embeddings': withDefault(flag.bool('share the input embedding and the output head (use --no-tie-embeddings to untie)'), true),
  ...loopFlags({ steps: '300 on a CPU adapter, 600 on a GPU', batch: '4 / 16', lr: '1e-2 / 2e-3', weightDecay: 0.1 }),
  config: flag.str('a JSON file of options (keys as these flags)', { value: '<file>', cliOnly: true }),
};

export const trainSpec: CommandSpec<typeof flags> = {
  name: 'train',
  summary: 'pretrain a small model from scratch (Llama by default; any supported architecture with --model-config)',
  usage: 'rusty train [--data <path>...] [--out <dir>] [options]',
  description: `Trains a model from random weights (Llama unless --model-config gives the config.json of another
supported architecture: Mistral, Qwen2, Qwen3, Gemma 3) on text, code or JSONL files and saves an HF
model directory (config.json, model.safetensors in f32 with HF names, tokenizer.json) that rusty finetune,
rusty generate and HF transformers load. Without --data it trains on the embedded corpus: this repository's
TypeScript sources when the CLI runs from a checkout, else generated code. Progress goes to stderr, metrics to
<out>/metrics.jsonl and the loss curve to <out>/loss.svg. Ctrl-C saves a checkpoint; --resume continues.`,
  flags,
  configFlag: 'config',
  examples: [
    'rusty train                                   # the embedded corpus, sizes for this adapter',
    'rusty train --data ./src --include "**/*.ts" --out code-model --steps 2000',
    'rusty train --data notes.jsonl --hidden-size 128 --layers 4 --seq-len 128 --batch-size 16',
    'rusty train --out code-model --resume --steps 4000   # continue (and extend) an interrupted run',
  ],
};

type TrainOpts = OptionsOf<typeof flags>;

/** Settings that a resumed run may change. */
const RESUMABLE = ['steps', 'logEvery', 'saveEvery', 'evalEvery', 'resume', 'overwrite', 'out', 'config', 'matmulPrecision'];

function defaultIntermediate(h: number): number {
  return Math.max(16, Math.round((h * 8) / 3 / 16) * 16);
}

/** The model config from the size flags (or an HF config file), checked with messages naming the flags. */
export async function modelConfig(o: TrainOpts, ctx: Context, tok: Tokenizer, seqLen: number): Promise<ModelConfig> {
  if (o.modelConfig) {
    const text = await readFile(o.modelConfig, 'utf8');
    const c = parseModelConfig(text, o.modelConfig);
    if (c.vocabSize < tok.vocabSize) throw new UsageError(`--model-config ${o.modelConfig}: vocab_size ${c.vocabSize} is smaller than the tokenizer's ${tok.vocabSize} ids`);
    return c;
  }
  const p = presetFor(ctx.info.isSoftware);
  const h = o.hiddenSize ?? p.hiddenSize;
  const heads = o.heads ?? (o.hiddenSize ? Math.max(1, Math.min(p.heads, h / 16)) : p.heads);
  const kv = o.kvHeads ?? Math.max(1, heads % 2 ? heads : heads / 2);
  if (h % heads) throw new UsageError(`train: --hidden-size ${h} must be a multiple of --heads ${heads}`);
  if ((h / heads) % 2) throw new UsageError(`train: --hidden-size / --heads = ${h / heads} must be even (rotary embeddings)`);
  if (heads % kv) throw new UsageError(`train: --heads ${heads} must be a multiple of --kv-heads ${kv}`);
  return parseModelConfig(
    {
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      vocab_size: tok.vocabSize,
      hidden_size: h,
      intermediate_size: o.intermediateSize ?? (o.hiddenSize ? defaultIntermediate(h) : p.intermediateSize),
      num_hidden_layers: o.layers ?? p.layers,
      num_attention_heads: heads,
      num_key_value_heads: kv,
      max_position_embeddings: o.maxPosition ?? Math.max(seqLen, 512),
      rope_theta: o.ropeTheta,
      rms_norm_eps: 1e-5,
      tie_word_embeddings: o.tieEmbeddings,
      bos_token_id: tok.bosTokenId ?? null,
      eos_token_id: tok.eosTokenId ?? null,
      pad_token_id: tok.padTokenId ?? null,
      torch_dtype: 'float32',
    },
    'model options',
  );
}

export interface TrainOutcome {
  model: CausalLM;
  tokenizer: Tokenizer;
  config: ModelConfig;
  run: RunResult;
  out: string;
  interrupted: boolean;
}

/** Train from scratch with resolved options on an open context (used by `rusty demo` too). */
export async function trainModel(ctx: Context, o: TrainOpts, extra: { corpus?: CorpusSource; title?: string } = {}): Promise<TrainOutcome> {
  const out = resolve(o.out);
  const tokenizer = o.tokenizer ? await loadTokenizer(o.tokenizer) : defaultTokenizer();
  const p = presetFor(ctx.info.isSoftware);
  const seqLen = o.seqLen ?? p.seqLen;
  const batchSize = o.batchSize ?? p.batchSize;
  const steps = o.steps ?? p.steps;
  checkWarmup(o.warmup, steps);
  const config = await modelConfig(o, ctx, tokenizer, seqLen);
  if (seqLen > config.maxPositionEmbeddings) throw new UsageError(`train: --seq-len ${seqLen} exceeds max_position_embeddings ${config.maxPositionEmbeddings}`);
  checkFits(ctx, config, batchSize, seqLen);
  noteSoftware(ctx, 'train', o.hiddenSize || o.modelConfig ? '' : '; small default sizes');
  const corpus: CorpusSource = extra.corpus ?? (o.data?.length ? { name: o.data.join(', '), paths: o.data, include: o.include, exclude: o.exclude } : await defaultCorpus(join(out, 'data')));
  process.stderr.write(`train: data: ${corpus.name}\n`);
  const data = await loadData(corpus, { tokenizer, seqLen, pack: true, valSplit: o.valSplit, seed: o.seed });
  process.stderr.write(`train: ${data.summary}\n`);
  const model = new CausalLM(ctx, config, { seed: o.seed, gradientCheckpointing: o.gradientCheckpointing });
  const nParams = model.parameters().reduce((n, t) => n + t.size, 0);
  process.stderr.write(
    `train: model: ${fmtCount(nParams)} parameters (hidden ${config.hiddenSize}, ${config.numHiddenLayers} layers, ${config.numAttentionHeads} heads, ` +
      `vocab ${config.vocabSize}); ${steps} steps of ${batchSize}${o.gradientAccumulation > 1 ? ` x ${o.gradientAccumulation}` : ''} x ${seqLen} tokens\n`,
  );
  // resolved sizes, so that --resume continues with the same ones whatever the adapter
  await saveRunOptions(out, 'train', { ...o, out, steps, batchSize, seqLen, lr: o.lr ?? p.lr });
  const run = await runTraining({
    label: 'train',
    ctx,
    model,
    train: data.train,
    validation: data.validation,
    steps,
    batchSize,
    lr: o.lr ?? p.lr,
    warmup: warmupOf(o.warmup, steps),
    schedule: o.lrSchedule,
    weightDecay: o.weightDecay,
    gradClip: o.gradClip,
    accumulation: o.gradientAccumulation,
    evalEvery: o.evalEvery,
    evalBatches: o.evalBatches,
    saveEvery: o.saveEvery,
    outDir: out,
    resume: !!o.resume,
    seed: o.seed,
    logEvery: o.logEvery,
    title: extra.title ?? `rusty train: ${fmtCount(nParams)}-parameter ${architectureOf(config).className.replace(/ForCausalLM$/, '')}`,
  });
  const interrupted = run.fit.reason === 'interrupted';
  if (!interrupted) {
    await saveModelDir(model, tokenizer, out);
    await markExported(out, run.fit.step);
  }
  return { model, tokenizer, config, run, out, interrupted };
}

export async function trainCommand(argv: string[]): Promise<number> {
  const parsed = parseArgs(trainSpec, argv);
  let o = parsed.opts;
  const out = resolve(o.out);
  await checkOutTarget(out);
  if (o.resume) o = (await resumedOptions('train', out, o as Record<string, unknown>, parsed.onCommandLine, RESUMABLE)) as TrainOpts;
  // everything that can be checked without the GPU first
  if (o.data) await checkDataPaths(o.data);
  if (o.tokenizer) await requirePath(o.tokenizer, '--tokenizer');
  if (o.modelConfig) {
    await requirePath(o.modelConfig, '--model-config', 'file');
    parseModelConfig(await readFile(o.modelConfig, 'utf8'), o.modelConfig);
  }
  if (o.steps !== undefined) checkWarmup(o.warmup, o.steps);
  const lock = await prepareOutDir(out, { resume: !!o.resume, overwrite: !!o.overwrite, command: 'rusty train' });
  try {
    const ctx = await openContext(o.matmulPrecision);
    try {
      const r = await trainModel(ctx, o);
      if (r.interrupted) return reportInterrupted('train', r.run, o.out);
      const lines = summaryLines('train', r.run, [`  model       ${r.out} (config.json, model.safetensors, tokenizer.json)`]);
      lines.push(`  next        rusty generate --model ${o.out} --prompt "export function"`);
      process.stdout.write(lines.join('\n') + '\n');
      r.model.dispose();
      return EXIT_OK;
    } finally {
      ctx.destroy();
    }
  } finally {
    lock.release();
  }
}
