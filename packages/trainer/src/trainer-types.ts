// The Trainer's options, callbacks and reports.
import type { Trainer } from './trainer';
import type { ComputeDtype, Tensor } from '@rusty/autograd';
import type { CheckpointPhase, Stateful } from './checkpoint/checkpoint';
import type { Batch, DataLoader } from './data/dataloader';
import type { Dataset } from './data/dataset';
import type { GradScaler, SteppableOptimizer } from './grad-scaler';
import type { HalfDType } from './mixed-precision';
import type { SignalSource } from './signals';

/** What the Trainer trains: `LlamaForCausalLM` fits (HF loss with label shift inside `loss`). */
export interface TrainerModel {
  /** The Trainer passes `{ logits: false }`: it needs the loss only (a CausalLM then fuses its LM head with the
   *  loss, never materialising the [tokens, vocab] logits); and `hostIds`, the input ids as on the host. */
  loss(inputIds: Tensor, labels: ArrayLike<number>, opts?: { logits?: false; hostIds?: ArrayLike<number> }): { loss: Tensor };
  trainableParameters(): [string, Tensor][];
  /** For a LoRA run: a frozen token embedding kept on the host until the returned function puts it back
   *  (`CausalLM.offloadEmbedding`); null when there is none to keep there. */
  offloadEmbedding?(): Promise<(() => void) | null>;
  train?(on?: boolean): unknown;
  eval?(): unknown;
}

/** An LR scheduler (`LRScheduler` of `@rusty/autograd`). */
export interface Scheduler extends Stateful {
  step(): void;
}

/** One record per optimizer step (also the lines of the metrics JSONL). */
export interface StepMetrics {
  kind: 'train';
  /** Optimizer steps done, this one included (1-based). */
  step: number;
  /** Mean of the micro-batch losses of this step (unscaled). */
  loss: number;
  /** Learning rate this step used (first parameter group). */
  lr: number;
  /** Global L2 norm of the gradients before clipping (unscaled; NaN with `logGradNorm: false` and no clipping). */
  gradNorm: number;
  /** Input tokens per second over this step (padding included). */
  tokensPerSec: number;
  /** Seconds since training started (across resumes). */
  elapsed: number;
  /** Seconds this step took. */
  stepTime: number;
  /** Seconds the host spent encoding this step (data, JavaScript, command encoding; the GPU works meanwhile on
   *  the step before). Below `stepTime`, the GPU is the limit. */
  hostTime: number;
  /** Data epoch the step's last batch came from. */
  epoch: number;
  /** Loss scale used (with a GradScaler). */
  lossScale?: number;
  /** The step found inf/NaN gradients and was skipped (with a GradScaler). */
  skipped?: boolean;
}

/** Result of an evaluation pass. */
export interface EvalMetrics {
  kind: 'eval';
  step: number;
  /** Mean loss over every target token of the evaluation data. */
  loss: number;
  /** exp(loss). */
  perplexity: number;
  /** Target tokens evaluated. */
  tokens: number;
  batches: number;
  elapsed: number;
}

/** Progress report (see `TrainerOptions.progress`). */
export interface ProgressInfo {
  step: number;
  maxSteps: number;
  loss: number;
  lr: number;
  tokensPerSec: number;
  elapsed: number;
  /** Estimated seconds left. */
  eta: number;
}

/** Return `'stop'` (or `false`) from a callback to end training after the current step. */
export type CallbackResult = void | boolean | 'stop' | Promise<void | boolean | 'stop'>;

export interface TrainerCallbacks {
  onStep?(m: StepMetrics, trainer: Trainer): CallbackResult;
  onEval?(m: EvalMetrics, trainer: Trainer): CallbackResult;
  /** After a checkpoint is committed. */
  onCheckpoint?(path: string, step: number, trainer: Trainer): void | Promise<void>;
  /** During a checkpoint save, after each phase (see `CheckpointPhase`); a returned promise is awaited. */
  onCheckpointPhase?(phase: CheckpointPhase, dir: string, trainer: Trainer): void | Promise<void>;
  onProgress?(p: ProgressInfo, trainer: Trainer): void;
}

/**
 * Mixed-precision settings, as PyTorch AMP: frozen weights stored in 16 bits (`dtype`), trainable weights kept as
 * f32 master weights, the projections and attention computed on f16 inputs with f32 accumulation (`compute`),
 * dynamic loss scaling keeping the f16 gradients in range (`lossScaling`).
 */
export interface MixedPrecisionOptions {
  /** Storage of the frozen weights: `'f16'` (f32 and bf16 weights rounded to f16, the format the f16 products
   *  read without a cast) or `'bf16'` (f32 weights rounded to bf16, a bf16 checkpoint kept as it is; each
   *  product rounds its weight to f16 as it runs, the backward rounds it again instead of keeping a copy). */
  dtype: HalfDType;
  /** Precision of the projections and attention (the `autocast` scope the Trainer's forward runs in). Default
   *  `'f16'`: f16 inputs, f32 accumulation (tensor cores where the adapter has subgroup matrices), norms,
   *  softmax, losses and reductions in f32; before the first step every weight is checked to lie within f16's
   *  range (a `ConfigError` names those beyond it). `'f32'`: only the storage of the frozen weights changes. */
  compute?: ComputeDtype;
  /** Use a GradScaler. Default: true with f16 compute or f16 storage (as PyTorch AMP for float16), false for bf16
   *  storage with f32 compute. */
  lossScaling?: boolean;
}

export interface TrainerOptions {
  model: TrainerModel;
  optimizer: SteppableOptimizer;
  /** Training batches (epochs roll over by themselves). */
  data: DataLoader;
  /** Optimizer steps to train to (a resumed run continues to the same total). */
  maxSteps: number;
  scheduler?: Scheduler;
  /** Micro-batches per optimizer step (gradients are averaged). Default 1. */
  gradientAccumulationSteps?: number;
  /** Clip the global gradient norm to this (PyTorch `clip_grad_norm_`, on the GPU); null: no clipping. Default 1.0. */
  maxGradNorm?: number | null;
  /** Compute the gradient norm for the metrics when not clipping (one pass over the gradients). Default true. */
  logGradNorm?: boolean;
  /** Evaluation data: a dataset (batched like `data`) or a loader. */
  evalData?: Dataset | DataLoader;
  /** Evaluate every N steps (and at the end). Default: only at the end. */
  evalEvery?: number;
  /** At most this many evaluation batches per pass. Default all. */
  evalBatches?: number;
  /** Append one JSON object per step (and per evaluation) to this file. */
  metricsFile?: string;
  /** Root of the checkpoints (`checkpoint-<step>` directories and the `latest` pointer). */
  checkpointDir?: string;
  /** Save every N steps. Default: only at the end and on interrupt. */
  saveEvery?: number;
  /** Checkpoints to keep. Default 3. */
  keepLast?: number;
  /** Save the weights as a PEFT adapter (default: when the model has LoRA modules). */
  lora?: boolean;
  /** Mixed precision (see {@link MixedPrecisionOptions}): `'f16'` or `'bf16'` is `{ dtype, compute: 'f16' }`, 16-bit
   *  frozen weights, f16 compute and loss scaling; the trainable weights stay f32. */
  mixedPrecision?: HalfDType | MixedPrecisionOptions;
  /** Under f32 compute, keep the exact f16 image of every frozen f32 weight whose values allow one (a 16-bit
   *  checkpoint loaded in f32) for the run, so that its products run on tensor cores with nothing rounded (2 bytes
   *  per such parameter while the run lasts; only where the adapter has tensor cores). Default true; false keeps
   *  the portable f32 kernels (and the memory). */
  f16Images?: boolean;
  /** A loss scaler (created by `mixedPrecision` 'f16' when absent). */
  scaler?: GradScaler;
  callbacks?: TrainerCallbacks | TrainerCallbacks[];
  /** Stop when the evaluation loss has not improved by `minDelta` for `patience` evaluations. */
  earlyStopping?: { patience: number; minDelta?: number };
  /** Interrupt source (default: this process's SIGINT/SIGTERM); false: none. */
  signals?: SignalSource | false;
  /** true: a progress line on stderr (at most one a second); a function: called every step. */
  progress?: boolean | ((p: ProgressInfo) => void);
  /** Replace the loss (default `model.loss(inputIds, batch.labels).loss`). Must return a one-element tensor. */
  computeLoss?: (batch: Batch, inputIds: Tensor, model: TrainerModel) => Tensor;
  /**
   * Encode step N+1 while the GPU runs step N (default true): the host never waits for a read-back. Step
   * callbacks then run one step late, so a stop they request takes effect after the step in flight.
   */
  pipeline?: boolean;
  /**
   * Without a loss scaler, stop with a `TrainerError` after this many consecutive steps whose loss or gradient
   * norm is NaN or infinite (default 3). From the first such step on no checkpoint is written, so the newest
   * checkpoint is the last finite one.
   */
  maxNonFiniteSteps?: number;
}

/** Why `fit()` returned. */
export type StopReason = 'max-steps' | 'early-stop' | 'callback' | 'interrupted';

export interface FitResult {
  /** Steps done in total. */
  step: number;
  reason: StopReason;
  /** Loss of the last step. */
  loss: number;
  /** The last evaluation, if any. */
  eval: EvalMetrics | null;
  /** The last checkpoint written, if any. */
  checkpoint: string | null;
  /** Step the run resumed from (null for a fresh start). */
  resumedFrom: number | null;
  /** The signal that interrupted the run ('SIGINT', 'SIGTERM', ...), when `reason` is 'interrupted' by one. */
  signal?: string;
}

