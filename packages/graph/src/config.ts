import { ConfigError } from '@rusty/backend';
import { z } from 'zod';

/** Rotary-embedding settings, normalised from HF's `rope_scaling` / `rope_parameters` forms. */
export interface RopeConfig {
  type: 'default' | 'linear' | 'dynamic' | 'llama3';
  theta: number;
  /** linear, dynamic, llama3 */
  factor?: number;
  /** llama3 */
  lowFreqFactor?: number;
  highFreqFactor?: number;
  originalMaxPositionEmbeddings?: number;
}

/** A Llama-family model's configuration (Llama 1-3, Mistral), in Rusty's names. */
export interface LlamaConfig {
  modelType: 'llama' | 'mistral';
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  numKeyValueHeads: number;
  headDim: number;
  rmsNormEps: number;
  maxPositionEmbeddings: number;
  rope: RopeConfig;
  tieWordEmbeddings: boolean;
  attentionBias: boolean;
  mlpBias: boolean;
  bosTokenId: number | null;
  eosTokenId: number[];
  padTokenId: number | null;
  /** Mistral's sliding attention window (null: full causal attention). */
  slidingWindow: number | null;
  /** The dtype the checkpoint was saved in, if the config says. */
  torchDtype: string | null;
}

const posInt = z.number().int().positive();
const ropeSchema = z
  .object({
    rope_type: z.string().optional(),
    type: z.string().optional(),
    rope_theta: z.number().positive().optional(),
    factor: z.number().positive().optional(),
    low_freq_factor: z.number().positive().optional(),
    high_freq_factor: z.number().positive().optional(),
    original_max_position_embeddings: posInt.optional(),
  })
  .passthrough();

const schema = z
  .object({
    architectures: z.array(z.string()).optional(),
    model_type: z.string().optional(),
    vocab_size: posInt,
    hidden_size: posInt,
    intermediate_size: posInt,
    num_hidden_layers: posInt,
    num_attention_heads: posInt,
    num_key_value_heads: posInt.nullish(),
    head_dim: posInt.nullish(),
    rms_norm_eps: z.number().positive().default(1e-6),
    max_position_embeddings: posInt.default(2048),
    rope_theta: z.number().positive().nullish(),
    rope_scaling: ropeSchema.nullish(),
    rope_parameters: ropeSchema.nullish(),
    tie_word_embeddings: z.boolean().default(false),
    attention_bias: z.boolean().default(false),
    mlp_bias: z.boolean().default(false),
    hidden_act: z.string().default('silu'),
    bos_token_id: z.number().int().nullish(),
    eos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
    pad_token_id: z.number().int().nullish(),
    sliding_window: z.number().int().positive().nullish(),
    torch_dtype: z.string().nullish(),
    dtype: z.string().nullish(),
  })
  .passthrough();

const ARCHS = ['LlamaForCausalLM', 'MistralForCausalLM'];
const ROPE_TYPES = ['default', 'linear', 'dynamic', 'llama3'];

/**
 * Parse and validate an HF `config.json` (text or object) of a Llama or Mistral model. Accepts both the older
 * top-level `rope_theta` + `rope_scaling` and the newer `rope_parameters`. Unsupported architectures,
 * activations or rope types fail with a `ConfigError` naming the field.
 */
export function parseLlamaConfig(json: string | unknown, source = 'config.json'): LlamaConfig {
  let raw: unknown = json;
  if (typeof json === 'string') {
    try {
      raw = JSON.parse(json);
    } catch (e) {
      throw new ConfigError(`${source}: not valid JSON (${(e as Error).message})`);
    }
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(`${source}: expected a JSON object`);
  const o = raw as Record<string, unknown>;
  const archs = o.architectures;
  if (Array.isArray(archs) && archs.length && !archs.some((a) => ARCHS.includes(a as string)))
    throw new ConfigError(`${source}: field 'architectures' is ${JSON.stringify(archs)}; Rusty supports ${ARCHS.join(', ')}`);
  if (o.model_type !== undefined && o.model_type !== 'llama' && o.model_type !== 'mistral')
    throw new ConfigError(`${source}: field 'model_type' is '${String(o.model_type)}'; Rusty supports 'llama' and 'mistral'`);
  const r = schema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ConfigError(`${source}: field '${i.path.join('.')}': ${i.message}`);
  }
  const c = r.data;
  if (c.hidden_act !== 'silu')
    throw new ConfigError(`${source}: field 'hidden_act' is '${c.hidden_act}'; Llama models use 'silu'`);
  const kv = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % kv !== 0)
    throw new ConfigError(
      `${source}: num_attention_heads (${c.num_attention_heads}) is not a multiple of num_key_value_heads (${kv})`,
    );
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim))
    throw new ConfigError(`${source}: hidden_size ${c.hidden_size} is not divisible by num_attention_heads ${c.num_attention_heads}`);
  if (headDim % 2) throw new ConfigError(`${source}: head_dim ${headDim} must be even for rotary embeddings`);
  const rp = c.rope_parameters ?? c.rope_scaling ?? null;
  const field = c.rope_parameters ? 'rope_parameters' : 'rope_scaling';
  const ropeType = rp?.rope_type ?? rp?.type ?? 'default';
  if (!ROPE_TYPES.includes(ropeType))
    throw new ConfigError(`${source}: field '${field}.rope_type' is '${ropeType}'; supported: ${ROPE_TYPES.join(', ')}`);
  const theta = rp?.rope_theta ?? c.rope_theta ?? 10000;
  const rope: RopeConfig = { type: ropeType as RopeConfig['type'], theta };
  if (ropeType !== 'default') {
    if (rp?.factor === undefined) throw new ConfigError(`${source}: field '${field}.factor' is required for rope type '${ropeType}'`);
    rope.factor = rp.factor;
  }
  if (ropeType === 'llama3') {
    for (const k of ['low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'] as const)
      if (rp?.[k] === undefined) throw new ConfigError(`${source}: field '${field}.${k}' is required for rope type 'llama3'`);
    rope.lowFreqFactor = rp!.low_freq_factor;
    rope.highFreqFactor = rp!.high_freq_factor;
    rope.originalMaxPositionEmbeddings = rp!.original_max_position_embeddings;
  }
  if (ropeType === 'dynamic' && rp?.original_max_position_embeddings)
    rope.originalMaxPositionEmbeddings = rp.original_max_position_embeddings;
  const eos = c.eos_token_id;
  return {
    modelType: (c.model_type as 'llama' | 'mistral' | undefined) ?? (archs && (archs as string[]).includes('MistralForCausalLM') ? 'mistral' : 'llama'),
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: kv,
    headDim,
    rmsNormEps: c.rms_norm_eps,
    maxPositionEmbeddings: c.max_position_embeddings,
    rope,
    tieWordEmbeddings: c.tie_word_embeddings,
    attentionBias: c.attention_bias,
    mlpBias: c.mlp_bias,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenId: eos === null || eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
    padTokenId: c.pad_token_id ?? null,
    slidingWindow: c.sliding_window ?? null,
    torchDtype: c.torch_dtype ?? c.dtype ?? null,
  };
}

/** The HF `config.json` object for a config (newer `rope_parameters` form plus top-level `rope_theta`). */
export function llamaConfigToJSON(c: LlamaConfig): Record<string, unknown> {
  const rope: Record<string, unknown> = { rope_type: c.rope.type, rope_theta: c.rope.theta };
  if (c.rope.factor !== undefined) rope.factor = c.rope.factor;
  if (c.rope.lowFreqFactor !== undefined) rope.low_freq_factor = c.rope.lowFreqFactor;
  if (c.rope.highFreqFactor !== undefined) rope.high_freq_factor = c.rope.highFreqFactor;
  if (c.rope.originalMaxPositionEmbeddings !== undefined) rope.original_max_position_embeddings = c.rope.originalMaxPositionEmbeddings;
  return {
    architectures: [c.modelType === 'mistral' ? 'MistralForCausalLM' : 'LlamaForCausalLM'],
    model_type: c.modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numHiddenLayers,
    num_attention_heads: c.numAttentionHeads,
    num_key_value_heads: c.numKeyValueHeads,
    head_dim: c.headDim,
    rms_norm_eps: c.rmsNormEps,
    max_position_embeddings: c.maxPositionEmbeddings,
    rope_theta: c.rope.theta,
    rope_scaling: c.rope.type === 'default' ? null : rope,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    mlp_bias: c.mlpBias,
    hidden_act: 'silu',
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenId.length === 1 ? c.eosTokenId[0] : c.eosTokenId,
    pad_token_id: c.padTokenId,
    sliding_window: c.slidingWindow,
    torch_dtype: c.torchDtype ?? 'float32',
  };
}
