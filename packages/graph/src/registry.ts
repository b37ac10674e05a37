import { ConfigError } from '@rusty/backend';
import type { Architecture } from './architecture';
import { rawConfig, type ModelConfig } from './config';
import { gemma3 } from './gemma3';
import { llama } from './llama';
import { mistral } from './mistral';
import { qwen2 } from './qwen2';
import { qwen3 } from './qwen3';

/**
 * Every supported architecture. Adding one is a new file (its `Architecture`) and a line here; the loader,
 * the CLI (`--targets all`, shape checks, inspect, save) and the model read everything from it.
 */
export const ARCHITECTURES: readonly Architecture[] = [llama, mistral, qwen2, qwen3, gemma3];

const byType = new Map(ARCHITECTURES.map((a) => [a.modelType as string, a]));
const byClass = new Map(ARCHITECTURES.map((a) => [a.className, a]));
const supported = () => ARCHITECTURES.map((a) => `${a.className} (${a.modelType})`).join(', ');

/** The architecture of a parsed config. */
export function architectureOf(c: Pick<ModelConfig, 'modelType'>): Architecture {
  const a = byType.get(c.modelType);
  if (!a) throw new ConfigError(`model type '${c.modelType}' is not supported; Rusty supports ${supported()}`);
  return a;
}

/**
 * Parse and validate an HF `config.json` (text or object) of any supported architecture, picked by
 * `model_type` (or by `architectures` when it is absent; a config with neither is read as Llama). Both rope
 * forms are accepted (top-level `rope_theta` + `rope_scaling`, and `rope_parameters`). An unsupported
 * architecture, activation, rope type or any field that would change the math fails with a `ConfigError`
 * naming the field: nothing is loaded and run wrong.
 */
export function parseModelConfig(json: string | unknown, source = 'config.json'): ModelConfig {
  const raw = rawConfig(json, source);
  const archs = raw.architectures;
  if (archs !== undefined && archs !== null && (!Array.isArray(archs) || archs.some((a) => typeof a !== 'string')))
    throw new ConfigError(`${source}: field 'architectures' must be a list of class names`);
  const classes = (archs ?? []) as string[];
  let arch: Architecture | undefined;
  if (raw.model_type !== undefined) {
    arch = byType.get(String(raw.model_type));
    if (!arch) {
      const hint = raw.model_type === 'gemma3' ? " (the multimodal Gemma 3; its text model is 'gemma3_text')" : '';
      throw new ConfigError(`${source}: field 'model_type' is '${String(raw.model_type)}'${hint}; Rusty supports ${supported()}`);
    }
    if (classes.length && !classes.includes(arch.className))
      throw new ConfigError(
        `${source}: field 'architectures' is ${JSON.stringify(classes)}; a '${arch.modelType}' model must be ${arch.className}`,
      );
  } else if (classes.length) {
    arch = classes.map((c) => byClass.get(c)).find((a) => a);
    if (!arch) throw new ConfigError(`${source}: field 'architectures' is ${JSON.stringify(classes)}; Rusty supports ${supported()}`);
  } else arch = byType.get('llama')!;
  return arch.parseConfig(raw, source);
}

/** The HF `config.json` object of a config (what transformers' `from_pretrained` reads back). */
export function modelConfigToJSON(c: ModelConfig): Record<string, unknown> {
  return architectureOf(c).toJSON(c);
}

/** HF parameter names and shapes of the whole model for a config, in the model's registration order. */
export function parameterShapes(c: ModelConfig): Map<string, number[]> {
  const a = architectureOf(c);
  const m = new Map<string, number[]>();
  m.set('model.embed_tokens.weight', [c.vocabSize, c.hiddenSize]);
  const layer = a.layerParameterShapes(c);
  for (let i = 0; i < c.numHiddenLayers; i++) for (const [n, s] of layer) m.set(`model.layers.${i}.${n}`, s);
  m.set('model.norm.weight', [c.hiddenSize]);
  if (!c.tieWordEmbeddings) m.set('lm_head.weight', [c.vocabSize, c.hiddenSize]);
  return m;
}

/** The module names `--targets all` adapts with LoRA for this config's architecture. */
export function loraTargets(c: ModelConfig): readonly string[] {
  return architectureOf(c).loraTargets;
}

/** @deprecated The Llama-era name of {@link parseModelConfig}; it reads every supported architecture. */
export const parseLlamaConfig = parseModelConfig;
/** @deprecated The Llama-era name of {@link modelConfigToJSON}. */
export const llamaConfigToJSON = modelConfigToJSON;
