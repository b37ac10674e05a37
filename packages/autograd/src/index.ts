export { Tensor, AutogradError, type TensorOptions } from './tensor';
export { backward } from './engine';
export { defineOp, getOp, registeredOps, runOp, OpError, type OpDef, type Op, type InputMeta, type ForwardResult } from './op';
export { noGrad, tidy, isGradEnabled } from './scope';
export { retain, releaseRef } from './storage';
export { gradcheck, type GradcheckOptions, type GradcheckResult } from './gradcheck';
export { checkpoint } from './checkpoint';
export type { Node } from './node';
export { add, sub, mul, div, scale, neg, exp, log, tanh, sigmoid, silu, square } from './ops/elementwise';
export { reshape, transpose, sum, mean, cast } from './ops/shape';
export { matmul, linear, type LinearOptions } from './ops/matmul';
export { autocast, computeDtype, toCompute, type ComputeDtype } from './ops/autocast';
export { linearCrossEntropy } from './ops/linear-cross-entropy';
export { loraLinear } from './ops/lora-linear';
export { Optimizer, clipGradNorm, type ParamGroup, type ParamGroupInit, type StepControls, type OptimizerState } from './optim/optimizer';
export { gradPieces } from './optim/arena';
export { AdamW, type AdamWOptions } from './optim/adamw';
export { SGD, type SGDOptions } from './optim/sgd';
export {
  LRScheduler,
  ConstantLR,
  LinearWarmup,
  CosineAnnealingLR,
  WarmupCosineScheduler,
  type HasParamGroups,
  type SchedulerState,
} from './optim/schedulers';
export { randn, randu } from './random';
export { attention, type AttentionOpts } from './ops/attention';
export { rmsNorm, addRmsNorm, rope, ropePair, swiglu, geluTanhGate, embedding, crossEntropy, type RmsNormOpts, type GateOptions } from './ops/llm';
export { quantLinear } from './ops/quant-linear';
export { quantLoraLinear } from './ops/quant-lora-linear';
