import { readFileSync } from 'node:fs';
import { ConfigError } from '@rusty/backend';
import { describe, expect, it } from 'vitest';
import { llamaConfigToJSON, parseLlamaConfig } from './config';

const fixtures = new URL('../../../../shared/fixtures/', import.meta.url);
const read = (p: string) => readFileSync(new URL(p, fixtures), 'utf8');

describe('parseLlamaConfig', () => {
  it('reads both fixture configs (rope_parameters and top-level rope_theta forms) to the same model', () => {
    const a = parseLlamaConfig(read('llama-tiny/config.json'));
    const b = parseLlamaConfig(read('llama-tiny-f16/config.json'));
    for (const c of [a, b]) {
      expect(c.hiddenSize).toBe(64);
      expect(c.numKeyValueHeads).toBe(2);
      expect(c.headDim).toBe(16);
      expect(c.rope).toEqual({ type: 'default', theta: 10000 });
      expect(c.rmsNormEps).toBe(1e-5);
      expect(c.tieWordEmbeddings).toBe(false);
    }
    expect(b.torchDtype).toBe('float16');
    expect(parseLlamaConfig(llamaConfigToJSON(a))).toEqual({ ...a, torchDtype: 'float32' });
  });

  it('derives head_dim and reads llama3 rope scaling', () => {
    const c = parseLlamaConfig({
      vocab_size: 128256, hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
      num_attention_heads: 32, num_key_value_heads: 8, rope_theta: 500000,
      rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
      eos_token_id: [128001, 128008], tie_word_embeddings: true,
    });
    expect(c.headDim).toBe(64);
    expect(c.rope).toEqual({ type: 'llama3', theta: 500000, factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
    expect(c.eosTokenId).toEqual([128001, 128008]);
  });

  it('rejects unsupported models with a message naming the field', () => {
    const base = JSON.parse(read('llama-tiny/config.json'));
    const bad = (patch: object) => () => parseLlamaConfig({ ...base, ...patch });
    expect(bad({ architectures: ['GPT2LMHeadModel'], model_type: 'gpt2' })).toThrow(/'architectures'/);
    expect(bad({ model_type: 'qwen2', architectures: undefined })).toThrow(/'model_type'/);
    expect(bad({ hidden_act: 'gelu' })).toThrow(/'hidden_act'/);
    expect(bad({ rope_parameters: { rope_type: 'yarn', factor: 4, rope_theta: 1e4 } })).toThrow(/rope_parameters\.rope_type/);
    expect(bad({ hidden_size: -3 })).toThrow(/'hidden_size'/);
    expect(bad({ num_key_value_heads: 3 })).toThrow(ConfigError);
    expect(() => parseLlamaConfig('{not json')).toThrow(/not valid JSON/);
  });
});
