// Small models of every architecture for the graph tests: the fixtures' configs (hidden 64, 4 heads, 2 KV
// heads, the shapes the loader's fixture tests compile pipelines for) with random weights.
import { readFileSync } from 'node:fs';
import { randn } from '@rusty/autograd';
import { upload, type Context } from '@rusty/backend';
import { CausalLM } from './causal-lm';
import type { ModelConfig } from './config';
import { parseModelConfig } from './registry';

const fixtures = new URL('../../../../shared/fixtures/', import.meta.url);

/** The config of a fixture in ../shared/fixtures, with fields overridden. */
export function fixtureConfig(dir: string, patch: Record<string, unknown> = {}): ModelConfig {
  const raw = JSON.parse(readFileSync(new URL(`${dir}/config.json`, fixtures), 'utf8'));
  return parseModelConfig({ ...raw, ...patch }, `${dir}/config.json`);
}

/**
 * A model with random weights of std 0.1 and norm weights drawn around their neutral value, so that every
 * parameter (q/k norms, (1 + w) norms, biases) changes the output.
 */
export function randomModel(ctx: Context, config: ModelConfig, seed = 1): CausalLM {
  const m = new CausalLM(ctx, config, { seed, initStd: 0.1 });
  let i = 0;
  for (const [name, p] of m.namedParameters()) {
    if (!/norm\.weight$|\.bias$/.test(name)) continue;
    const base = /norm\.weight$/.test(name) && config.normWeightOffset === 0 ? 1 : 0;
    const v = randn(p.shape.reduce((a, b) => a * b, 1), seed * 7919 + i++, 0.2, base);
    p.assign(upload(ctx, v, p.shape));
  }
  return m;
}

/** Every architecture's fixture, with Mistral's window set to `window` (shorter than the tests' sequences). */
export const ARCH_FIXTURES = ['llama-tiny', 'mistral-tiny', 'qwen2-tiny', 'qwen3-tiny', 'gemma3-tiny'] as const;
