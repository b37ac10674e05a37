export {
  rmsNorm,
  addRmsNorm,
  addRmsNormBackward,
  rmsNormBackward,
  rmsNormChunks,
  type RmsNormOptions,
  type RmsNormResult,
  type RmsNormBackwardOptions,
} from './llm/rmsnorm';
export {
  rope,
  ropeBackward,
  ropeInvFreq,
  ropeAttentionScaling,
  ropeDim,
  type RopeType,
  type RopeFreqConfig,
  type RopeOptions,
} from './llm/rope';
export { swiglu, swigluFused, swigluBackward, swigluFusedBackward, type SwigluOptions } from './llm/swiglu';
export { geluTanhGate, geluTanhGateFused, geluTanhGateBackward, geluTanhGateFusedBackward } from './llm/gelu-gate';
export { type GatedOptions } from './llm/gated';
export { softmax, softmaxBackward } from './llm/softmax';
export { embedding, embeddingBackward } from './llm/embedding';
export { crossEntropy, crossEntropyCount, type CrossEntropyOptions, type CrossEntropyResult } from './llm/cross-entropy';
