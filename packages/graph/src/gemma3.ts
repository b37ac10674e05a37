import type { Context } from '@rusty/backend';
import { add, Tensor, tidy } from '@rusty/autograd';
import { ConfigError } from '@rusty/backend';
import { z } from 'zod';
import { LINEAR_TARGETS, type Architecture, type DecoderLayer } from './architecture';
import { Attention, type CacheSlot } from './attention';
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
import { RMSNorm, type InitOptions } from './layers';
import { limbsWanted } from './fused-projections';
import { GatedMLP } from './mlp';
import { Module } from './module';

const GELU_TANH = ['gelu_pytorch_tanh', 'gelu_new'];

const schema = baseSchema({ rmsNormEps: 1e-6, maxPositionEmbeddings: 131072, tieWordEmbeddings: true }).extend({
  head_dim: z.number().int().positive().default(256),
  // newer form: one rope block per layer type; older: rope_theta + rope_scaling (full) + rope_local_base_freq
  rope_parameters: z.record(z.string(), z.unknown()).nullish(),
  rope_local_base_freq: z.number().positive().default(10000),
  attention_bias: z.boolean().default(false),
  hidden_activation: z.string().nullish(),
  hidden_act: z.string().nullish(),
  query_pre_attn_scalar: z.number().positive().default(256),
  sliding_window: z.number().int().positive().nullable().default(4096),
  sliding_window_pattern: z.number().int().positive().nullish(),
  _sliding_window_pattern: z.number().int().positive().nullish(),
  attn_logit_softcapping: z.number().positive().nullish(),
  final_logit_softcapping: z.number().positive().nullish(),
});

/**
 * Gemma 3 text (HF `Gemma3ForCausalLM`, `model_type: gemma3_text`): RMSNorms that scale by `(1 + w)`,
 * embeddings scaled by sqrt(hidden_size), a GELU-tanh gated MLP, q/k norms, scores scaled by
 * `query_pre_attn_scalar^-0.5`, sandwich norms around attention and MLP, and `layer_types` alternating sliding
 * and full attention with a rope base per layer type; embeddings tied by default.
 */
export const gemma3: Architecture = {
  modelType: 'gemma3_text',
  className: 'Gemma3ForCausalLM',
  loraTargets: LINEAR_TARGETS,
  parseConfig(raw, source): ModelConfig {
    refuseCommon(raw, source);
    const c = validate(schema, raw, source);
    const act = c.hidden_activation ?? c.hidden_act ?? 'gelu_pytorch_tanh';
    if (!GELU_TANH.includes(act))
      throw new ConfigError(`${source}: field 'hidden_activation' is '${act}'; Gemma 3 models use 'gelu_pytorch_tanh'`);
    const n = c.num_hidden_layers;
    const pattern = c._sliding_window_pattern ?? c.sliding_window_pattern ?? 6;
    const fallback = Array.from({ length: n }, (_, i): LayerType => ((i + 1) % pattern ? 'sliding_attention' : 'full_attention'));
    const layerTypes = parseLayerTypes(c, source, fallback);
    let rope, localRope;
    const rp = c.rope_parameters;
    if (rp && ('full_attention' in rp || 'sliding_attention' in rp)) {
      for (const k of Object.keys(rp))
        if (k !== 'full_attention' && k !== 'sliding_attention')
          throw new ConfigError(`${source}: field 'rope_parameters.${k}': expected keys full_attention and sliding_attention`);
      const block = (k: string) => (rp[k] === undefined ? null : validate(ropeSchema, rp[k], `${source}: rope_parameters.${k}`));
      rope = parseRope(block('full_attention'), c.rope_theta ?? 1e6, 'rope_parameters.full_attention', source);
      localRope = parseRope(block('sliding_attention'), c.rope_local_base_freq, 'rope_parameters.sliding_attention', source);
    } else {
      const flat = rp ? validate(ropeSchema, rp, `${source}: rope_parameters`) : (c.rope_scaling ?? null);
      rope = parseRope(flat, c.rope_theta ?? 1e6, rp ? 'rope_parameters' : 'rope_scaling', source);
      localRope = parseRope(null, c.rope_local_base_freq, 'rope_local_base_freq', source);
    }
    return {
      ...baseFields(c, source),
      modelType: 'gemma3_text',
      rope,
      localRope,
      qkvBias: c.attention_bias,
      oBias: c.attention_bias,
      mlpBias: false,
      hiddenAct: 'gelu_tanh',
      qkNorm: true,
      normWeightOffset: 1,
      embedScale: Math.sqrt(c.hidden_size),
      attnScale: c.query_pre_attn_scalar ** -0.5,
      slidingWindow: c.sliding_window,
      layerTypes,
      attnSoftcap: c.attn_logit_softcapping ?? null,
      finalSoftcap: c.final_logit_softcapping ?? null,
    };
  },
  toJSON: (c) => ({
    architectures: ['Gemma3ForCausalLM'],
    ...baseToJSON(c),
    rope_parameters: {
      full_attention: ropeToJSON(c.rope),
      sliding_attention: ropeToJSON(c.localRope ?? c.rope),
    },
    attention_bias: c.qkvBias,
    hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: Number(((c.attnScale ?? c.headDim ** -0.5) ** -2).toPrecision(12)),
    sliding_window: c.slidingWindow,
    layer_types: c.layerTypes,
    attn_logit_softcapping: c.attnSoftcap,
    final_logit_softcapping: c.finalSoftcap,
  }),
  createLayer: (ctx, c, init, i) => new Gemma3DecoderLayer(ctx, c, init, i),
  layerParameterShapes: (c) => Gemma3DecoderLayer.parameterShapes(c),
};

/**
 * Gemma 3's decoder layer: norms before and after both the attention and the MLP ("sandwich"):
 * h1 = h + post_attn(attn(input(h))), out = h1 + post_ff(mlp(pre_ff(h1))); the first residual add is fused
 * into pre_feedforward_layernorm.
 */
export class Gemma3DecoderLayer extends Module implements DecoderLayer {
  readonly selfAttn: Attention;
  readonly mlp: GatedMLP;
  readonly inputLayernorm: RMSNorm;
  readonly postAttentionLayernorm: RMSNorm;
  readonly preFeedforwardLayernorm: RMSNorm;
  readonly postFeedforwardLayernorm: RMSNorm;

  constructor(ctx: Context, c: ModelConfig, init: InitOptions, layer: number) {
    super(ctx);
    const norm = () => new RMSNorm(ctx, c.hiddenSize, c.rmsNormEps, init, c.normWeightOffset);
    this.selfAttn = this.registerModule('self_attn', new Attention(ctx, c, init, layer));
    this.mlp = this.registerModule('mlp', new GatedMLP(ctx, c, init, layer));
    this.inputLayernorm = this.registerModule('input_layernorm', norm());
    this.postAttentionLayernorm = this.registerModule('post_attention_layernorm', norm());
    this.preFeedforwardLayernorm = this.registerModule('pre_feedforward_layernorm', norm());
    this.postFeedforwardLayernorm = this.registerModule('post_feedforward_layernorm', norm());
  }

  forward(h: Tensor, invFreq: Tensor, cache?: CacheSlot): Tensor {
    return tidy(() => {
      // a decoding step with int4 projections: the norms before them also write int8 limbs (`limbsWanted`)
      let o: Tensor;
      if (limbsWanted(this.selfAttn.inputProjections(), h)) {
        const [x, l] = this.inputLayernorm.forwardLimbs(h);
        o = this.selfAttn.forward(x, invFreq, cache, l);
      } else o = this.selfAttn.forward(this.inputLayernorm.forward(h), invFreq, cache);
      const a = this.postAttentionLayernorm.forward(o);
      if (limbsWanted(this.mlp.inputProjections(), a)) {
        const [x, l, h1] = this.preFeedforwardLayernorm.forwardLimbs(a, h);
        return add(h1, this.postFeedforwardLayernorm.forward(this.mlp.forward(x, undefined, l)));
      }
      const [h1, x] = this.preFeedforwardLayernorm.forwardResidual(a, h);
      return add(h1, this.postFeedforwardLayernorm.forward(this.mlp.forward(x)));
    });
  }

  static parameterShapes(c: ModelConfig): [string, number[]][] {
    const h = [c.hiddenSize];
    return [
      ...Attention.parameterShapes(c).map(([n, s]): [string, number[]] => [`self_attn.${n}`, s]),
      ...GatedMLP.parameterShapes(c).map(([n, s]): [string, number[]] => [`mlp.${n}`, s]),
      ['input_layernorm.weight', h],
      ['post_attention_layernorm.weight', h],
      ['pre_feedforward_layernorm.weight', h],
      ['post_feedforward_layernorm.weight', h],
    ];
  }
}
