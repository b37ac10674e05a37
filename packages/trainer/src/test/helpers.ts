// Shared by the GPU tests and the crash-test child: a tiny random Llama and synthetic data.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context } from '@rusty/backend';
import * as loader from '@rusty/loader';
import { AdamW, LinearWarmup, Tensor as TensorCls, type Tensor } from '@rusty/autograd';
type TensorT = Tensor;
import { applyLora, LlamaForCausalLM, parseLlamaConfig } from '@rusty/graph';
import { DataLoader } from '../data/dataloader';
import { Rng } from '../rng';
import { TextDataset } from '../data/text-dataset';

export const TINY = {
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  max_position_embeddings: 64,
};
export const SEQ = 16;

/** A tiny random Llama (vocab 64, hidden 32, 2 layers). */
export function tinyModel(ctx: Context, seed = 1, opts: { lora?: boolean; loraSeed?: number } = {}): LlamaForCausalLM {
  const m = new LlamaForCausalLM(ctx, parseLlamaConfig(TINY), { seed });
  if (opts.lora) applyLora(m, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], seed: opts.loraSeed ?? 3 });
  return m;
}

/** Learnable synthetic documents: arithmetic progressions mod 60 (ids 3..62), EOS 2. */
export function syntheticDataset(docs = 24, seed = 0): TextDataset {
  const rng = new Rng(seed);
  const seqs: number[][] = [];
  for (let d = 0; d < docs; d++) {
    const start = rng.int(60);
    const step = 1 + rng.int(3);
    const len = 8 + rng.int(20);
    seqs.push(Array.from({ length: len }, (_, i) => 3 + ((start + i * step) % 60)));
  }
  return TextDataset.fromSequences(seqs, { seqLen: SEQ, eosId: 2 });
}

export function trainables(m: LlamaForCausalLM): Tensor[] {
  return m.trainableParameters().map(([, p]) => p);
}

/** The usual training objects for the tests. */
export function setup(ctx: Context, o: { seed?: number; lora?: boolean; loraSeed?: number; batch?: number; shuffle?: boolean; lr?: number } = {}) {
  const model = tinyModel(ctx, o.seed ?? 1, { lora: o.lora, loraSeed: o.loraSeed });
  const optimizer = new AdamW(ctx, trainables(model), { lr: o.lr ?? 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });
  const scheduler = new LinearWarmup(optimizer, { warmupSteps: 3 });
  const data = new DataLoader(syntheticDataset(), o.batch ?? 2, { shuffle: o.shuffle ?? true, seed: 11 });
  return { model, optimizer, scheduler, data };
}

/** All trainable values, concatenated (bit patterns compare exactly). */
export async function snapshot(params: Tensor[]): Promise<Uint32Array> {
  const parts = await Promise.all(params.map(async (p) => new Uint32Array(((await p.toArray()) as Float32Array).slice().buffer)));
  const out = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
  let k = 0;
  for (const p of parts) {
    out.set(p, k);
    k += p.length;
  }
  return out;
}

/** The repository root (this file is packages/trainer/src/test/helpers.ts). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
/** The llama-tiny fixture: in `shared/fixtures` beside the repository (as CI checks it out). */
export const FIXTURE = resolve(ROOT, '..', 'shared', 'fixtures', 'llama-tiny');

/** The llama-tiny fixture model in f32: through `loadPretrained` when the loader exports it, else built here. */
export async function loadFixtureModel(ctx: Context): Promise<{ model: LlamaForCausalLM; via: string }> {
  const api = loader as unknown as Record<string, unknown>;
  if (typeof api.loadPretrained === 'function') {
    const r = await (api.loadPretrained as (c: Context, d: string, o: object) => Promise<{ model: LlamaForCausalLM }>)(ctx, FIXTURE, { dtype: 'f32' });
    return { model: r.model, via: 'loadPretrained' };
  }
  const model = new LlamaForCausalLM(ctx, parseLlamaConfig(readFileSync(`${FIXTURE}/config.json`, 'utf8')));
  const st = await loader.readSafetensors(`${FIXTURE}/model.safetensors`);
  const dict = new Map<string, TensorT>();
  for (const name of st.tensors.keys()) dict.set(name, new TensorCls(ctx, await st.upload(ctx, name, { dtype: 'f32' })));
  await st.close();
  model.loadStateDict(dict);
  for (const t of dict.values()) t.dispose();
  return { model, via: 'readSafetensors' };
}
