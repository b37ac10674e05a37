import { ConfigError } from '@rusty/backend';
import { z } from 'zod';
import { LINEAR_TARGETS, type Architecture } from './architecture';
import {
  allFull,
  baseFields,
  baseSchema,
  baseToJSON,
  parseRope,
  refuseCommon,
  ropeSchema,
  ropeToJSON,
  validate,
  type ModelConfig,
  type RawRope,
} from './config';
import { PreNormDecoderLayer } from './decoder-layer';

/** The rope block of a config: the newer `rope_parameters`, else the older `rope_scaling` (+ `rope_theta`). */
export function pickRope(c: { rope_parameters?: RawRope | null; rope_scaling?: RawRope | null }): [RawRope | null, string] {
  return c.rope_parameters ? [c.rope_parameters, 'rope_parameters'] : [c.rope_scaling ?? null, 'rope_scaling'];
}

/** Check HF's `hidden_act`. */
export function requireAct(act: string, want: string, arch: string, source: string): void {
  if (act !== want) throw new ConfigError(`${source}: field 'hidden_act' is '${act}'; ${arch} models use '${want}'`);
}

/** The fields of a plain Llama-style model that its variants (Mistral, Qwen) keep unless they say otherwise. */
export const LLAMA_STYLE = {
  localRope: null,
  mlpBias: false,
  hiddenAct: 'silu',
  qkNorm: false,
  normWeightOffset: 0,
  embedScale: 1,
  attnScale: null,
  attnSoftcap: null,
  finalSoftcap: null,
} as const satisfies Partial<ModelConfig>;

const schema = baseSchema({ rmsNormEps: 1e-6, maxPositionEmbeddings: 2048, tieWordEmbeddings: false }).extend({
  rope_parameters: ropeSchema.nullish(),
  attention_bias: z.boolean().default(false),
  mlp_bias: z.boolean().default(false),
  hidden_act: z.string().default('silu'),
});

/** Llama 1, 2, 3, 3.1, 3.2 (and SmolLM, TinyLlama, ...): HF `LlamaForCausalLM`. */
export const llama: Architecture = {
  modelType: 'llama',
  className: 'LlamaForCausalLM',
  loraTargets: LINEAR_TARGETS,
  parseConfig(raw, source): ModelConfig {
    refuseCommon(raw, source);
    const c = validate(schema, raw, source);
    requireAct(c.hidden_act, 'silu', 'Llama', source);
    const [rp, field] = pickRope(c);
    return {
      ...baseFields(c, source),
      ...LLAMA_STYLE,
      modelType: 'llama',
      rope: parseRope(rp, c.rope_theta ?? 10000, field, source),
      qkvBias: c.attention_bias,
      oBias: c.attention_bias,
      mlpBias: c.mlp_bias,
      slidingWindow: null,
      layerTypes: allFull(c.num_hidden_layers),
    };
  },
  toJSON: (c) => ({
    architectures: ['LlamaForCausalLM'],
    ...baseToJSON(c),
    rope_theta: c.rope.theta,
    rope_parameters: ropeToJSON(c.rope),
    attention_bias: c.qkvBias,
    mlp_bias: c.mlpBias,
    hidden_act: 'silu',
  }),
  createLayer: (ctx, c, init, i) => new PreNormDecoderLayer(ctx, c, init, i),
  layerParameterShapes: (c) => PreNormDecoderLayer.parameterShapes(c),
};
