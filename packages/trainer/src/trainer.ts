import { accumulate, ConfigError, fill, type Context, type DeviceTensor } from '@rusty/backend';
import { autocast, clipGradNorm, noGrad, scale, sum, Tensor, tidy, type ComputeDtype } from '@rusty/autograd';
import { loraModules, type Module } from '@rusty/graph';
import { findLatestCheckpoint, loadCheckpoint, saveCheckpoint, type CheckpointContents, type CheckpointPhase } from './checkpoint/checkpoint';
import { loadLoraCheckpoint, saveLoraCheckpoint } from './checkpoint/lora';
import { DataLoader, type Batch } from './data/dataloader';
import { IGNORE_INDEX, type Dataset } from './data/dataset';
import { TrainerError } from './errors';
import { GradScaler, type SteppableOptimizer } from './grad-scaler';
import { MetricsWriter } from './metrics';
import { castFrozenParameters, checkF16Range, f16ImagesForRun, f16OperandsForRun, type HasNamedParameters } from './mixed-precision';
import { processSignals } from './signals';
import type { TrainerModel, Scheduler, StepMetrics, EvalMetrics, ProgressInfo, CallbackResult, TrainerCallbacks, TrainerOptions, StopReason, FitResult } from './trainer-types';

export type { TrainerModel, Scheduler, StepMetrics, EvalMetrics, ProgressInfo, CallbackResult, TrainerCallbacks, MixedPrecisionOptions, TrainerOptions, StopReason, FitResult } from './trainer-types';

interface InFlight {
  step: number;
  stats: DeviceTensor;
  read: Promise<ArrayBuffer>;
  lr: number;
  tokens: number;
  epoch: number;
  /** Seconds the host spent encoding the step. */
  hostTime: number;
}

const isLoader = (d: Dataset | DataLoader): d is DataLoader => d instanceof DataLoader;

/**
 * The training loop: gradient accumulation, clipping, LR schedule, mixed precision with dynamic loss scaling
 * (all on the GPU, no read-back inside a step), evaluation, metrics JSONL, callbacks, early stopping, atomic
 * checkpoints with exact resume, and a clean stop on Ctrl-C.
 *
 * ```ts
 * const trainer = new Trainer({ model, optimizer, scheduler, data: new DataLoader(train, 8, { shuffle: true }),
 *   maxSteps: 1000, evalData: validation, evalEvery: 100, checkpointDir: 'runs/x', saveEvery: 100,
 *   metricsFile: 'runs/x/metrics.jsonl' });
 * const result = await trainer.fit({ resume: true });
 * ```
 */
export class Trainer {
  readonly ctx: Context;
  readonly model: TrainerModel;
  readonly optimizer: SteppableOptimizer;
  readonly scheduler: Scheduler | undefined;
  readonly data: DataLoader;
  readonly scaler: GradScaler | undefined;
  /** Precision of the projections and attention under `mixedPrecision` (the autocast scope of every forward);
   *  null without mixed precision (the model's own setting). */
  readonly compute: ComputeDtype | null;
  /** The f16 range check of the weights (f16 compute), started at construction, awaited before the first
   *  forward of `fit` or `evaluate`. */
  private rangeChecked: Promise<void> | null = null;
  readonly accumulation: number;
  readonly maxGradNorm: number | null;
  /** Optimizer steps done. */
  step = 0;
  /** Set by a stop request (`stop()`, a callback, early stopping or a signal); cleared by `fit()`. */
  stopReason: StopReason | null = null;
  private readonly opts: TrainerOptions;
  private readonly callbacks: TrainerCallbacks[];
  private readonly params: Tensor[];
  private readonly lora: boolean;
  /** The model has LoRA modules (a frozen base): the run may keep frozen weights elsewhere while it lasts. */
  private readonly loraRun: boolean;
  private seeds = new Map<string, Tensor>();
  private elapsedBefore = 0;
  private startTime = 0;
  private lastDone = 0;
  private bestEval = Infinity;
  private badEvals = 0;
  private lastLoss = NaN;
  private lastEval: EvalMetrics | null = null;
  private lastCheckpoint: string | null = null;
  /** Step of the newest checkpoint written or loaded (nothing to save again at that step). */
  private savedStep = -1;
  private metrics: MetricsWriter | null = null;
  private lastProgress = 0;
  /** Consecutive steps (not absorbed by a loss scaler) whose loss or gradient norm was NaN or infinite. */
  private nonFinite = 0;
  private readonly maxNonFinite: number;
  private readonly gradNormComputed: boolean;
  private interruptSignal: string | undefined;

  constructor(opts: TrainerOptions) {
    this.opts = opts;
    this.model = opts.model;
    this.optimizer = opts.optimizer;
    this.ctx = opts.optimizer.ctx;
    this.scheduler = opts.scheduler;
    this.data = opts.data;
    this.accumulation = opts.gradientAccumulationSteps ?? 1;
    this.maxGradNorm = opts.maxGradNorm === undefined ? 1.0 : opts.maxGradNorm;
    this.callbacks = opts.callbacks ? (Array.isArray(opts.callbacks) ? opts.callbacks : [opts.callbacks]) : [];
    if (!Number.isInteger(opts.maxSteps) || opts.maxSteps < 0) throw new ConfigError(`maxSteps must be a non-negative integer, got ${opts.maxSteps}`);
    if (!Number.isInteger(this.accumulation) || this.accumulation < 1)
      throw new ConfigError(`gradientAccumulationSteps must be a positive integer, got ${this.accumulation}`);
    if (this.maxGradNorm !== null && !(this.maxGradNorm > 0)) throw new ConfigError(`maxGradNorm must be > 0 or null, got ${this.maxGradNorm}`);
    for (const k of ['evalEvery', 'saveEvery', 'keepLast', 'evalBatches'] as const) {
      const v = opts[k];
      if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new ConfigError(`${k} must be a positive integer, got ${v}`);
    }
    if (opts.evalEvery && !opts.evalData) throw new ConfigError('evalEvery needs evalData');
    if (opts.saveEvery && !opts.checkpointDir) throw new ConfigError('saveEvery needs checkpointDir');
    if (opts.earlyStopping && !opts.evalData) throw new ConfigError('earlyStopping needs evalData (it watches the evaluation loss)');
    this.maxNonFinite = opts.maxNonFiniteSteps ?? 3;
    if (!Number.isInteger(this.maxNonFinite) || this.maxNonFinite < 1) throw new ConfigError(`maxNonFiniteSteps must be a positive integer, got ${opts.maxNonFiniteSteps}`);
    this.gradNormComputed = this.maxGradNorm !== null || (opts.logGradNorm ?? true);
    this.params = opts.optimizer.paramGroups.flatMap((g) => g.params);
    const mp = typeof opts.mixedPrecision === 'string' ? { dtype: opts.mixedPrecision } : opts.mixedPrecision;
    this.compute = mp ? (mp.compute ?? 'f16') : null;
    if (mp) {
      if (mp.dtype !== 'f16' && mp.dtype !== 'bf16') throw new ConfigError(`mixedPrecision: dtype must be 'f16' or 'bf16', got '${String(mp.dtype)}'`);
      if (this.compute !== 'f16' && this.compute !== 'f32') throw new ConfigError(`mixedPrecision: compute must be 'f16' or 'f32', got '${String(this.compute)}'`);
      const named = opts.model as unknown as { namedParameters?: () => Iterable<[string, Tensor]> };
      if (typeof named.namedParameters !== 'function') throw new ConfigError('mixedPrecision needs a model with namedParameters() (a Module)');
      castFrozenParameters(named as HasNamedParameters, mp.dtype);
      if (this.compute === 'f16') {
        this.rangeChecked = checkF16Range(named as HasNamedParameters);
        this.rangeChecked.catch(() => {}); // reported by fit() / evaluate(), not as an unhandled rejection
      }
    }
    const scaling = mp && (mp.lossScaling ?? (mp.dtype === 'f16' || this.compute === 'f16'));
    this.scaler = opts.scaler ?? (scaling ? new GradScaler(this.ctx) : undefined);
    const asModule = opts.model as unknown as Module;
    this.loraRun = typeof asModule.namedModules === 'function' && loraModules(asModule).size > 0;
    this.lora = opts.lora ?? this.loraRun;
  }

  /** Request a stop at the next step boundary (a checkpoint is saved when `checkpointDir` is set). */
  stop(reason: StopReason = 'callback'): void {
    this.stopReason ??= reason;
  }

  private seed(shape: readonly number[], value: number): Tensor {
    const key = `${shape.join(',')}:${value}`;
    let s = this.seeds.get(key);
    if (!s) this.seeds.set(key, (s = Tensor.full(this.ctx, shape, value).keep()));
    return s;
  }

  private lossOf(batch: Batch, ids: Tensor): Tensor {
    const loss = autocast(this.compute, () =>
      this.opts.computeLoss ? this.opts.computeLoss(batch, ids, this.model) : this.model.loss(ids, batch.labels, { logits: false, hostIds: batch.inputIds }).loss,
    );
    if (loss.size !== 1) throw new TrainerError(`the loss must have one element, got shape [${loss.shape.join(', ')}]`);
    return loss;
  }

  /** Encode one optimizer step on the GPU (no read-back); returns its stats tensor [loss, gradNorm, scale, foundInf]. */
  private encodeStep(): InFlight {
    const ctx = this.ctx;
    const t0 = performance.now();
    const lr = this.optimizer.paramGroups[0]?.lr ?? 0;
    this.optimizer.zeroGrad();
    const stats = fill(ctx, [4], 0);
    try {
      const f = this.encodeInto(stats, lr);
      f.hostTime = (performance.now() - t0) / 1000;
      return f;
    } catch (e) {
      ctx.release(stats.buffer);
      throw e;
    }
  }

  private encodeInto(stats: DeviceTensor, lr: number): InFlight {
    const ctx = this.ctx;
    const acc = this.accumulation;
    const lossAcc = acc > 1 ? fill(ctx, [1], 0) : null;
    let tokens = 0;
    let epoch = this.data.epoch;
    for (let m = 0; m < acc; m++) {
      const batch = this.data.next();
      epoch = batch.epoch;
      tokens += batch.batch * batch.seqLen;
      const ids = Tensor.fromArray(ctx, batch.inputIds, [batch.batch, batch.seqLen], { dtype: 'i32' });
      try {
        tidy(() => {
          const loss = this.lossOf(batch, ids);
          const g = this.scaler ? this.scaler.lossGradient(loss, 1 / acc) : this.seed(loss.shape, 1 / acc);
          loss.backward(g);
          if (lossAcc) accumulate(ctx, lossAcc, loss.data, 1 / acc);
          else ctx.copy(loss.data.buffer, stats.buffer, 4, 0, 0);
        });
      } finally {
        ids.dispose();
      }
    }
    if (lossAcc) {
      ctx.copy(lossAcc.buffer, stats.buffer, 4, 0, 0);
      ctx.release(lossAcc.buffer);
    }
    if (this.scaler) {
      this.scaler.unscaleAndCheck(this.params);
      ctx.copy(this.scaler.state.buffer, stats.buffer, 4, 0, 8);
      ctx.copy(this.scaler.foundInf.buffer, stats.buffer, 4, 0, 12);
    }
    const clip = this.maxGradNorm !== null || (this.opts.logGradNorm ?? true) ? clipGradNorm(this.params, this.maxGradNorm ?? Infinity) : null;
    if (clip) ctx.copy(clip.buffer, stats.buffer, 4, 4, 4);
    else ctx.write(stats.buffer, new Float32Array([NaN]), 4);
    this.optimizer.step({ gradScale: this.maxGradNorm !== null ? clip! : undefined, skip: this.scaler?.skip });
    this.scaler?.update();
    this.scheduler?.step();
    if (clip) ctx.release(clip.buffer);
    this.optimizer.zeroGrad();
    this.step++;
    return { step: this.step, stats, read: ctx.read(stats.buffer, 16), lr, tokens, epoch, hostTime: 0 };
  }

  private elapsed(): number {
    return this.elapsedBefore + (performance.now() - this.startTime) / 1000;
  }

  private async runCallbacks(kind: 'onStep' | 'onEval', m: StepMetrics | EvalMetrics): Promise<void> {
    for (const c of this.callbacks) {
      const fn = c[kind] as ((m: StepMetrics | EvalMetrics, t: Trainer) => CallbackResult) | undefined;
      if (!fn) continue;
      const r = await fn.call(c, m, this);
      if (r === 'stop' || r === false) this.stop('callback');
    }
  }

  /** Read a step's stats back, log them and run the step callbacks. */
  private async finishStep(f: InFlight): Promise<StepMetrics> {
    const buf = await f.read;
    this.ctx.release(f.stats.buffer);
    const v = new Float32Array(buf);
    const now = performance.now();
    const stepTime = (now - this.lastDone) / 1000;
    this.lastDone = now;
    const m: StepMetrics = {
      kind: 'train',
      step: f.step,
      loss: v[0]!,
      lr: f.lr,
      gradNorm: v[1]!,
      tokensPerSec: stepTime > 0 ? f.tokens / stepTime : 0,
      elapsed: this.elapsed(),
      stepTime,
      hostTime: f.hostTime,
      epoch: f.epoch,
    };
    if (this.scaler) {
      m.lossScale = v[2]!;
      m.skipped = new Uint32Array(buf)[3] !== 0;
    }
    this.lastLoss = m.loss;
    this.metrics?.write(m as unknown as Record<string, unknown>);
    const p: ProgressInfo = {
      step: m.step,
      maxSteps: this.opts.maxSteps,
      loss: m.loss,
      lr: m.lr,
      tokensPerSec: m.tokensPerSec,
      elapsed: m.elapsed,
      eta: m.stepTime * Math.max(0, this.opts.maxSteps - m.step),
    };
    if (typeof this.opts.progress === 'function') this.opts.progress(p);
    else if (this.opts.progress && (now - this.lastProgress > 1000 || m.step === this.opts.maxSteps)) {
      this.lastProgress = now;
      process.stderr.write(
        `step ${p.step}/${p.maxSteps}  loss ${p.loss.toFixed(4)}  lr ${p.lr.toExponential(2)}  ` +
          `${Math.round(p.tokensPerSec)} tok/s  elapsed ${fmtTime(p.elapsed)}  eta ${fmtTime(p.eta)}\n`,
      );
    }
    for (const c of this.callbacks) c.onProgress?.(p, this);
    await this.runCallbacks('onStep', m);
    const bad = !m.skipped && (!Number.isFinite(m.loss) || (this.gradNormComputed && !Number.isFinite(m.gradNorm)));
    this.nonFinite = bad ? this.nonFinite + 1 : 0;
    if (this.nonFinite >= this.maxNonFinite)
      throw new TrainerError(
        `the loss was ${m.loss.toPrecision(5)} (gradient norm ${m.gradNorm.toPrecision(5)}) for ${this.nonFinite} consecutive steps (steps ${m.step - this.nonFinite + 1}-${m.step}): ` +
          `training stopped${this.lastCheckpoint ? `; the last checkpoint written is ${this.lastCheckpoint}` : ''} (try a lower learning rate)`,
      );
    return m;
  }

  /** True when every trainable weight is finite (one reduction per weight on the GPU, one read-back). */
  private async weightsFinite(): Promise<boolean> {
    const ctx = this.ctx;
    const acc = fill(ctx, [1], 0);
    try {
      // 0 * w is 0 for every finite w and NaN for inf or NaN: the sum is 0 exactly when all are finite
      noGrad(() => tidy(() => {
        for (const p of this.params) accumulate(ctx, acc, sum(scale(p, 0)).data, 1);
      }));
      return new Float32Array(await ctx.read(acc.buffer, 4))[0] === 0;
    } finally {
      ctx.release(acc.buffer);
    }
  }

  /**
   * One pass over the evaluation data without gradients: the loss averaged over every target token (the
   * positions whose shifted label is not -100) and its perplexity.
   */
  async evaluate(): Promise<EvalMetrics> {
    const src = this.opts.evalData;
    if (!src) throw new ConfigError('evaluate() needs evalData');
    await this.rangeChecked;
    const loader = isLoader(src) ? new DataLoader(src.dataset, src.batchSize, { prefetch: 0 }) : new DataLoader(src, this.data.batchSize, { prefetch: 0 });
    const ctx = this.ctx;
    this.model.eval?.();
    const sum = fill(ctx, [1], 0);
    let tokens = 0;
    let batches = 0;
    try {
      for (const batch of loader) {
        if (this.opts.evalBatches && batches >= this.opts.evalBatches) break;
        batches++;
        const n = countTargets(batch);
        if (!n) continue;
        tokens += n;
        const ids = Tensor.fromArray(ctx, batch.inputIds, [batch.batch, batch.seqLen], { dtype: 'i32' });
        noGrad(() => tidy(() => accumulate(ctx, sum, this.lossOf(batch, ids).data, n)));
        ids.dispose();
      }
    } finally {
      this.model.train?.(true);
    }
    const total = new Float32Array(await ctx.read(sum.buffer, 4))[0]!;
    ctx.release(sum.buffer);
    const loss = tokens ? total / tokens : NaN;
    const m: EvalMetrics = { kind: 'eval', step: this.step, loss, perplexity: Math.exp(loss), tokens, batches, elapsed: this.startTime ? this.elapsed() : this.elapsedBefore };
    this.lastEval = m;
    return m;
  }

  private async evalAndReport(): Promise<void> {
    const m = await this.evaluate();
    this.metrics?.write(m as unknown as Record<string, unknown>);
    if (this.opts.progress === true)
      process.stderr.write(`eval at step ${m.step}: loss ${m.loss.toFixed(4)}  perplexity ${m.perplexity.toFixed(2)}\n`);
    await this.runCallbacks('onEval', m);
    const es = this.opts.earlyStopping;
    if (es) {
      if (m.loss < this.bestEval - (es.minDelta ?? 0)) {
        this.bestEval = m.loss;
        this.badEvals = 0;
      } else if (++this.badEvals >= es.patience) this.stop('early-stop');
    }
  }

  /** The state a checkpoint holds. */
  private contents(): Omit<CheckpointContents, 'params'> {
    return {
      step: this.step,
      optimizer: this.optimizer,
      scheduler: this.scheduler,
      scaler: this.scaler,
      dataLoader: this.data,
      extra: {
        elapsed: this.startTime ? this.elapsed() : this.elapsedBefore,
        bestEval: Number.isFinite(this.bestEval) ? this.bestEval : null,
        badEvals: this.badEvals,
        lastLoss: Number.isFinite(this.lastLoss) ? this.lastLoss : null,
      },
    };
  }

  /** Write a checkpoint of the current state now (needs `checkpointDir`). */
  async saveCheckpoint(): Promise<string> {
    const root = this.opts.checkpointDir;
    if (!root) throw new ConfigError('saveCheckpoint() needs checkpointDir');
    if (!(await this.weightsFinite()))
      throw new TrainerError(
        `the weights hold NaN or infinite values after step ${this.step} (last loss ${this.lastLoss.toPrecision(5)}): training stopped without writing that checkpoint` +
          `${this.lastCheckpoint ? `; the last finite checkpoint is ${this.lastCheckpoint}` : ''} (try a lower learning rate)`,
      );
    const so = {
      keepLast: this.opts.keepLast ?? 3,
      onPhase: async (phase: CheckpointPhase, dir: string) => {
        for (const c of this.callbacks) await c.onCheckpointPhase?.(phase, dir, this);
      },
    };
    const path = this.lora
      ? await saveLoraCheckpoint(root, { ...this.contents(), model: this.model as unknown as Module }, so)
      : await saveCheckpoint(root, { ...this.contents(), params: this.model }, so);
    this.lastCheckpoint = path;
    this.savedStep = this.step;
    for (const c of this.callbacks) await c.onCheckpoint?.(path, this.step, this);
    return path;
  }

  /**
   * Restore weights, optimizer, scheduler, scaler, data position and counters from a checkpoint (`path`: a
   * checkpoint directory or a root; default `checkpointDir`). Returns the step restored, or null when the root
   * has no checkpoint yet.
   */
  async resume(path?: string): Promise<number | null> {
    const root = path ?? this.opts.checkpointDir;
    if (!root) throw new ConfigError('resume() needs a path or checkpointDir');
    if (!path && !(await findLatestCheckpoint(root))) return null;
    let extra: Record<string, unknown> | null;
    let step: number;
    if (this.lora) {
      const ck = await loadLoraCheckpoint(root);
      await ck.restore({ model: this.model as unknown as Module, optimizer: this.optimizer, scheduler: this.scheduler, scaler: this.scaler, dataLoader: this.data });
      extra = ck.extra;
      step = ck.step;
    } else {
      const ck = await loadCheckpoint(root);
      ck.restore({ params: this.model, optimizer: this.optimizer, scheduler: this.scheduler, scaler: this.scaler, dataLoader: this.data });
      extra = ck.extra;
      step = ck.step;
    }
    this.step = step;
    this.savedStep = step;
    this.elapsedBefore = typeof extra?.elapsed === 'number' ? extra.elapsed : 0;
    this.bestEval = typeof extra?.bestEval === 'number' ? extra.bestEval : Infinity;
    this.badEvals = typeof extra?.badEvals === 'number' ? extra.badEvals : 0;
    this.lastLoss = typeof extra?.lastLoss === 'number' ? extra.lastLoss : NaN;
    return step;
  }

  /**
   * Train until `maxSteps` (or an early stop, a callback's stop, an interrupt). With `resume: true` the newest
   * checkpoint under `checkpointDir` is loaded first (when there is one); a string resumes from that path.
   */
  async fit(opts: { resume?: boolean | string } = {}): Promise<FitResult> {
    const o = this.opts;
    await this.rangeChecked;
    let resumedFrom: number | null = null;
    if (opts.resume) resumedFrom = await this.resume(typeof opts.resume === 'string' ? opts.resume : undefined);
    this.stopReason = null;
    this.metrics = o.metricsFile ? new MetricsWriter(o.metricsFile, { keepUpToStep: this.step }) : null;
    const signals = o.signals === false ? null : (o.signals ?? processSignals());
    let interrupts = 0;
    this.interruptSignal = undefined;
    this.nonFinite = 0;
    const unsubscribe = signals?.subscribe((sig) => {
      if (++interrupts > 1) signals.forceExit?.(sig);
      this.interruptSignal ??= sig;
      this.stop('interrupted');
    });
    this.startTime = performance.now();
    this.lastDone = this.startTime;
    this.model.train?.(true);
    const pipeline = o.pipeline ?? true;
    let inFlight: InFlight | null = null;
    const boundary = (s: number) =>
      s >= o.maxSteps || (!!o.evalEvery && s % o.evalEvery === 0) || (!!o.saveEvery && s % o.saveEvery === 0);
    // Runs of a model with LoRA modules (checkpoints hold the trainable weights only, whatever their format): under
    // f16 compute a frozen bf16 LM head in f16 (what the loss rounded it to every step), and a frozen token embedding
    // on the host (a step reads a few thousand of its rows), for the run; both put back as they were when it ends.
    // The buffers they leave are not kept by the pool.
    const restore: (() => void)[] = [];
    try {
      if (this.loraRun) {
        restore.push(await f16OperandsForRun(this.model, this.compute));
        const emb = await this.model.offloadEmbedding?.();
        if (emb) restore.push(emb);
        this.ctx.trimPool();
      }
      if (o.f16Images ?? true) restore.push(await f16ImagesForRun(this.model, this.compute));
      while (this.step < o.maxSteps && !this.stopReason) {
        const f = this.encodeStep();
        const prev = inFlight;
        inFlight = f;
        if (prev) await this.finishStep(prev);
        if (!pipeline || boundary(f.step) || this.stopReason) {
          inFlight = null;
          await this.finishStep(f);
          if (o.evalEvery && f.step % o.evalEvery === 0 && f.step < o.maxSteps) await this.evalAndReport();
          if (o.saveEvery && f.step % o.saveEvery === 0) await this.saveCheckpoint();
        }
      }
      const last = inFlight;
      inFlight = null;
      if (last) await this.finishStep(last);
      if (o.evalData && (this.step >= o.maxSteps || this.stopReason === 'early-stop') && this.lastEval?.step !== this.step) await this.evalAndReport();
      if (o.checkpointDir && this.savedStep !== this.step) await this.saveCheckpoint();
    } finally {
      if (inFlight) {
        await inFlight.read.catch(() => undefined);
        this.ctx.release(inFlight.stats.buffer);
      }
      for (const r of restore) r();
      unsubscribe?.();
      this.metrics?.close();
      this.metrics = null;
      this.elapsedBefore = this.elapsed();
      this.startTime = 0;
    }
    return {
      step: this.step,
      reason: this.stopReason ?? 'max-steps',
      loss: this.lastLoss,
      eval: this.lastEval,
      checkpoint: this.lastCheckpoint,
      resumedFrom,
      ...(this.stopReason === 'interrupted' && this.interruptSignal ? { signal: this.interruptSignal } : {}),
    };
  }

  /** Release what the Trainer allocated (seed tensors, a scaler it created). */
  dispose(): void {
    for (const s of this.seeds.values()) s.dispose();
    this.seeds.clear();
    if (this.scaler && !this.opts.scaler) this.scaler.dispose();
  }
}

/** Targets of a batch after the model's label shift: positions t >= 1 whose label is not ignored. */
export function countTargets(b: Batch): number {
  let n = 0;
  for (let r = 0; r < b.batch; r++) for (let t = 1; t < b.seqLen; t++) if (b.labels[r * b.seqLen + t] !== IGNORE_INDEX) n++;
  return n;
}

function fmtTime(s: number): string {
  if (!Number.isFinite(s)) return '?';
  const m = Math.floor(s / 60);
  return m ? `${m}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${s.toFixed(1)}s`;
}
