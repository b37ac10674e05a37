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
  ropePair,
  ropeBackward,
  ropeInvFreq,
  ropeAttentionScaling,
  ropeDim,
  type RopeType,
  type RopeFreqConfig,
  type RopeOptions,
  type RopeStore,
} from './llm/rope';
export {
  swiglu,
  swigluBackward,
  geluTanhGate,
  geluTanhGateBackward,
  type SwigluOptions,
  type GatedOptions,
  type GatedBackwardOptions,
  type GateActivation,
} from './llm/gated';
export { embedding, embeddingBackward } from './llm/embedding';
export { crossEntropy, crossEntropyCount, type CrossEntropyOptions, type CrossEntropyResult } from './llm/cross-entropy';
