// mergeLora against the unmerged model (f32 and 16-bit base weights), unmerge back to the base weights.
import { createContext, quantSpec, sizeClass, upload, testing, type Context } from '@rusty/backend';
import { add, autocast, linear, loraLinear, noGrad, randn, scale, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CausalLM } from './causal-lm';
import { checkpointSegments, layerSavedRatio } from './checkpoint-segments';
import { parseModelConfig } from './registry';
import { Linear } from './layers';
import { applyLora, LoraLinear, loraModules, mergeLora, unmergeLora } from './lora';
import { quantizeLinears } from './quant-linear';
import { fixtureConfig, randomModel } from './test-models';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const ids = [5, 17, 200, 3, 99, 42, 7, 250];
const logits = (m: CausalLM) => noGrad(() => m.forward(Tensor.fromArray(ctx, ids, [1, ids.length], { dtype: 'i32' }))).toArray();

describe('mergeLora', () => {
  for (const dir of ['llama-tiny', 'qwen2-tiny', 'gemma3-tiny']) {
    it(`${dir}: the merged model gives the adapted model's logits; unmerging restores the base weights`, async () => {
      const model = randomModel(ctx, fixtureConfig(dir));
      const base = await logits(model);
      const before = new Map(await Promise.all([...model.namedParameters()].map(async ([n, p]) => [n, await p.toArray()] as const)));
      applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], seed: 2 });
      let i = 0;
      for (const l of loraModules(model).values()) l.loraB.assign(upload(ctx, randn(l.loraB.size, 100 + i++, 0.1), l.loraB.shape));
      const adapted = await logits(model);
      expect(rel(adapted, base)).toBeGreaterThan(1e-2);
      mergeLora(model);
      expect(rel(await logits(model), adapted)).toBeLessThan(1e-5);
      unmergeLora(model);
      expect(rel(await logits(model), adapted)).toBeLessThan(1e-5);
      for (const [n, p] of model.namedParameters()) {
        const b = before.get(n);
        if (b) expect(rel(await p.toArray(), b), n).toBeLessThan(1e-6);
      }
      model.dispose();
    });
  }

  it('merges into bf16 base weights in their dtype (to bf16 rounding)', async () => {
    const config = fixtureConfig('llama-tiny');
    const model = new CausalLM(ctx, config, { seed: 3, initStd: 0.1, dtype: 'bf16' });
    applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'], seed: 2 });
    for (const l of loraModules(model).values()) l.loraB.assign(upload(ctx, randn(l.loraB.size, 9, 0.1), l.loraB.shape));
    const adapted = await logits(model);
    mergeLora(model);
    const q = model.layers[0]!.child('self_attn')!.child('q_proj') as unknown as { base: { weight: Tensor } };
    expect(q.base.weight.dtype).toBe('bf16');
    const err = rel(await logits(model), adapted);
    expect(err).toBeLessThan(2e-2);
    expect(err).toBeGreaterThan(0);
    model.dispose();
  });

  it('LoraLinear runs the fused loraLinear under f16 autocast and the composition in f32', async () => {
    const lin = new Linear(ctx, 24, 10, { seed: 3 });
    const l = new LoraLinear(lin, 4, 8, 5);
    l.loraB.assign(upload(ctx, randn(l.loraB.size, 6, 0.1), l.loraB.shape));
    const x = Tensor.fromArray(ctx, randn(3 * 24, 7), [3, 24]);
    const f32 = await noGrad(() => l.forward(x)).toArray();
    const composed = await noGrad(() => add(linear(x, lin.weight), scale(linear(linear(x, l.loraA), l.loraB), l.scaling))).toArray();
    expect([...f32]).toEqual([...composed]);
    const f16 = await noGrad(() => autocast('f16', () => l.forward(x))).toArray();
    const fused = await noGrad(() => loraLinear(x, lin.weight, null, l.loraA, l.loraB, l.scaling, { compute: 'f16' })).toArray();
    expect([...f16]).toEqual([...fused]);
    expect(rel(f16, f32)).toBeGreaterThan(1e-6);
    // which op ran (A is trainable, so the outputs record their op)
    const y32 = l.forward(x);
    const y16 = autocast('f16', () => l.forward(x));
    expect(y32.node?.name).not.toBe('lora-linear');
    expect(y16.node?.name).toBe('lora-linear');
    y32.dispose();
    y16.dispose();
    x.dispose();
    l.dispose();
  });

  it('gradient checkpointing gives the same LoRA gradients under f16 autocast, on a dense and on an NF4 base', async () => {
    const grads = async (ckpt: boolean, nf4: boolean) => {
      const model = randomModel(ctx, fixtureConfig('llama-tiny'));
      if (nf4) quantizeLinears(model, quantSpec('nf4', 64, true));
      model.gradientCheckpointing = ckpt;
      applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], seed: 2 });
      let i = 0;
      for (const l of loraModules(model).values()) l.loraB.assign(upload(ctx, randn(l.loraB.size, 200 + i++, 0.1), l.loraB.shape));
      const input = Tensor.fromArray(ctx, ids, [1, ids.length], { dtype: 'i32' });
      const loss = autocast('f16', () => model.loss(input, ids, { logits: false }).loss);
      loss.backward();
      const out = await Promise.all(model.trainableParameters().map(async ([, p]) => Array.from(await p.grad!.toArray())));
      loss.dispose();
      input.dispose();
      model.dispose();
      return out;
    };
    for (const nf4 of [false, true]) expect(await grads(true, nf4), nf4 ? 'nf4' : 'dense').toEqual(await grads(false, nf4));
  });

  it('checkpointed segments (1, 2, 3 layers each, and the schedule) give the same LoRA gradients bit for bit; each keeps only its input', async () => {
    const layers = 20;
    const config = fixtureConfig('llama-tiny', { num_hidden_layers: layers });
    const schedule = checkpointSegments(config, 'f16');
    expect(new Set(schedule).size).toBeGreaterThan(1); // not uniform: longer segments first
    const run = async (mode: 'plain' | 'auto' | number) => {
      const model = randomModel(ctx, config);
      model.gradientCheckpointing = mode !== 'plain';
      model.checkpointEvery = typeof mode === 'number' ? mode : null;
      applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], seed: 2 });
      let i = 0;
      for (const l of loraModules(model).values()) l.loraB.assign(upload(ctx, randn(l.loraB.size, 300 + i++, 0.1), l.loraB.shape));
      const input = Tensor.fromArray(ctx, ids, [1, ids.length], { dtype: 'i32' });
      await ctx.sync();
      const live0 = ctx.memory.live;
      const loss = autocast('f16', () => model.loss(input, ids, { logits: false }).loss);
      const held = ctx.memory.live - live0; // what the forward keeps for backward
      loss.backward();
      const grads = await Promise.all(model.trainableParameters().map(async ([, p]) => Array.from(await p.grad!.toArray())));
      loss.dispose();
      input.dispose();
      model.dispose();
      return { grads, held };
    };
    const plain = await run('plain');
    const one = await run(1);
    expect(one.grads).toEqual(plain.grads);
    const ckptBytes = sizeClass(ids.length * config.hiddenSize * 4);
    for (const [mode, segments] of [[2, 10], [3, 7], ['auto', schedule.length]] as const) {
      const r = await run(mode);
      expect(r.grads, `segments ${mode}`).toEqual(plain.grads);
      // one input kept per segment instead of one per layer
      expect(one.held - r.held, `segments ${mode}`).toBe((layers - segments) * ckptBytes);
    }
  });

  it('checkpointSegments: 7 x 2 then 8 x 1 layers at the 1.1B shape under f16; longer segments under f16 than f32; checkpointEvery is checked', () => {
    const tiny = parseModelConfig({
      model_type: 'llama', vocab_size: 32000, hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22,
      num_attention_heads: 32, num_key_value_heads: 4, max_position_embeddings: 2048, rms_norm_eps: 1e-5,
    });
    expect(layerSavedRatio(tiny, 'f16')).toBeCloseTo(8.25, 10);
    expect(layerSavedRatio(tiny, 'f32')).toBeCloseTo(14.5, 10);
    expect(checkpointSegments(tiny, 'f16')).toEqual([...Array(7).fill(2), ...Array(8).fill(1)]);
    expect(checkpointSegments(tiny, 'f32')).toEqual([...Array(4).fill(2), ...Array(14).fill(1)]);
    expect(checkpointSegments(fixtureConfig('llama-tiny'), 'f16')).toEqual([1, 1]);
    // the largest segment cost (j + 1) + (L_j - 1) r is below one layer per segment's
    const cost = (s: number[], r: number) => Math.max(...s.map((l, j) => j + 1 + (l - 1) * r));
    expect(cost(checkpointSegments(tiny, 'f16'), 8.25)).toBe(15.25);
    expect(() => new CausalLM(ctx, fixtureConfig('llama-tiny'), { empty: true, checkpointEvery: 0 })).toThrow(/checkpointEvery must be a positive integer or null, got 0/);
  });
});
