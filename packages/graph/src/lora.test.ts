// mergeLora against the unmerged model (f32 and 16-bit base weights), unmerge back to the base weights.
import { createContext, quantSpec, sizeClass, upload, testing, type Context } from '@rusty/backend';
import { add, autocast, linear, loraLinear, noGrad, randn, scale, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CausalLM } from './causal-lm';
import { checkpointSegment, layerSavedRatio } from './checkpoint-segments';
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

  it('checkpointed segments of 1, 2 and 3 layers give the same LoRA gradients bit for bit; each keeps only its input', async () => {
    const config = fixtureConfig('llama-tiny', { num_hidden_layers: 5 });
    const run = async (every: number | null) => {
      const model = randomModel(ctx, config);
      model.gradientCheckpointing = every !== null;
      model.checkpointEvery = every;
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
    const plain = await run(null);
    const one = await run(1);
    const ckptBytes = sizeClass(ids.length * config.hiddenSize * 4);
    for (const k of [2, 3]) {
      const r = await run(k);
      expect(r.grads, `every ${k}`).toEqual(plain.grads);
      // segment inputs: 5 layers in segments of k keep ceil(5 / k) inputs instead of 5
      expect(one.held - r.held, `every ${k}`).toBe((5 - Math.ceil(5 / k)) * ckptBytes);
    }
    expect(one.grads).toEqual(plain.grads);
  });

  it('checkpointSegment: 2 layers a segment at the 1.1B shape under f16, 1 under f32 and for a 2-layer model; checkpointEvery is checked', () => {
    const tiny = parseModelConfig({
      model_type: 'llama', vocab_size: 32000, hidden_size: 2048, intermediate_size: 5632, num_hidden_layers: 22,
      num_attention_heads: 32, num_key_value_heads: 4, max_position_embeddings: 2048, rms_norm_eps: 1e-5,
    });
    expect(layerSavedRatio(tiny, 'f16')).toBeCloseTo(8.25, 10);
    expect(checkpointSegment(tiny, 'f16')).toBe(2);
    expect(checkpointSegment(tiny, 'f32')).toBe(1);
    expect(checkpointSegment(fixtureConfig('llama-tiny'), 'f16')).toBe(1);
    expect(() => new CausalLM(ctx, fixtureConfig('llama-tiny'), { empty: true, checkpointEvery: 0 })).toThrow(/checkpointEvery must be a positive integer or null, got 0/);
  });
});
