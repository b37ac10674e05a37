// Every architecture (Llama in f32/f16/bf16, Mistral with a window shorter than the inputs, Qwen2, Qwen3, Gemma 3),
// LoRA, generation and AdamW against the golden outputs of HF transformers + peft (../shared/fixtures, float64
// references), loaded with the default options. Tolerances are the fixtures README's.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, testing, type Context } from '@rusty/backend';
import { AdamW, clipGradNorm, LinearWarmup, Tensor, tidy } from '@rusty/autograd';
import type { CausalLM } from '@rusty/graph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLoraAdapter, saveLoraAdapter } from './peft';
import { FIX, FIXTURES, fixtureInputs, fixtureTensors } from './fixture-data';
import { loadPretrained } from './pretrained';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

// Every reference was computed on the checkpoint as `from_pretrained` loads it: inv_freq in f32 whatever the
// weights' dtype, so every test loads with the default options.
for (const dir of FIXTURES) {
  describe(`${dir} matches HF transformers`, () => {
    let model: CausalLM;
    let exp: Map<string, Float32Array>;
    let ej: { loss: number; lora_loss: number; greedy_prompt: number[]; greedy_tokens: number[]; adamw: any };
    beforeAll(async () => {
      ({ model } = await loadPretrained(ctx, join(FIX, dir)));
      exp = await fixtureTensors(join(FIX, dir, 'expected.safetensors'));
      ej = JSON.parse(await readFile(join(FIX, dir, 'expected.json'), 'utf8'));
    });
    afterAll(() => model.dispose());

    it('logits, every hidden state, the loss and every parameter gradient', async () => {
      const { ids, labels, b, t } = await fixtureInputs(dir);
      const input = Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' });
      const out = model.forwardWithHidden(input, { outputHiddenStates: true });
      expect(rel(await out.logits.toArray(), exp.get('logits')!)).toBeLessThan(1e-4);
      expect(out.hiddenStates!.length).toBe(3);
      for (let i = 0; i < 3; i++) expect(rel(await out.hiddenStates![i]!.toArray(), exp.get(`hidden.${i}`)!), `hidden.${i}`).toBeLessThan(1e-4);
      model.zeroGrad();
      const { loss } = model.loss(input, labels);
      const l = await loss.item();
      expect(Math.abs(l - ej.loss) / ej.loss).toBeLessThan(1e-4);
      loss.backward();
      const names = new Set<string>();
      for (const [name, p] of model.namedParameters()) {
        const want = exp.get(`grad.${name}`);
        expect(want, name).toBeDefined();
        expect(rel(await p.grad!.toArray(), want!), name).toBeLessThan(1e-3);
        names.add(name);
      }
      // and the model has every parameter HF has (tied embeddings: HF reports lm_head.weight as a view)
      const hf = [...exp.keys()].filter((k) => k.startsWith('grad.')).map((k) => k.slice(5));
      expect(hf.filter((k) => !names.has(k) && !(k === 'lm_head.weight' && model.lmHead === null))).toEqual([]);
      model.zeroGrad();
    });

    it('greedy generation with the KV cache reproduces greedy_tokens', async () => {
      const got = await model.generate(ej.greedy_prompt, { maxNewTokens: ej.greedy_tokens.length, temperature: 0, stopTokens: [] });
      expect(got).toEqual(ej.greedy_tokens);
    });

    it('the PEFT adapter: logits, loss and LoRA gradients; saved and reloaded to the same values', async () => {
      const { model: m } = await loadPretrained(ctx, join(FIX, dir));
      await loadLoraAdapter(m, join(FIX, dir, 'lora'));
      const lexp = await fixtureTensors(join(FIX, dir, 'lora', 'expected.safetensors'));
      const { ids, labels, b, t } = await fixtureInputs(dir);
      const input = Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' });
      const logits = await m.forward(input).toArray();
      expect(rel(logits, lexp.get('logits')!)).toBeLessThan(1e-4);
      const { loss } = m.loss(input, labels);
      expect(Math.abs((await loss.item()) - ej.lora_loss) / ej.lora_loss).toBeLessThan(1e-4);
      loss.backward();
      const trainable = m.trainableParameters();
      expect(trainable.length).toBe(m.config.numHiddenLayers * 7 * 2);
      for (const [name, p] of trainable) {
        const key = `grad.base_model.model.${name.replace(/\.(lora_[AB])\.weight$/, '.$1.default.weight')}`;
        expect(lexp.get(key), key).toBeDefined();
        expect(rel(await p.grad!.toArray(), lexp.get(key)!), name).toBeLessThan(1e-3);
      }
      const tmp = await mkdtemp(join(tmpdir(), 'rusty-lora-'));
      try {
        await saveLoraAdapter(m, tmp);
        const { model: m2 } = await loadPretrained(ctx, join(FIX, dir));
        await loadLoraAdapter(m2, tmp);
        const again = await m2.forward(input).toArray();
        expect(rel(again, logits)).toBe(0);
        m2.dispose();
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
      m.dispose();
    });

    it('5 AdamW steps (warm-up, clipping, weight decay) reproduce the losses and the parameters', async () => {
      const { model: m } = await loadPretrained(ctx, join(FIX, dir));
      const { ids, labels, b, t } = await fixtureInputs(dir);
      const input = Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' });
      const a = ej.adamw;
      const params = m.parameters();
      const opt = new AdamW(ctx, params, { lr: a.lr, betas: a.betas, eps: a.eps, weightDecay: a.weight_decay });
      const sched = new LinearWarmup(opt, { warmupSteps: a.warmup_steps });
      for (let s = 0; s < a.losses.length; s++) {
        opt.zeroGrad();
        const loss = tidy(() => {
          const l = m.loss(input, labels).loss;
          l.backward();
          return l;
        });
        const clip = clipGradNorm(params, a.clip);
        const norm = (await ctx.read(clip.buffer, 8).then((x) => new Float32Array(x)))[1]!;
        opt.step({ gradScale: clip });
        sched.step();
        ctx.release(clip.buffer);
        const l = await loss.item();
        loss.dispose();
        expect(Math.abs(l - a.losses[s]) / a.losses[s], `loss ${s}`).toBeLessThan(1e-4);
        expect(Math.abs(norm - a.grad_norms_before_clip[s]) / a.grad_norms_before_clip[s], `norm ${s}`).toBeLessThan(1e-3);
      }
      const after = await fixtureTensors(join(FIX, dir, 'after_adamw.safetensors'));
      for (const [name, p] of m.namedParameters()) expect(rel(await p.toArray(), after.get(name)!), name).toBeLessThan(1e-3);
      opt.dispose();
      m.dispose();
    });
  });
}

// The 16-bit fixtures are references of the checkpoints as loaded, not of `model.to(float16)`: rounding inv_freq to
// the weights' dtype, as the latter does, must miss them (so the default above is what makes them pass).
for (const dir of ['llama-tiny-f16', 'llama-tiny-bf16']) {
  it(`${dir}: inv_freq rounded to 16 bits (what model.to(float16) does, not from_pretrained) misses the logits`, async () => {
    const exp = await fixtureTensors(join(FIX, dir, 'expected.safetensors'));
    const { model: m } = await loadPretrained(ctx, join(FIX, dir), { ropeDtype: dir.endsWith('bf16') ? 'bf16' : 'f16' });
    const { ids, b, t } = await fixtureInputs(dir);
    const err = rel(await m.forward(Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' })).toArray(), exp.get('logits')!);
    expect(err).toBeGreaterThan(1e-4);
    m.dispose();
  });
}
