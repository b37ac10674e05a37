import { readFileSync } from 'node:fs';
import { ConfigError, createContext, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CausalLM } from './causal-lm';
import { ARCHITECTURES, modelConfigToJSON, parameterShapes, parseModelConfig } from './registry';

const fixtures = new URL('../../../../shared/fixtures/', import.meta.url);
const read = (p: string) => readFileSync(new URL(p, fixtures), 'utf8');
const raw = (dir: string) => JSON.parse(read(`${dir}/config.json`)) as Record<string, unknown>;
const FIXTURES = ['llama-tiny', 'llama-tiny-f16', 'llama-tiny-bf16', 'mistral-tiny', 'qwen2-tiny', 'qwen3-tiny', 'gemma3-tiny'];

describe('parseModelConfig', () => {
  it('reads both Llama config forms (rope_parameters and top-level rope_theta) to the same model', () => {
    const a = parseModelConfig(read('llama-tiny/config.json'));
    const b = parseModelConfig(read('llama-tiny-f16/config.json'));
    for (const c of [a, b]) {
      expect(c.modelType).toBe('llama');
      expect([c.hiddenSize, c.numKeyValueHeads, c.headDim, c.rmsNormEps]).toEqual([64, 2, 16, 1e-5]);
      expect(c.rope).toEqual({ type: 'default', theta: 10000 });
      expect(c.layerTypes).toEqual(['full_attention', 'full_attention']);
      expect([c.qkvBias, c.oBias, c.qkNorm, c.normWeightOffset, c.embedScale, c.slidingWindow]).toEqual([false, false, false, 0, 1, null]);
    }
    expect(b.torchDtype).toBe('float16');
  });

  it('reads each architecture fixture with its own features', () => {
    const m = parseModelConfig(read('mistral-tiny/config.json'));
    expect([m.modelType, m.slidingWindow, m.layerTypes]).toEqual(['mistral', 6, ['sliding_attention', 'sliding_attention']]);
    const q2 = parseModelConfig(read('qwen2-tiny/config.json'));
    expect([q2.modelType, q2.qkvBias, q2.oBias, q2.slidingWindow, q2.rope.theta]).toEqual(['qwen2', true, false, null, 1e6]);
    const q3 = parseModelConfig(read('qwen3-tiny/config.json'));
    expect([q3.modelType, q3.headDim, q3.qkNorm, q3.qkvBias, q3.normWeightOffset]).toEqual(['qwen3', 32, true, false, 0]);
    const g = parseModelConfig(read('gemma3-tiny/config.json'));
    expect(g.modelType).toBe('gemma3_text');
    expect(g.layerTypes).toEqual(['sliding_attention', 'full_attention']);
    expect([g.rope.theta, g.localRope!.theta, g.slidingWindow]).toEqual([1e6, 1e4, 6]);
    expect([g.embedScale, g.attnScale, g.normWeightOffset, g.hiddenAct, g.qkNorm, g.tieWordEmbeddings]).toEqual([8, 0.25, 1, 'gelu_tanh', true, true]);
    expect([g.attnSoftcap, g.finalSoftcap, g.padTokenId]).toEqual([null, null, 0]);
  });

  it('writes configs that read back to the same model (what saving a model relies on)', () => {
    for (const dir of FIXTURES) {
      const c = parseModelConfig(read(`${dir}/config.json`));
      expect(parseModelConfig(JSON.parse(JSON.stringify(modelConfigToJSON(c)))), dir).toEqual(c);
      expect(modelConfigToJSON(c).architectures, dir).toEqual(raw(dir).architectures);
    }
  });

  it('applies each architecture\'s HF defaults for absent fields', () => {
    const strip = (dir: string, ...keys: string[]) => {
      const o = raw(dir);
      for (const k of keys) delete o[k];
      return o;
    };
    // Qwen3Config's head_dim defaults to 128, not hidden / heads
    expect(parseModelConfig(strip('qwen3-tiny', 'head_dim')).headDim).toBe(128);
    expect(parseModelConfig(strip('qwen2-tiny', 'head_dim')).headDim).toBe(16);
    // MistralConfig's window defaults to 4096; null means full attention
    expect(parseModelConfig(strip('mistral-tiny', 'sliding_window')).slidingWindow).toBe(4096);
    const full = parseModelConfig({ ...raw('mistral-tiny'), sliding_window: null });
    expect([full.slidingWindow, full.layerTypes]).toEqual([null, ['full_attention', 'full_attention']]);
    // Qwen2: the window applies from max_window_layers on, and only with use_sliding_window
    const q = parseModelConfig({ ...strip('qwen2-tiny', 'layer_types'), use_sliding_window: true, sliding_window: 8, max_window_layers: 1 });
    expect([q.slidingWindow, q.layerTypes]).toEqual([8, ['full_attention', 'sliding_attention']]);
    expect(parseModelConfig({ ...strip('qwen2-tiny', 'layer_types'), sliding_window: 8, max_window_layers: 0 }).slidingWindow).toBe(null);
    // Gemma 3's older form: rope_theta + rope_local_base_freq + sliding_window_pattern
    const g = parseModelConfig({
      ...strip('gemma3-tiny', 'rope_parameters', 'layer_types', '_sliding_window_pattern', 'head_dim', 'query_pre_attn_scalar'),
      num_hidden_layers: 6, rope_theta: 1e6, rope_local_base_freq: 1e4, rope_scaling: { rope_type: 'linear', factor: 8 },
    });
    expect(g.layerTypes).toEqual([...Array(5).fill('sliding_attention'), 'full_attention']);
    expect([g.rope, g.localRope, g.headDim, g.attnScale]).toEqual([{ type: 'linear', theta: 1e6, factor: 8 }, { type: 'default', theta: 1e4 }, 256, 1 / 16]);
  });

  it('refuses unsupported models and fields that change the math, naming the field', () => {
    const bad = (dir: string, patch: object) => () => parseModelConfig({ ...raw(dir), ...patch });
    expect(bad('llama-tiny', { architectures: ['GPT2LMHeadModel'], model_type: 'gpt2' })).toThrow(/'model_type' is 'gpt2'/);
    expect(bad('llama-tiny', { architectures: ['GPT2LMHeadModel'], model_type: undefined })).toThrow(/'architectures'/);
    expect(bad('llama-tiny', { architectures: ['MistralForCausalLM'] })).toThrow(/'architectures'/);
    expect(bad('gemma3-tiny', { model_type: 'gemma3' })).toThrow(/gemma3_text/);
    expect(bad('llama-tiny', { hidden_act: 'gelu' })).toThrow(/'hidden_act'/);
    expect(bad('gemma3-tiny', { hidden_activation: 'gelu' })).toThrow(/'hidden_activation'/);
    expect(bad('llama-tiny', { rope_parameters: { rope_type: 'yarn', factor: 4, rope_theta: 1e4 } })).toThrow(/rope_parameters\.rope_type/);
    expect(bad('gemma3-tiny', { rope_parameters: { full_attention: { rope_type: 'longrope' }, sliding_attention: {} } })).toThrow(/full_attention\.rope_type/);
    expect(bad('qwen3-tiny', { num_experts: 8 })).toThrow(/'num_experts'/);
    expect(bad('llama-tiny', { partial_rotary_factor: 0.5 })).toThrow(/'partial_rotary_factor'/);
    expect(bad('gemma3-tiny', { use_bidirectional_attention: true })).toThrow(/'use_bidirectional_attention'/);
    expect(bad('qwen2-tiny', { layer_types: ['full_attention', 'chunked_attention'] })).toThrow(/'layer_types'/);
    expect(bad('qwen2-tiny', { layer_types: ['full_attention'] })).toThrow(/'layer_types' has 1 entries/);
    expect(bad('llama-tiny', { hidden_size: -3 })).toThrow(/'hidden_size'/);
    expect(bad('llama-tiny', { num_key_value_heads: 3 })).toThrow(ConfigError);
    expect(() => parseModelConfig('{not json')).toThrow(/not valid JSON/);
  });

  it('derives head_dim and reads llama3 rope scaling', () => {
    const c = parseModelConfig({
      vocab_size: 128256, hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
      num_attention_heads: 32, num_key_value_heads: 8, rope_theta: 500000,
      rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
      eos_token_id: [128001, 128008], tie_word_embeddings: true,
    });
    expect(c.headDim).toBe(64);
    expect(c.rope).toEqual({ type: 'llama3', theta: 500000, factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
    expect(c.eosTokenId).toEqual([128001, 128008]);
  });
});

describe('parameterShapes', () => {
  let ctx: Context;
  beforeAll(async () => {
    ctx = await createContext();
  });
  afterAll(() => ctx.destroy());

  it('is the parameter table of the model each architecture builds', () => {
    expect(ARCHITECTURES.map((a) => a.modelType).sort()).toEqual(['gemma3_text', 'llama', 'mistral', 'qwen2', 'qwen3']);
    for (const dir of ['llama-tiny', 'mistral-tiny', 'qwen2-tiny', 'qwen3-tiny', 'gemma3-tiny']) {
      const c = parseModelConfig(read(`${dir}/config.json`));
      const m = new CausalLM(ctx, c, { empty: true });
      expect([...parameterShapes(c)], dir).toEqual([...m.namedParameters()].map(([n, p]) => [n, [...p.shape]]));
      m.dispose();
    }
  });
});
