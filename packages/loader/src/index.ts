export { SafetensorsError, TokenizerError } from './errors';
export * from './safetensors';
export * from './tokenizer';
export { loadPretrained, type LoadPretrainedOptions, type Pretrained } from './model/pretrained';
export { loadLoraAdapter, saveLoraAdapter, readAdapterConfig, ADAPTER_CONFIG, ADAPTER_WEIGHTS, type AdapterDir } from './model/peft';
export * from './io';
export {
  quantizeAtLoad,
  saveQuantized,
  quantizationOf,
  describeQuantization,
  QUANT_METADATA_KEY,
  type QuantizationMetadata,
  type QuantizeAtLoadOptions,
} from './model/quantize';
