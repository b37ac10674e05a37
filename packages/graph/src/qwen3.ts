import { z } from 'zod';
import { LINEAR_TARGETS, type Architecture } from './architecture';
import { baseFields, baseToJSON, parseRope, refuseCommon, ropeToJSON, validate, type ModelConfig } from './config';
import { PreNormDecoderLayer } from './decoder-layer';
import { LLAMA_STYLE, pickRope, requireAct } from './llama';
import { qwenSchema, qwenWindow, qwenWindowToJSON } from './qwen2';

const schema = qwenSchema.extend({ attention_bias: z.boolean().default(false) });

/**
 * Qwen3 (HF `Qwen3ForCausalLM`): a Llama layer with per-head RMSNorm on q and k before RoPE, and a `head_dim`
 * of its own (HF's default 128, not hidden_size / heads).
 */
export const qwen3: Architecture = {
  modelType: 'qwen3',
  className: 'Qwen3ForCausalLM',
  loraTargets: LINEAR_TARGETS,
  parseConfig(raw, source): ModelConfig {
    refuseCommon(raw, source);
    const c = validate(schema, raw, source);
    requireAct(c.hidden_act, 'silu', 'Qwen3', source);
    const [rp, field] = pickRope(c);
    return {
      ...baseFields(c, source, 128),
      ...qwenWindow(c, source),
      ...LLAMA_STYLE,
      modelType: 'qwen3',
      rope: parseRope(rp, c.rope_theta ?? 10000, field, source),
      qkvBias: c.attention_bias,
      oBias: c.attention_bias,
      qkNorm: true,
    };
  },
  toJSON: (c) => ({
    architectures: ['Qwen3ForCausalLM'],
    ...baseToJSON(c),
    rope_theta: c.rope.theta,
    rope_parameters: ropeToJSON(c.rope),
    attention_bias: c.qkvBias,
    hidden_act: 'silu',
    ...qwenWindowToJSON(c),
  }),
  createLayer: (ctx, c, init, i) => new PreNormDecoderLayer(ctx, c, init, i),
  layerParameterShapes: (c) => PreNormDecoderLayer.parameterShapes(c),
};
