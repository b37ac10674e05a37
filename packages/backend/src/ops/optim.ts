// Optimizer and gradient-management kernels: AdamW / SGD steps (per tensor and multi-tensor over flat arenas),
// global gradient norm with PyTorch's clip coefficient, loss-scale unscale/check/update, all GPU-resident.
export type { GpuStepControls } from './optim/common';
export {
  OPTIM_CHUNK,
  createSegmentTable,
  updateSegmentTable,
  releaseSegmentTable,
  type ArenaSegment,
  type SegmentHyper,
  type SegmentTable,
} from './optim/table';
export { createStepState, advanceStep, type AdvanceStepOptions } from './optim/step';
export { adamwStep, adamwStepMulti, type AdamWHyper, type AdamWOptions, type AdamWMultiOptions } from './optim/adamw';
export { sgdStep, sgdStepMulti, type SGDHyper, type SGDOptions, type SGDMultiOptions } from './optim/sgd';
export { gradNorm, type GradNormOptions, type ArenaPiece } from './optim/grad-norm';
export {
  scaleInPlace,
  unscaleAndCheck,
  createFlag,
  clearFlag,
  createLossScaleState,
  readLossScaleState,
  updateLossScale,
  type LossScaleOptions,
} from './optim/loss-scale';
