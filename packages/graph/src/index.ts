export * from './config';
export { Module, type LoadReport } from './module';
export { Linear, Embedding, RMSNorm, type InitOptions } from './layers';
export { Attention, type AttentionKernelOptions, type CacheSlot, type Projection } from './attention';
export { GatedMLP } from './mlp';
export { PreNormDecoderLayer } from './decoder-layer';
export { LINEAR_TARGETS, type Architecture, type DecoderLayer } from './architecture';
export { llama } from './llama';
export { mistral } from './mistral';
export { qwen2 } from './qwen2';
export { qwen3 } from './qwen3';
export { gemma3, Gemma3DecoderLayer } from './gemma3';
export {
  ARCHITECTURES,
  architectureOf,
  parseModelConfig,
  modelConfigToJSON,
  parameterShapes,
  loraTargets,
  parseLlamaConfig,
  llamaConfigToJSON,
} from './registry';
export { CausalLM, LlamaForCausalLM, shiftLabels, type ModelOptions, type CausalLMOutput, type LossOptions } from './causal-lm';
export { checkpointSegments, layerSavedRatio } from './checkpoint-segments';
export { KVCache } from './kv-cache';
export { generate, generateStream, sampleToken, type GenerateOptions } from './generate';
export { fusedProjections, fusionSettings } from './fused-projections';
export { applyLora, mergeLora, unmergeLora, loraModules, LoraLinear, type LoraConfig } from './lora';
export { QuantLinear, quantizeLinears, dequantizeLinears, quantizedLinears, packQuantized, type QuantizeLinearsOptions } from './quant-linear';
