import { z } from 'zod';
import { LINEAR_TARGETS, type Architecture } from './architecture';
import {
  baseFields,
  baseSchema,
  baseToJSON,
  parseLayerTypes,
  parseRope,
  refuseCommon,
  ropeSchema,
  ropeToJSON,
  validate,
  type LayerType,
  type ModelConfig,
} from './config';
import { PreNormDecoderLayer } from './decoder-layer';
import { LLAMA_STYLE, pickRope, requireAct } from './llama';

/** Fields Qwen2 and Qwen3 share: the optional sliding window of the layers from `max_window_layers` on. */
export const qwenSchema = baseSchema({ rmsNormEps: 1e-6, maxPositionEmbeddings: 32768, tieWordEmbeddings: false }).extend({
  rope_parameters: ropeSchema.nullish(),
  hidden_act: z.string().default('silu'),
  use_sliding_window: z.boolean().default(false),
  sliding_window: z.number().int().positive().nullable().default(4096),
  max_window_layers: z.number().int().nonnegative().default(28),
});

/** Qwen's window (null unless `use_sliding_window`) and layer types, as HF Qwen2Config / Qwen3Config derive them. */
export function qwenWindow(c: z.infer<typeof qwenSchema>, source: string): { slidingWindow: number | null; layerTypes: LayerType[] } {
  const slidingWindow = c.use_sliding_window ? c.sliding_window : null;
  const fallback = Array.from({ length: c.num_hidden_layers }, (_, i): LayerType =>
    slidingWindow !== null && i >= c.max_window_layers ? 'sliding_attention' : 'full_attention',
  );
  return { slidingWindow, layerTypes: parseLayerTypes(c, source, fallback) };
}

export function qwenWindowToJSON(c: ModelConfig): Record<string, unknown> {
  return {
    use_sliding_window: c.slidingWindow !== null,
    sliding_window: c.slidingWindow,
    max_window_layers: c.layerTypes.includes('sliding_attention') ? c.layerTypes.indexOf('sliding_attention') : c.numHiddenLayers,
    layer_types: c.layerTypes,
  };
}

/** Qwen2 / Qwen2.5 (HF `Qwen2ForCausalLM`): a Llama layer with bias on q, k and v (not o). */
export const qwen2: Architecture = {
  modelType: 'qwen2',
  className: 'Qwen2ForCausalLM',
  loraTargets: LINEAR_TARGETS,
  parseConfig(raw, source): ModelConfig {
    refuseCommon(raw, source);
    const c = validate(qwenSchema, raw, source);
    requireAct(c.hidden_act, 'silu', 'Qwen2', source);
    const [rp, field] = pickRope(c);
    return {
      ...baseFields(c, source),
      ...qwenWindow(c, source),
      ...LLAMA_STYLE,
      modelType: 'qwen2',
      rope: parseRope(rp, c.rope_theta ?? 10000, field, source),
      qkvBias: true,
      oBias: false,
    };
  },
  toJSON: (c) => ({
    architectures: ['Qwen2ForCausalLM'],
    ...baseToJSON(c),
    rope_theta: c.rope.theta,
    rope_parameters: ropeToJSON(c.rope),
    hidden_act: 'silu',
    ...qwenWindowToJSON(c),
  }),
  createLayer: (ctx, c, init, i) => new PreNormDecoderLayer(ctx, c, init, i),
  layerParameterShapes: (c) => PreNormDecoderLayer.parameterShapes(c),
};
