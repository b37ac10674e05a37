export * from './config';
export { Module, type LoadReport } from './module';
export { Linear, Embedding, RMSNorm, type InitOptions } from './layers';
export {
  LlamaForCausalLM,
  LlamaAttention,
  LlamaMLP,
  LlamaDecoderLayer,
  shiftLabels,
  type ModelOptions,
  type CausalLMOutput,
  type Projection,
} from './llama';
export { KVCache } from './kv-cache';
export { generate, generateStream, sampleToken, type GenerateOptions } from './generate';
export { applyLora, mergeLora, unmergeLora, loraModules, LoraLinear, type LoraConfig } from './lora';
export { QuantLinear, quantizeLinears, dequantizeLinears, quantizedLinears, type QuantizeLinearsOptions } from './quant-linear';
