import { noGrad, Tensor, tidy } from '@rusty/autograd';
import type { CausalLM } from '@rusty/graph';
import { countTargets, DataLoader, type Dataset } from '@rusty/trainer';
import { flag, parseArgs, withDefault, type CommandSpec } from '../args';
import { EXIT_OK, UsageError } from '../errors';
import { fmtCount, fmtDuration, fmtLoss, Progress } from '../progress';
import { checkDataPaths, loadData, packFor } from '../training';
import { dataFlags, openContext } from './common';
import { loadForInference, preflightModel } from './generate';

const flags = {
  model: flag.str('the model: an HF directory or a .safetensors file beside its config.json', { short: 'm', value: '<dir|file>' }),
  adapter: flag.str('a PEFT LoRA adapter directory to apply', { short: 'a', value: '<dir>' }),
  data: flag.strs('text files, directories or JSONL files to evaluate on', { short: 'd' }),
  ...dataFlags,
  tokenizer: flag.str("a tokenizer.json to use instead of the model directory's", { value: '<file>' }),
  dtype: withDefault(flag.choice(['f32', 'f16', 'bf16'], 'storage of the weights on the GPU (16 bits: half the memory)'), 'f32'),
  'seq-len': flag.int('tokens per window (default min(256, max_position_embeddings))', { min: 2 }),
  'batch-size': withDefault(flag.int('windows per batch', { short: 'b', min: 1 }), 4),
  pack: withDefault(flag.choice(['auto', 'yes', 'no'], 'concatenate documents into full windows (yes) or one padded window per document (no); auto: no for JSONL'), 'auto'),
  'max-batches': flag.int('evaluate at most this many batches', { min: 1 }),
  json: flag.bool('print the result as JSON'),
};

export const evalSpec: CommandSpec<typeof flags> = {
  name: 'eval',
  summary: 'measure loss and perplexity of a model on text',
  usage: 'rusty eval --model <dir> [--adapter <dir>] --data <path>... [options]',
  description: `Cuts the data into windows, runs the model without gradients and averages the next-token cross-entropy over
every target token (prompts of {"prompt","response"} JSONL lines are not counted). Perplexity is exp(loss).`,
  flags,
  examples: [
    'rusty eval --model rusty-model --data ./held-out.txt',
    'rusty eval --model ./SmolLM2-135M --adapter rusty-lora --data ./val.jsonl --seq-len 512 --json',
  ],
};

export interface EvalResult {
  loss: number;
  perplexity: number;
  tokens: number;
  windows: number;
  batches: number;
  seconds: number;
}

/** Mean cross-entropy over every target token of the dataset (no gradients). */
export async function evaluateModel(model: CausalLM, ds: Dataset, batchSize: number, maxBatches?: number, showProgress = true): Promise<EvalResult> {
  const ctx = model.ctx;
  const loader = new DataLoader(ds, batchSize, { prefetch: 0 });
  const total = Math.min(loader.length, maxBatches ?? Infinity);
  const progress = new Progress({ label: 'eval', total, mode: showProgress ? undefined : 'none' });
  const t0 = performance.now();
  let sum = 0;
  let tokens = 0;
  let batches = 0;
  let windows = 0;
  model.eval();
  for (const b of loader) {
    if (batches >= total) break;
    batches++;
    windows += b.batch;
    const n = countTargets(b);
    if (n) {
      const ids = Tensor.fromArray(ctx, b.inputIds, [b.batch, b.seqLen], { dtype: 'i32' });
      const loss = noGrad(() => tidy(() => model.loss(ids, b.labels).loss.keep()));
      ids.dispose();
      const v = await loss.item();
      loss.dispose();
      sum += v * n;
      tokens += n;
    }
    progress.update({ step: batches, tokens: b.batch * b.seqLen, loss: tokens ? sum / tokens : undefined });
  }
  progress.finish();
  const loss = tokens ? sum / tokens : NaN;
  return { loss, perplexity: Math.exp(loss), tokens, windows, batches, seconds: (performance.now() - t0) / 1000 };
}


export async function evalCommand(argv: string[]): Promise<number> {
  const { opts: o } = parseArgs(evalSpec, argv);
  if (!o.data?.length) throw new UsageError('eval: --data <path> is required (see rusty eval --help)');
  await preflightModel(o, 'eval');
  await checkDataPaths(o.data);
  const ctx = await openContext();
  try {
    const { model, tokenizer, config } = await loadForInference(ctx, { model: o.model!, adapter: o.adapter, tokenizer: o.tokenizer, dtype: o.dtype });
    const seqLen = o.seqLen ?? Math.min(256, config.maxPositionEmbeddings);
    if (seqLen > config.maxPositionEmbeddings) throw new UsageError(`eval: --seq-len ${seqLen} exceeds the model's max_position_embeddings ${config.maxPositionEmbeddings}`);
    const pack = await packFor(o.pack, o.data);
    const data = await loadData({ name: o.data.join(', '), paths: o.data, include: o.include, exclude: o.exclude }, { tokenizer, seqLen, pack, valSplit: 0, seed: 0 });
    process.stderr.write(`eval: ${data.summary}\n`);
    const r = await evaluateModel(model, data.train, o.batchSize, o.maxBatches);
    if (o.json) process.stdout.write(JSON.stringify({ model: o.model, adapter: o.adapter ?? null, seqLen, ...r }) + '\n');
    else
      process.stdout.write(
        `loss        ${fmtLoss(r.loss)}\nperplexity  ${r.perplexity.toFixed(3)}\n` +
          `tokens      ${fmtCount(r.tokens)} targets in ${r.windows} windows of ${seqLen} (${r.batches} batches, ${fmtDuration(r.seconds)})\n`,
      );
    model.dispose();
    return EXIT_OK;
  } finally {
    ctx.destroy();
  }
}
