import { z } from 'zod';
import { LINEAR_TARGETS, type Architecture } from './architecture';
import { baseFields, baseSchema, baseToJSON, parseRope, refuseCommon, ropeSchema, ropeToJSON, validate, type ModelConfig } from './config';
import { PreNormDecoderLayer } from './decoder-layer';
import { LLAMA_STYLE, pickRope, requireAct } from './llama';

const schema = baseSchema({ rmsNormEps: 1e-6, maxPositionEmbeddings: 4096 * 32, tieWordEmbeddings: false }).extend({
  rope_parameters: ropeSchema.nullish(),
  hidden_act: z.string().default('silu'),
  // HF MistralConfig's default window is 4096; an explicit null means full attention
  sliding_window: z.number().int().positive().nullable().default(4096),
});

/**
 * Mistral (HF `MistralForCausalLM`): a Llama layer whose every layer attends within `sliding_window` keys
 * (the query's own position included); `sliding_window: null` is full causal attention.
 */
export const mistral: Architecture = {
  modelType: 'mistral',
  className: 'MistralForCausalLM',
  loraTargets: LINEAR_TARGETS,
  parseConfig(raw, source): ModelConfig {
    refuseCommon(raw, source);
    const c = validate(schema, raw, source);
    requireAct(c.hidden_act, 'silu', 'Mistral', source);
    const [rp, field] = pickRope(c);
    const n = c.num_hidden_layers;
    return {
      ...baseFields(c, source),
      ...LLAMA_STYLE,
      modelType: 'mistral',
      rope: parseRope(rp, c.rope_theta ?? 10000, field, source),
      qkvBias: false,
      oBias: false,
      slidingWindow: c.sliding_window,
      layerTypes: Array.from({ length: n }, () => (c.sliding_window === null ? 'full_attention' : 'sliding_attention')),
    };
  },
  toJSON: (c) => ({
    architectures: ['MistralForCausalLM'],
    ...baseToJSON(c),
    rope_theta: c.rope.theta,
    rope_parameters: ropeToJSON(c.rope),
    hidden_act: 'silu',
    sliding_window: c.slidingWindow,
  }),
  createLayer: (ctx, c, init, i) => new PreNormDecoderLayer(ctx, c, init, i),
  layerParameterShapes: (c) => PreNormDecoderLayer.parameterShapes(c),
};
