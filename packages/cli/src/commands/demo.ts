import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import type { CausalLM } from '@rusty/graph';
import type { Tokenizer } from '@rusty/loader';
import { flag, parseArgs, withDefault, type CommandSpec } from '../args';
import type { CorpusSource } from '../corpus';
import { DEMO_CORPUS_SHA256, DEMO_FACTS, demoAnswer, demoCorpus, demoFinetuneJsonl, demoPrompt } from '../demo-corpus';
import { EXIT_OK, exitCodeOfSignal, UsageError } from '../errors';
import { checkOutTarget, RUN_LOCK_FILE } from '../out-dir';
import { PRESETS } from '../presets';
import { fmtCount, fmtDuration, fmtLoss } from '../progress';
import { loadData } from '../training';
import { finetuneModel, finetuneSpec } from './finetune';
import { evaluateModel } from './eval';
import { streamText } from './generate';
import { openContext } from './common';
import { acquireRunLock, checkRunLock } from '@rusty/trainer';
import { trainModel, trainSpec } from './train';

/**
 * The demo's run lengths by size (the model sizes are PRESETS'): tiny fits a few minutes of a CPU software
 * adapter (lavapipe learns about 2k tokens/s on two cores); small, on a GPU, trains longer (seconds there).
 */
const DEMO_RUNS = {
  tiny: { steps: 450, lr: 2e-2, finetuneSteps: 300, finetuneLr: 5e-3 },
  small: { steps: 2000, lr: PRESETS.small.lr, finetuneSteps: 300, finetuneLr: 5e-3 },
} as const;

const flags = {
  out: withDefault(flag.str('directory for everything the demo writes (base model, adapter, merged model, data, metrics, curves)', { short: 'o', value: '<dir>' }), 'rusty-demo'),
  size: flag.choice(['tiny', 'small'], 'model and run size (default: tiny on a CPU software adapter, small on a GPU)'),
  steps: flag.int(`pretraining steps (default ${DEMO_RUNS.tiny.steps} tiny, ${DEMO_RUNS.small.steps} small)`, { min: 1 }),
  'finetune-steps': flag.int(`LoRA fine-tuning steps (default ${DEMO_RUNS.tiny.finetuneSteps} tiny, ${DEMO_RUNS.small.finetuneSteps} small)`, { min: 1 }),
  'max-new-tokens': withDefault(flag.int('tokens per sample', { short: 'n', min: 1 }), 40),
  seed: withDefault(flag.int('seed of everything', { min: 0 }), 0),
  'log-every': flag.int('without a terminal: a progress line every N steps', { min: 1 }),
};

export const demoSpec: CommandSpec<typeof flags> = {
  name: 'demo',
  summary: 'train a tiny model from scratch, fine-tune it with LoRA, show samples before and after',
  usage: 'rusty demo [--out <dir>] [--size tiny|small] [options]',
  description: `The whole pipeline with nothing to download:
  1. pretrain a small Llama on the corpus shipped with the demo (generated TypeScript-like code of a small ML
     framework, the same text on every machine; its doc comments say what each part does: "the cache: it keeps
     keys and values.");
  2. sample from it: it writes code like the corpus, and does not answer questions;
  3. fine-tune it with LoRA on a second corpus of question/answer pairs (prompts masked out of the loss);
  4. sample again with the same prompts: it now answers each question with what the corpus says.
The seed (--seed) fixes the initialisation, data order and samples.
On a CPU software adapter (lavapipe) the tiny size finishes in a few minutes; on a GPU the small size is used.
Everything lands in --out: base/ (HF model dir), lora/ (PEFT adapter) and lora/merged/, the data, metrics JSONL
and loss curves (loss.svg).`,
  flags,
  examples: ['rusty demo', 'rusty demo --out /tmp/demo --size small', 'rusty demo --steps 300 --finetune-steps 150'],
};

const MARKER = '.rusty-demo';

/**
 * The demo starts over in its own directory: it refuses one it did not create and one another live run holds
 * (checked before anything is written), then locks it for the run.
 */
async function prepare(out: string): Promise<() => void> {
  await checkOutTarget(out);
  let names: string[] = [];
  try {
    names = (await readdir(out)).filter((n) => n !== RUN_LOCK_FILE);
  } catch {
    // a new directory
  }
  if (names.length && !names.includes(MARKER)) throw new UsageError(`demo: --out ${out} exists and was not made by rusty demo; choose another --out`);
  checkRunLock(out);
  const lock = await acquireRunLock(out, 'rusty demo');
  for (const n of ['base', 'lora']) await rm(join(out, n), { recursive: true, force: true });
  await writeFile(join(out, MARKER), 'made by rusty demo\n');
  return lock.release;
}

/** The demo's pretraining corpus, written under `dir` (so the corpus pipeline and its token cache see a file). */
async function demoCorpusSource(dir: string): Promise<CorpusSource> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'demo-corpus.ts.txt');
  await writeFile(file, demoCorpus());
  return { name: `the demo corpus (generated TypeScript-like code, sha256 ${DEMO_CORPUS_SHA256.slice(0, 12)}, ${file})`, paths: [file] };
}

/**
 * Greedy continuations of the question prompts, read as answers up to the end of the sequence or of the line;
 * a sampled one (temperature 0.7) of the code prompt.
 */
async function samples(model: CausalLM, tok: Tokenizer, prompts: string[], maxNewTokens: number, seed: number): Promise<string[]> {
  const outs: string[] = [];
  for (const p of prompts) {
    const greedy = p.startsWith('Q:');
    const r = await streamText(model, tok, p, { maxNewTokens, temperature: greedy ? 0 : 0.7, topK: 20, topP: 1, seed }, () => undefined);
    outs.push(greedy ? r.text.split('\n')[0]! : r.text);
  }
  return outs;
}

const show = (s: string): string => JSON.stringify(s).slice(1, -1);

export async function demoCommand(argv: string[]): Promise<number> {
  const { opts: o } = parseArgs(demoSpec, argv);
  const out = resolve(o.out);
  const t0 = performance.now();
  const release = await prepare(out);
  const ctx = await openContext().catch((e) => {
    release();
    throw e;
  });
  try {
    const size = o.size ?? (ctx.info.isSoftware ? 'tiny' : 'small');
    const p = PRESETS[size];
    const run = DEMO_RUNS[size];
    const steps = o.steps ?? run.steps;
    const ftSteps = o.finetuneSteps ?? run.finetuneSteps;
    const log = (s: string) => process.stdout.write(s + '\n');
    const rel = (f: string) => relative(process.cwd(), f) || '.';
    const common = [...(o.logEvery ? ['--log-every', String(o.logEvery)] : []), '--seed', String(o.seed)];

    log(`rusty demo (${size}: hidden ${p.hiddenSize}, ${p.layers} layers, sequences of ${p.seqLen} tokens; adapter: ${ctx.info.description || ctx.info.device})`);
    log('');
    log(`1. Pretraining a small Llama from scratch for ${steps} steps`);
    const corpus = await demoCorpusSource(join(out, 'data'));
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
      '--lr', String(run.lr),
      '--val-split', '0.02',
      '--eval-batches', '4',
      ...common,
    ]).opts;
    const base = await trainModel(ctx, trainOpts, { corpus, title: 'rusty demo: pretraining on code' });
    if (base.interrupted) {
      log(`demo: interrupted during pretraining (checkpoint in ${rel(base.run.checkpointDir)})`);
      return exitCodeOfSignal(base.run.fit.signal);
    }
    const f1 = base.run.fit;
    log(
      `   loss ${fmtLoss(base.run.firstLoss)} -> ${fmtLoss(f1.loss)}` +
        (f1.eval ? ` (validation ${fmtLoss(f1.eval.loss)}, perplexity ${f1.eval.perplexity.toFixed(2)})` : '') +
        ` in ${fmtDuration(base.run.seconds)}; model in ${rel(base.out)}/, loss curve ${rel(join(base.out, 'loss.svg'))}`,
    );

    const prompts = [...DEMO_FACTS.map(([s]) => demoPrompt(s)), 'export function '];
    const targets = [...DEMO_FACTS.map(([, a]) => demoAnswer(a)), null];
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
      '--lr', String(run.finetuneLr),
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
      return exitCodeOfSignal(ft.run.fit.signal);
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
    const exact = targets.filter((t, i) => t !== null && after[i] === t).length;
    log(`   taught answers reproduced exactly: ${exact} of ${DEMO_FACTS.length}`);
    log('');
    log(`demo finished in ${fmtDuration((performance.now() - t0) / 1000)}. Try:`);
    log(`  rusty generate --model ${rel(base.out)} --adapter ${rel(ft.out)} --prompt "Q: what does the cache do?\\nA:" --temperature 0`);
    log(`  rusty eval --model ${rel(base.out)} --adapter ${rel(ft.out)} --data ${rel(dataFile)}`);
    log(`  rusty inspect ${rel(ft.out)}`);
    ft.model.dispose();
    return EXIT_OK;
  } finally {
    ctx.destroy();
    release();
  }
}
