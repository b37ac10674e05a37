import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import type { LlamaForCausalLM } from '@rusty/graph';
import type { Tokenizer } from '@rusty/loader';
import { flag, parseArgs, withDefault, type CommandSpec } from '../args';
import { DEMO_FACTS, defaultCorpus, demoFinetuneJsonl, demoPrompt } from '../corpus';
import { EXIT_INTERRUPTED, EXIT_OK, UsageError } from '../errors';
import { PRESETS } from '../presets';
import { fmtCount, fmtDuration, fmtLoss } from '../progress';
import { loadData } from '../training';
import { finetuneModel, finetuneSpec } from './finetune';
import { evaluateModel } from './eval';
import { streamText } from './generate';
import { openContext } from './common';
import { trainModel, trainSpec } from './train';

const flags = {
  out: withDefault(flag.str('directory for everything the demo writes (base model, adapter, merged model, data, metrics, curves)', { short: 'o', value: '<dir>' }), 'rusty-demo'),
  size: flag.choice(['tiny', 'small'], 'model and run size (default: tiny on a CPU software adapter, small on a GPU)'),
  steps: flag.int('pretraining steps (default 300 tiny, 600 small)', { min: 1 }),
  'finetune-steps': flag.int('LoRA fine-tuning steps (default 400 tiny, 300 small)', { min: 1 }),
  'max-new-tokens': withDefault(flag.int('tokens per sample', { short: 'n', min: 1 }), 40),
  seed: withDefault(flag.int('seed of everything', { min: 0 }), 0),
  'log-every': flag.int('without a terminal: a progress line every N steps', { min: 1 }),
};

export const demoSpec: CommandSpec<typeof flags> = {
  name: 'demo',
  summary: 'train a tiny model from scratch, fine-tune it with LoRA, show samples before and after',
  usage: 'rusty demo [--out <dir>] [--size tiny|small] [options]',
  description: `The whole pipeline with nothing to download:
  1. pretrain a small Llama on the embedded corpus (this repository's TypeScript sources, or generated code);
  2. sample from it: it writes code-like text;
  3. fine-tune it with LoRA on a second, generated corpus of question/answer pairs (prompts masked out);
  4. sample again with the same prompts: it now answers in the new format.
On a CPU software adapter (lavapipe) the tiny size finishes in a few minutes; on a GPU the small size is used.
Everything lands in --out: base/ (HF model dir), lora/ (PEFT adapter) and lora/merged/, the data, metrics JSONL
and loss curves (loss.svg).`,
  flags,
  examples: ['rusty demo', 'rusty demo --out /tmp/demo --size small', 'rusty demo --steps 300 --finetune-steps 150'],
};

const MARKER = '.rusty-demo';

/** The demo starts over in its own directory, and refuses to clear one it did not create. */
async function prepare(out: string): Promise<void> {
  let names: string[] = [];
  try {
    if (!(await stat(out)).isDirectory()) throw new UsageError(`demo: --out ${out} exists and is not a directory`);
    names = await readdir(out);
  } catch (e) {
    if (e instanceof UsageError) throw e;
  }
  if (names.length && !names.includes(MARKER)) throw new UsageError(`demo: --out ${out} exists and was not made by rusty demo; choose another --out`);
  for (const n of ['base', 'lora']) await rm(join(out, n), { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  await writeFile(join(out, MARKER), 'made by rusty demo\n');
}

/** Greedy continuations of the question prompts; a sampled one (temperature 0.7) of the code prompt. */
async function samples(model: LlamaForCausalLM, tok: Tokenizer, prompts: string[], maxNewTokens: number, seed: number): Promise<string[]> {
  const outs: string[] = [];
  for (const p of prompts) {
    const greedy = p.startsWith('Q:');
    const r = await streamText(model, tok, p, { maxNewTokens, temperature: greedy ? 0 : 0.7, topK: 20, topP: 1, seed }, () => undefined);
    outs.push(r.text);
  }
  return outs;
}

const show = (s: string): string => JSON.stringify(s).slice(1, -1);

export async function demoCommand(argv: string[]): Promise<number> {
  const { opts: o } = parseArgs(demoSpec, argv);
  const out = resolve(o.out);
  const t0 = performance.now();
  await prepare(out);
  const ctx = await openContext();
  try {
    const size = o.size ?? (ctx.info.isSoftware ? 'tiny' : 'small');
    const p = PRESETS[size];
    const steps = o.steps ?? p.steps;
    const ftSteps = o.finetuneSteps ?? (size === 'tiny' ? 400 : 300);
    const log = (s: string) => process.stdout.write(s + '\n');
    const rel = (f: string) => relative(process.cwd(), f) || '.';
    const common = [...(o.logEvery ? ['--log-every', String(o.logEvery)] : []), '--seed', String(o.seed)];

    log(`rusty demo (${size}: hidden ${p.hiddenSize}, ${p.layers} layers, sequences of ${p.seqLen} tokens; adapter: ${ctx.info.description || ctx.info.device})`);
    log('');
    log(`1. Pretraining a small Llama from scratch for ${steps} steps`);
    const corpus = await defaultCorpus(join(out, 'data'));
    const trainOpts = parseArgs(trainSpec, [
      '--out', join(out, 'base'),
      '--steps', String(steps),
      '--hidden-size', String(p.hiddenSize),
      '--layers', String(p.layers),
      '--heads', String(p.heads),
      '--kv-heads', String(p.kvHeads),
      '--intermediate-size', String(p.intermediateSize),
      '--seq-len', String(p.seqLen),
      '--batch-size', String(p.batchSize),
      '--lr', String(p.lr),
      '--val-split', '0.02',
      '--eval-batches', '4',
      ...common,
    ]).opts;
    const base = await trainModel(ctx, trainOpts, { corpus, title: 'rusty demo: pretraining on code' });
    if (base.interrupted) {
      log(`demo: interrupted during pretraining (checkpoint in ${rel(base.run.checkpointDir)})`);
      return EXIT_INTERRUPTED;
    }
    const f1 = base.run.fit;
    log(
      `   loss ${fmtLoss(base.run.firstLoss)} -> ${fmtLoss(f1.loss)}` +
        (f1.eval ? ` (validation ${fmtLoss(f1.eval.loss)}, perplexity ${f1.eval.perplexity.toFixed(2)})` : '') +
        ` in ${fmtDuration(base.run.seconds)}; model in ${rel(base.out)}/, loss curve ${rel(join(base.out, 'loss.svg'))}`,
    );

    const prompts = [...DEMO_FACTS.map(([s]) => demoPrompt(s)), 'export function '];
    const targets = [...DEMO_FACTS.map(([, a]) => ` it ${a}.`), null];
    log('');
    log('2. Samples from the base model (greedy for the questions, sampled for the code)');
    const before = await samples(base.model, base.tokenizer, prompts, o.maxNewTokens, o.seed);
    prompts.forEach((pr, i) => log(`   ${show(pr)}${show(before[i]!)}`));

    log('');
    log(`3. LoRA fine-tuning on a second corpus (question/answer pairs) for ${ftSteps} steps`);
    const dataFile = join(out, 'finetune-data.jsonl');
    await writeFile(dataFile, demoFinetuneJsonl());
    const ftCorpus = { name: `${rel(dataFile)} (${DEMO_FACTS.length} facts x 3 phrasings)`, paths: [dataFile] };
    const ftData = await loadData(ftCorpus, { tokenizer: base.tokenizer, seqLen: p.seqLen, pack: false, valSplit: 0, seed: 0 });
    const evalBefore = await evaluateModel(base.model, ftData.train, p.batchSize, undefined, false);
    const ftOpts = parseArgs(finetuneSpec, [
      '--out', join(out, 'lora'),
      '--data', dataFile,
      '--steps', String(ftSteps),
      '--r', '16',
      '--alpha', '32',
      '--targets', 'all',
      '--lr', size === 'tiny' ? '1e-2' : '5e-3',
      '--batch-size', String(p.batchSize),
      '--seq-len', String(p.seqLen),
      '--val-split', '0',
      '--merge',
      ...common,
    ]).opts;
    const ft = await finetuneModel(ctx, ftOpts, {
      model: base.model,
      tokenizer: base.tokenizer,
      baseName: base.out,
      corpus: ftCorpus,
      title: 'rusty demo: LoRA fine-tuning on question/answer pairs',
    });
    if (ft.interrupted) {
      log(`demo: interrupted during fine-tuning (checkpoint in ${rel(ft.run.checkpointDir)})`);
      return EXIT_INTERRUPTED;
    }
    const f2 = ft.run.fit;
    log(
      `   loss ${fmtLoss(ft.run.firstLoss)} -> ${fmtLoss(f2.loss)}` +
        (f2.eval ? ` (validation ${fmtLoss(f2.eval.loss)})` : '') +
        ` in ${fmtDuration(ft.run.seconds)}; ${fmtCount(ft.trainable)} trainable parameters; adapter in ${rel(ft.out)}/, merged model in ${rel(ft.mergedDir ?? '')}/`,
    );

    const evalAfter = await evaluateModel(ft.model, ftData.train, p.batchSize, undefined, false);
    log(
      `   loss on the answers of the fine-tuning set: ${fmtLoss(evalBefore.loss)} (perplexity ${evalBefore.perplexity.toFixed(1)}) before, ` +
        `${fmtLoss(evalAfter.loss)} (perplexity ${evalAfter.perplexity.toFixed(1)}) after`,
    );
    log('');
    log('4. Samples after fine-tuning (same prompts and settings)');
    const after = await samples(ft.model, ft.tokenizer, prompts, o.maxNewTokens, o.seed);
    prompts.forEach((pr, i) => {
      log(`   ${show(pr)}`);
      if (targets[i]) log(`     taught: ${show(targets[i]!)}`);
      log(`     before: ${show(before[i]!)}`);
      log(`     after:  ${show(after[i]!)}`);
    });
    log('');
    log(`demo finished in ${fmtDuration((performance.now() - t0) / 1000)}. Try:`);
    log(`  rusty generate --model ${rel(base.out)} --adapter ${rel(ft.out)} --prompt "Q: what does the cache do?\\nA:" --temperature 0`);
    log(`  rusty eval --model ${rel(base.out)} --adapter ${rel(ft.out)} --data ${rel(dataFile)}`);
    log(`  rusty inspect ${rel(ft.out)}`);
    ft.model.dispose();
    return EXIT_OK;
  } finally {
    ctx.destroy();
  }
}
