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

/** HF `model_type` of every supported architecture (each has one file: llama.ts, mistral.ts, ...). */
export type ModelType = 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'gemma3_text';

/** HF `layer_types` entries. */
export type LayerType = 'full_attention' | 'sliding_attention';

/**
 * A decoder-only model's configuration in Rusty's names, for every supported architecture. The architecture
 * file that parsed it (see `registry.ts`) decides the fields; the shared modules read them.
 */
export interface ModelConfig {
  modelType: ModelType;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  numKeyValueHeads: number;
  headDim: number;
  rmsNormEps: number;
  maxPositionEmbeddings: number;
  /** Rotary settings of full-attention layers (of every layer unless `localRope` is set). */
  rope: RopeConfig;
  /** Rotary settings of sliding-attention layers when they differ (Gemma 3's local base), else null. */
  localRope: RopeConfig | null;
  tieWordEmbeddings: boolean;
  /** Bias on q_proj, k_proj and v_proj. */
  qkvBias: boolean;
  /** Bias on o_proj. */
  oBias: boolean;
  /** Bias on the MLP projections. */
  mlpBias: boolean;
  /** Activation of the gated MLP: `silu` (SwiGLU) or `gelu_tanh` (GELU with the tanh approximation). */
  hiddenAct: 'silu' | 'gelu_tanh';
  /** Per-head RMSNorm on q and k before RoPE (Qwen3, Gemma 3). */
  qkNorm: boolean;
  /** RMSNorms scale by `(offset + w)`: 0 for Llama, 1 for Gemma. */
  normWeightOffset: number;
  /** Embeddings are multiplied by this (Gemma: sqrt(hidden_size)); 1 elsewhere. */
  embedScale: number;
  /** Attention score scale; null is 1 / sqrt(head_dim). */
  attnScale: number | null;
  /** Window of sliding-attention layers (keys within the last `slidingWindow` positions), null if none. */
  slidingWindow: number | null;
  /** Attention kind of each layer (`numHiddenLayers` entries). */
  layerTypes: LayerType[];
  /** Attention logit soft-capping (`attn_logit_softcapping`), null if none. */
  attnSoftcap: number | null;
  /** Final logit soft-capping (`final_logit_softcapping`), null if none. */
  finalSoftcap: number | null;
  bosTokenId: number | null;
  eosTokenId: number[];
  padTokenId: number | null;
  /** The dtype the checkpoint was saved in, if the config says. */
  torchDtype: string | null;
}

/** The name the Llama-only API used; every architecture's config has this type. */
export type LlamaConfig = ModelConfig;

const posInt = z.number().int().positive();
export const ropeSchema = z
  .object({
    rope_type: z.string().optional(),
    type: z.string().optional(),
    rope_theta: z.number().positive().optional(),
    factor: z.number().positive().optional(),
    low_freq_factor: z.number().positive().optional(),
    high_freq_factor: z.number().positive().optional(),
    original_max_position_embeddings: posInt.optional(),
    partial_rotary_factor: z.number().optional(),
  })
  .passthrough();
export type RawRope = z.infer<typeof ropeSchema>;

/** Fields every supported architecture shares (HF names); `defaults` are the architecture's HF defaults. */
export function baseSchema(defaults: { rmsNormEps: number; maxPositionEmbeddings: number; tieWordEmbeddings: boolean }) {
  return z
    .object({
      architectures: z.array(z.string()).nullish(),
      model_type: z.string().optional(),
      vocab_size: posInt,
      hidden_size: posInt,
      intermediate_size: posInt,
      num_hidden_layers: posInt,
      num_attention_heads: posInt,
      num_key_value_heads: posInt.nullish(),
      head_dim: posInt.nullish(),
      rms_norm_eps: z.number().positive().default(defaults.rmsNormEps),
      max_position_embeddings: posInt.default(defaults.maxPositionEmbeddings),
      rope_theta: z.number().positive().nullish(),
      rope_scaling: ropeSchema.nullish(),
      tie_word_embeddings: z.boolean().default(defaults.tieWordEmbeddings),
      bos_token_id: z.number().int().nullish(),
      eos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
      pad_token_id: z.number().int().nullish(),
      sliding_window: z.number().int().positive().nullish(),
      layer_types: z.array(z.string()).nullish(),
      torch_dtype: z.string().nullish(),
      dtype: z.string().nullish(),
      partial_rotary_factor: z.number().nullish(),
    })
    .passthrough();
}

/** Parse JSON text (or take an object) and check that it is a JSON object. */
export function rawConfig(json: string | unknown, source: string): Record<string, unknown> {
  let raw: unknown = json;
  if (typeof json === 'string') {
    try {
      raw = JSON.parse(json);
    } catch (e) {
      throw new ConfigError(`${source}: not valid JSON (${(e as Error).message})`);
    }
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(`${source}: expected a JSON object`);
  return raw as Record<string, unknown>;
}

/** Validate with a zod schema; the first problem becomes a ConfigError naming the field. */
export function validate<S extends z.ZodType>(schema: S, raw: unknown, source: string): z.infer<S> {
  const r = schema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ConfigError(`${source}: field '${i.path.join('.')}': ${i.message}`);
  }
  return r.data;
}

const ROPE_TYPES = ['default', 'linear', 'dynamic', 'llama3'];

/** Normalise one rope block (`rope_parameters`, `rope_scaling` or a per-layer-type entry). */
export function parseRope(rp: RawRope | null | undefined, fallbackTheta: number, field: string, source: string): RopeConfig {
  const type = rp?.rope_type ?? rp?.type ?? 'default';
  if (!ROPE_TYPES.includes(type))
    throw new ConfigError(`${source}: field '${field}.rope_type' is '${type}'; supported: ${ROPE_TYPES.join(', ')}`);
  if (rp?.partial_rotary_factor !== undefined && rp.partial_rotary_factor !== 1)
    throw new ConfigError(`${source}: field '${field}.partial_rotary_factor' is ${rp.partial_rotary_factor}; only 1 (full rotary) is supported`);
  const rope: RopeConfig = { type: type as RopeConfig['type'], theta: rp?.rope_theta ?? fallbackTheta };
  if (type !== 'default') {
    if (rp?.factor === undefined) throw new ConfigError(`${source}: field '${field}.factor' is required for rope type '${type}'`);
    rope.factor = rp.factor;
  }
  if (type === 'llama3') {
    for (const k of ['low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'] as const)
      if (rp?.[k] === undefined) throw new ConfigError(`${source}: field '${field}.${k}' is required for rope type 'llama3'`);
    rope.lowFreqFactor = rp!.low_freq_factor;
    rope.highFreqFactor = rp!.high_freq_factor;
    rope.originalMaxPositionEmbeddings = rp!.original_max_position_embeddings;
  }
  if (type === 'dynamic' && rp?.original_max_position_embeddings) rope.originalMaxPositionEmbeddings = rp.original_max_position_embeddings;
  return rope;
}

/** HF's rope block for a RopeConfig (the `rope_parameters` form). */
export function ropeToJSON(r: RopeConfig): Record<string, unknown> {
  const o: Record<string, unknown> = { rope_type: r.type, rope_theta: r.theta };
  if (r.factor !== undefined) o.factor = r.factor;
  if (r.lowFreqFactor !== undefined) o.low_freq_factor = r.lowFreqFactor;
  if (r.highFreqFactor !== undefined) o.high_freq_factor = r.highFreqFactor;
  if (r.originalMaxPositionEmbeddings !== undefined) o.original_max_position_embeddings = r.originalMaxPositionEmbeddings;
  return o;
}

type Base = z.infer<ReturnType<typeof baseSchema>>;

/** Refuse a field that changes the math when it is set to anything but `ok` values. */
export function refuseField(raw: Record<string, unknown>, field: string, ok: (v: unknown) => boolean, source: string, why: string): void {
  if (field in raw && !ok(raw[field]))
    throw new ConfigError(`${source}: field '${field}' is ${JSON.stringify(raw[field])}; ${why}`);
}

/** Fields that would change the math of any architecture here and that none of them implements. */
export function refuseCommon(raw: Record<string, unknown>, source: string): void {
  const none = (v: unknown) => v === null || v === undefined || v === 0 || v === 1 || v === false;
  for (const f of ['num_experts', 'num_local_experts', 'n_routed_experts', 'moe_intermediate_size'])
    refuseField(raw, f, (v) => v === null || v === undefined || v === 0, source, 'Mixture-of-Experts models are not supported');
  refuseField(raw, 'partial_rotary_factor', (v) => v === null || v === undefined || v === 1, source, 'only full rotary embeddings (1) are supported');
  refuseField(raw, 'use_bidirectional_attention', (v) => !v, source, 'only causal attention is supported');
  refuseField(raw, 'attention_chunk_size', (v) => v === null || v === undefined, source, 'chunked attention is not supported');
  refuseField(raw, 'no_rope_layers', (v) => v === null || v === undefined || (Array.isArray(v) && v.every((x) => x === 1)), source, 'layers without RoPE are not supported');
  refuseField(raw, 'use_qk_norm', none, source, 'this architecture has no q/k norm');
}

/** Shared normalisation: sizes, heads, head_dim, token ids, dtype. Architecture-specific fields are the caller's. */
export function baseFields(c: Base, source: string, headDimDefault?: number) {
  const kv = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % kv !== 0)
    throw new ConfigError(`${source}: num_attention_heads (${c.num_attention_heads}) is not a multiple of num_key_value_heads (${kv})`);
  const headDim = c.head_dim ?? headDimDefault ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim))
    throw new ConfigError(`${source}: hidden_size ${c.hidden_size} is not divisible by num_attention_heads ${c.num_attention_heads}`);
  if (headDim % 2) throw new ConfigError(`${source}: head_dim ${headDim} must be even for rotary embeddings`);
  const eos = c.eos_token_id;
  return {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: kv,
    headDim,
    rmsNormEps: c.rms_norm_eps,
    maxPositionEmbeddings: c.max_position_embeddings,
    tieWordEmbeddings: c.tie_word_embeddings,
    bosTokenId: c.bos_token_id ?? null,
    eosTokenId: eos === null || eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
    padTokenId: c.pad_token_id ?? null,
    torchDtype: c.torch_dtype ?? c.dtype ?? null,
  };
}

/** `layer_types` validated against the layer count (or `fallback` when absent). */
export function parseLayerTypes(c: Base, source: string, fallback: LayerType[]): LayerType[] {
  const lt = c.layer_types ?? fallback;
  if (lt.length !== c.num_hidden_layers)
    throw new ConfigError(`${source}: field 'layer_types' has ${lt.length} entries for ${c.num_hidden_layers} layers`);
  for (const t of lt)
    if (t !== 'full_attention' && t !== 'sliding_attention')
      throw new ConfigError(`${source}: field 'layer_types' has '${t}'; supported: full_attention, sliding_attention`);
  return lt as LayerType[];
}

/** The shared HF config.json fields of a config (each architecture adds its own). */
export function baseToJSON(c: ModelConfig): Record<string, unknown> {
  return {
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
    tie_word_embeddings: c.tieWordEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenId.length === 1 ? c.eosTokenId[0] : c.eosTokenId,
    pad_token_id: c.padTokenId,
    torch_dtype: c.torchDtype ?? 'float32',
  };
}

/** Every layer full attention. */
export const allFull = (n: number): LayerType[] => Array.from({ length: n }, () => 'full_attention' as const);
