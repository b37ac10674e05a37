// @rusty/trainer: data pipeline, training loop, mixed precision and loss scaling, crash-safe checkpoints.
export { DataError, CheckpointError, TrainerError, RunLockError } from './errors';
export { Rng } from './rng';
export { IGNORE_INDEX, SubsetDataset, splitDataset, type Dataset, type Example, type SplitOptions } from './data/dataset';
export { packDocuments, type PackOptions, type PackStats, type Packed, type TokenizedDocument } from './data/packing';
export { globToRegExp, matchGlob, filterPaths } from './data/glob';
export {
  tokenizeCorpus,
  tokenizerHash,
  tokenizerSpecialIds,
  listCorpusFiles,
  defaultCacheDir,
  type TextTokenizer,
  type CorpusOptions,
  type CorpusInfo,
  type TokenizedCorpus,
} from './data/corpus';
export { TextDataset, type TextCorpusOptions } from './data/text-dataset';
export { DataLoader, type Batch, type DataLoaderOptions, type DataLoaderState } from './data/dataloader';
export { GradScaler, type GradScalerOptions, type GradScalerState, type SteppableOptimizer } from './grad-scaler';
export { castFrozenParameters, checkF16Range, F16_MAX, type HalfDType, type HasNamedParameters, type CastReport } from './mixed-precision';
export {
  saveCheckpoint,
  loadCheckpoint,
  findLatestCheckpoint,
  listCheckpoints,
  checkpointDirName,
  LATEST_FILE,
  STATE_FILE,
  WEIGHTS_FILE,
  OPTIMIZER_FILE,
  type CheckpointContents,
  type CheckpointPhase,
  type SaveCheckpointOptions,
  type LoadedCheckpoint,
  type RestoreTargets,
  type NamedTensors,
  type Stateful,
} from './checkpoint/checkpoint';
export {
  saveLoraCheckpoint,
  loadLoraCheckpoint,
  ADAPTER_DIR,
  type LoraCheckpointContents,
  type LoadedLoraCheckpoint,
} from './checkpoint/lora';
export {
  acquireRunLock,
  checkRunLock,
  readRunLock,
  processAlive,
  RUN_LOCK_FILE,
  type RunLock,
  type RunLockHolder,
} from './checkpoint/run-lock';
export { MetricsWriter, readMetrics } from './metrics';
export { processSignals, ManualSignals, type SignalSource } from './signals';
export {
  Trainer,
  countTargets,
  type TrainerOptions,
  type TrainerModel,
  type TrainerCallbacks,
  type CallbackResult,
  type Scheduler,
  type StepMetrics,
  type EvalMetrics,
  type ProgressInfo,
  type FitResult,
  type StopReason,
  type MixedPrecisionOptions,
} from './trainer';
