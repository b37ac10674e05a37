// What `rusty train`, `rusty finetune` and `rusty demo` share: reading the data, the optimizer and schedule,
// the Trainer with a live progress display, metrics JSONL and the loss-curve SVG.
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { f16ImageStats, fmtBytes, OutOfMemoryError, type Context } from '@rusty/backend';
import { AdamW, LinearWarmup, WarmupCosineScheduler, type Tensor } from '@rusty/autograd';
import type { ModelConfig } from '@rusty/graph';
import {
  DataLoader,
  findLatestCheckpoint,
  MetricsWriter,
  readMetrics,
  TextDataset,
  Trainer,
  type Dataset,
  type FitResult,
  type TextTokenizer,
  type TrainerModel,
} from '@rusty/trainer';
import { InputError, ModelTooLargeError, UsageError } from './errors';
import { requirePath, writeJsonAtomic } from './model-io';
import { fmtCount, fmtDuration, fmtLoss, Progress } from './progress';
import { lossCurveSvg } from './svg';
import { perfLines, StepMeter, type RunPerf } from './run-perf';
import type { CorpusSource } from './corpus';

export interface LoadedData {
  train: Dataset;
  validation: Dataset | null;
  /** One line describing the data. */
  summary: string;
  tokens: number;
}

/** Check that every data path exists (before the GPU starts). */
export async function checkDataPaths(paths: readonly string[], what = '--data'): Promise<void> {
  for (const p of paths) await requirePath(p, what);
}

/** `--pack auto`: one window per document when every data path is a JSONL file (prompt/response data), else packed. */
export async function packFor(choice: 'auto' | 'yes' | 'no', paths: readonly string[]): Promise<boolean> {
  if (choice !== 'auto') return choice === 'yes';
  for (const p of paths) if ((await stat(p)).isDirectory() || !/\.(jsonl|ndjson)$/i.test(p)) return true;
  return false;
}

/**
 * Tokenize (cached) and window a corpus, and split off a validation share. `pack`: concatenate documents into full
 * windows (pretraining) or one padded window per document (prompt/response data).
 */
export async function loadData(
  source: CorpusSource,
  o: { tokenizer: TextTokenizer; seqLen: number; pack: boolean; valSplit: number; seed: number },
): Promise<LoadedData> {
  const ds = await TextDataset.fromCorpus(source.paths, {
    tokenizer: o.tokenizer,
    seqLen: o.seqLen,
    include: source.include,
    exclude: source.exclude,
    pack: o.pack,
  });
  const info = ds.corpus;
  if (!ds.length || !ds.stats.targets) throw new InputError(`${source.name}: no text to train on (${info?.files.length ?? 0} files, ${ds.stats.tokens} tokens)`);
  let train: Dataset = ds;
  let validation: Dataset | null = null;
  if (o.valSplit > 0 && ds.length >= 4) {
    const s = ds.split(o.valSplit, o.seed);
    train = s.train;
    validation = s.validation.length ? s.validation : null;
  }
  const files = info?.files.length ?? 0;
  const summary =
    `${files} file${files === 1 ? '' : 's'}, ${info?.documents ?? ds.stats.documents} documents, ${fmtCount(ds.stats.tokens)} tokens` +
    `${info?.cacheHit ? ' (token cache)' : ''} -> ${train.length} windows of ${o.seqLen}` +
    (validation ? ` + ${validation.length} for validation` : '');
  return { train, validation, summary, tokens: ds.stats.tokens };
}

/**
 * Refuse a model that cannot fit: a single buffer (a weight, or the logits of a batch) larger than the adapter's
 * `maxBufferSize`. Real allocation failures are reported by the backend as they happen; this catches the hopeless
 * cases before minutes of loading.
 */
export function checkFits(ctx: Context, c: ModelConfig, batch: number, seqLen: number, weightBytes = 4): void {
  const max = ctx.info.limits.maxBufferSize ?? Infinity;
  // the weights first: when they alone do not fit, a smaller batch does not help
  const weights: [string, number][] = [
    ['the embedding', c.vocabSize * c.hiddenSize * weightBytes],
    ['an MLP weight', c.intermediateSize * c.hiddenSize * weightBytes],
    ['an attention weight', c.numAttentionHeads * c.headDim * c.hiddenSize * weightBytes],
  ];
  for (const [what, bytes] of weights)
    if (bytes > max) throw new ModelTooLargeError(`${what} needs a ${fmtBytes(bytes)} buffer, more than this adapter's maxBufferSize (${fmtBytes(max)})`);
  const activations: [string, number][] = [
    [`the logits of a batch (${batch} x ${seqLen} x ${c.vocabSize})`, batch * seqLen * c.vocabSize * 4],
    [`the MLP activations of a batch (${batch} x ${seqLen} x ${c.intermediateSize})`, batch * seqLen * c.intermediateSize * 4],
  ];
  for (const [what, bytes] of activations)
    if (bytes > max) throw new OutOfMemoryError(`${what} needs a ${fmtBytes(bytes)} buffer, more than this adapter's maxBufferSize (${fmtBytes(max)})`);
}

export interface RunOptions {
  label: string;
  ctx: Context;
  model: TrainerModel & { trainableParameters(): [string, Tensor][] };
  train: Dataset;
  validation: Dataset | null;
  steps: number;
  batchSize: number;
  lr: number;
  warmup: number;
  /** After the warm-up: cosine decay to lr/10 (default) or constant. */
  schedule?: 'cosine' | 'constant';
  weightDecay: number;
  gradClip: number;
  accumulation: number;
  evalEvery?: number;
  evalBatches?: number;
  saveEvery?: number;
  /** Where metrics.jsonl, loss.svg and checkpoints/ go. */
  outDir: string;
  mixedPrecision?: 'f16' | 'bf16';
  resume: boolean;
  seed: number;
  logEvery?: number;
  /** Title of the loss-curve picture. */
  title: string;
}

export interface RunResult {
  fit: FitResult;
  seconds: number;
  tokens: number;
  /** Training throughput (tokens/s) from the first step on. */
  rate: number;
  /** Steady-state cost per step and peak GPU memory (also the `summary` line of metrics.jsonl). */
  perf: RunPerf;
  firstLoss: number;
  metricsFile: string;
  svgFile: string | null;
  checkpointDir: string;
}

export const checkpointDirOf = (out: string): string => join(out, 'checkpoints');
const RUN_FILE = 'run.json';

/** What `run.json` beside the checkpoints holds. */
interface RunFile {
  command: string;
  /** The resolved options (paths absolute). */
  options: Record<string, unknown>;
  /** The working directory the run started in. */
  cwd?: string;
  /** Step whose model (or adapter) was written completely. */
  exported?: number;
}

/** Options that name files: saved absolute, and taken from the command line when given again on `--resume`. */
export const PATH_OPTIONS = ['data', 'tokenizer', 'modelConfig', 'model'];

function absolutePaths(options: Record<string, unknown>): Record<string, unknown> {
  const o = { ...options };
  for (const k of PATH_OPTIONS) {
    const v = o[k];
    if (typeof v === 'string') o[k] = resolve(v);
    else if (Array.isArray(v)) o[k] = v.map((p) => (typeof p === 'string' ? resolve(p) : p));
  }
  return o;
}

async function readRunFile(out: string): Promise<RunFile> {
  const file = join(checkpointDirOf(out), RUN_FILE);
  try {
    return JSON.parse(await readFile(file, 'utf8')) as RunFile;
  } catch {
    throw new InputError(`--resume: ${file} is missing or unreadable (the run's options are needed to resume)`);
  }
}

async function writeRunFile(out: string, run: RunFile): Promise<void> {
  const dir = checkpointDirOf(out);
  await mkdir(dir, { recursive: true });
  await writeJsonAtomic(join(dir, RUN_FILE), run);
}

/** Save the resolved options of a run next to its checkpoints (what `--resume` continues with); paths absolute. */
export async function saveRunOptions(out: string, command: string, options: Record<string, unknown>): Promise<void> {
  await writeRunFile(out, { command, options: absolutePaths(options), cwd: process.cwd() });
}

/** Record that the run's model (or adapter) for `step` is written completely (`--resume` then has nothing left). */
export async function markExported(out: string, step: number): Promise<void> {
  await writeRunFile(out, { ...(await readRunFile(out)), exported: step });
}

/** The options a run was started with, for `--resume`, the step of its newest checkpoint and whether it was exported. */
export async function loadRunOptions(out: string, command: string): Promise<{ options: Record<string, unknown>; step: number; exported: boolean }> {
  const dir = checkpointDirOf(out);
  const latest = await findLatestCheckpoint(dir);
  if (!latest) throw new InputError(`--resume: no checkpoint to resume in ${dir} (start without --resume)`);
  const step = Number(/checkpoint-(\d+)$/.exec(latest)?.[1] ?? 0);
  const run = await readRunFile(out);
  if (run.command !== command) throw new InputError(`--resume: ${dir} holds a '${run.command}' run, not a '${command}' run`);
  // runs saved before paths were made absolute: relative to the directory the run started in
  const options = run.cwd ? absolutePathsFrom(run.options ?? {}, run.cwd) : (run.options ?? {});
  const files = EXPORT_FILES[command] ?? [];
  const present = await Promise.all(files.map((f) => stat(join(out, f)).then(() => true, () => false)));
  return { options, step, exported: run.exported === step && present.every(Boolean) };
}

/** What a finished run of each command writes into --out (a run killed before all of it was written is not done). */
const EXPORT_FILES: Record<string, string[]> = {
  train: ['config.json', 'model.safetensors', 'tokenizer.json'],
  finetune: ['adapter_config.json', 'adapter_model.safetensors'],
};

function absolutePathsFrom(options: Record<string, unknown>, cwd: string): Record<string, unknown> {
  const o = { ...options };
  for (const k of PATH_OPTIONS) {
    const v = o[k];
    if (typeof v === 'string') o[k] = resolve(cwd, v);
    else if (Array.isArray(v)) o[k] = v.map((p) => (typeof p === 'string' ? resolve(cwd, p) : p));
  }
  return o;
}

/**
 * Refuse a resumed run that has nothing left to do: at (or past) `--steps` with its model written. A run killed
 * after its last checkpoint but before its export is resumed: it writes the export.
 */
export function checkResumeSteps(steps: number | undefined, done: number, exported: boolean): void {
  if (steps === undefined) return;
  if (steps < done || (steps === done && exported))
    throw new UsageError(`--resume: the run is already at step ${done}; give --steps above ${done} to train further`);
}

/** `--warmup` above `--steps` is an error (the learning rate would never finish warming up). */
export function checkWarmup(warmup: number | undefined, steps: number): void {
  if (warmup !== undefined && warmup > steps)
    throw new UsageError(`--warmup ${warmup} is above --steps ${steps}: the learning rate would never reach --lr; give a --warmup of at most ${steps}`);
}

/**
 * Merge a resumed run's saved options with the command line: the saved ones win, except for the names in `keep`
 * and the options that name files (`PATH_OPTIONS`: a moved file can be named again) given on the command line,
 * and options the run did not save. Returns the other command-line options that were overridden.
 */
export function resumeOptions<T extends Record<string, unknown>>(saved: Record<string, unknown>, cli: T, onCommandLine: Set<string>, keep: readonly string[]): { opts: T; ignored: string[]; taken: string[] } {
  const opts = { ...cli } as Record<string, unknown>;
  const ignored: string[] = [];
  const taken: string[] = [];
  const keys = new Set([...Object.keys(saved), ...onCommandLine]);
  for (const k of keys) {
    const given = onCommandLine.has(k);
    const differs = JSON.stringify(cli[k]) !== JSON.stringify(saved[k]);
    if (given && keep.includes(k)) continue;
    if (given && PATH_OPTIONS.includes(k)) {
      if (differs && saved[k] !== undefined) taken.push(k);
      continue;
    }
    if (saved[k] === undefined) continue;
    if (given && differs) ignored.push(k);
    opts[k] = saved[k];
  }
  return { opts: opts as T, ignored, taken };
}

/** Train with AdamW (no weight decay on norms and biases), warm-up + cosine schedule and the progress display. */
export async function runTraining(o: RunOptions): Promise<RunResult> {
  const params = o.model.trainableParameters();
  if (!params.length) throw new UsageError(`${o.label}: the model has no trainable parameters`);
  const decay = params.filter(([, p]) => p.shape.length >= 2).map(([, p]) => p);
  const noDecay = params.filter(([, p]) => p.shape.length < 2).map(([, p]) => p);
  const groups = [
    ...(decay.length ? [{ params: decay, weightDecay: o.weightDecay }] : []),
    ...(noDecay.length ? [{ params: noDecay, weightDecay: 0 }] : []),
  ];
  const optimizer = new AdamW(o.ctx, groups, { lr: o.lr, weightDecay: o.weightDecay });
  const warmup = Math.min(o.warmup, Math.max(0, o.steps - 1));
  const scheduler =
    o.schedule === 'constant'
      ? new LinearWarmup(optimizer, { warmupSteps: Math.max(1, warmup) })
      : new WarmupCosineScheduler(optimizer, { warmupSteps: warmup, totalSteps: Math.max(o.steps, warmup + 1), minLr: o.lr * 0.1 });
  const data = new DataLoader(o.train, o.batchSize, { shuffle: true, seed: o.seed, dropLast: o.train.length >= o.batchSize });
  const checkpointDir = checkpointDirOf(o.outDir);
  const metricsFile = join(o.outDir, 'metrics.jsonl');
  const progress = new Progress({ label: o.label, total: o.steps, every: o.logEvery });
  let firstLoss = NaN;
  let tokens = 0;
  const meter = new StepMeter(o.ctx);
  const trainer = new Trainer({
    model: o.model,
    optimizer,
    scheduler,
    data,
    maxSteps: o.steps,
    gradientAccumulationSteps: o.accumulation,
    maxGradNorm: o.gradClip > 0 ? o.gradClip : null,
    evalData: o.validation ?? undefined,
    evalEvery: o.validation && o.evalEvery ? o.evalEvery : undefined,
    evalBatches: o.evalBatches,
    metricsFile,
    checkpointDir,
    saveEvery: o.saveEvery,
    keepLast: 2,
    // plain safetensors checkpoints of the trainable weights (LoRA A/B included): resumable whatever the PEFT writer
    lora: false,
    mixedPrecision: o.mixedPrecision,
    progress: false,
    callbacks: {
      onStep(m) {
        if (Number.isNaN(firstLoss)) {
          firstLoss = m.loss;
          if (m.step > 1) progress.log(`${o.label}: resumed from the checkpoint of step ${m.step - 1}`);
          const img = f16ImageStats(o.ctx);
          if (img.count)
            progress.log(`${o.label}: f32 products of ${img.count} frozen weights run on tensor cores through their exact f16 images (${fmtBytes(img.bytes)})`);
        }
        const t = Number.isFinite(m.tokensPerSec * m.stepTime) ? Math.round(m.tokensPerSec * m.stepTime) : 0;
        tokens += t;
        meter.step(m.step, t, m.hostTime);
        progress.update({ step: m.step, loss: m.loss, tokens: t, lr: m.lr });
        if (!Number.isFinite(m.loss) && !m.skipped) progress.log(`${o.label}: warning: loss is ${m.loss} at step ${m.step} (try a lower --lr)`);
      },
      onEval(m) {
        progress.log(`${o.label}: validation at step ${m.step}: loss ${fmtLoss(m.loss)}, perplexity ${m.perplexity.toFixed(2)}`);
      },
      onCheckpoint(path, step) {
        if (trainer.stopReason === 'interrupted' || (o.saveEvery && step % o.saveEvery === 0 && step < o.steps)) progress.log(`${o.label}: checkpoint saved: ${path}`);
      },
    },
  });
  const t0 = performance.now();
  meter.start();
  let fit: FitResult;
  try {
    fit = await trainer.fit({ resume: o.resume });
  } finally {
    progress.finish();
    trainer.dispose();
  }
  const seconds = (performance.now() - t0) / 1000;
  const perf = meter.result();
  const mw = new MetricsWriter(metricsFile);
  mw.write({ kind: 'summary', step: fit.step, seconds, ...perf });
  mw.close();
  let svgFile: string | null = null;
  try {
    const records = readMetrics(metricsFile);
    svgFile = join(o.outDir, 'loss.svg');
    await writeFile(svgFile, lossCurveSvg(records, o.title));
    const first = records.find((r) => r.kind === 'train' && typeof r.loss === 'number');
    if (first) firstLoss = first.loss as number;
  } catch {
    svgFile = null;
  }
  optimizer.dispose();
  return { fit, seconds, tokens, rate: progress.rate, perf, firstLoss, metricsFile, svgFile, checkpointDir };
}

/** The summary lines of a finished (or interrupted) run; `outputs` are lines naming what was written. */
export function summaryLines(label: string, r: RunResult, outputs: string[] = []): string[] {
  const f = r.fit;
  const lines = [
    `${label}: ${f.reason === 'interrupted' ? 'interrupted at' : 'finished'} step ${f.step} in ${fmtDuration(r.seconds)}` +
      (r.tokens ? ` (${fmtCount(r.tokens)} tokens${Number.isFinite(r.rate) ? `, ${fmtCount(r.rate)} tok/s` : ''})` : ''),
    `  loss        ${fmtLoss(r.firstLoss)} -> ${fmtLoss(f.loss)} (first -> last step)`,
  ];
  if (f.eval) lines.push(`  validation  loss ${fmtLoss(f.eval.loss)}, perplexity ${f.eval.perplexity.toFixed(2)} (${fmtCount(f.eval.tokens)} tokens)`);
  lines.push(...perfLines(r.perf));
  lines.push(...outputs);
  lines.push(`  metrics     ${r.metricsFile}`);
  if (r.svgFile) lines.push(`  loss curve  ${r.svgFile}`);
  return lines;
}
