// CausalLM.loss with `logits: false`: the LM head fused with the loss in row chunks (linearCrossEntropy) gives the
// loss and every parameter gradient of the materialised-logits path, in f32 and under f16 compute, untied and tied
// heads; a soft-capped head falls back to the materialised path.
import { createContext, testing, type Context } from '@rusty/backend';
import { tidy, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CausalLM } from './causal-lm';
import { applyLora } from './lora';
import { fixtureConfig, randomModel } from './test-models';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('CausalLM.loss({ logits: false })', () => {
  it.each([
    ['llama-tiny', 'f32'],
    ['llama-tiny', 'f16'],
    ['qwen2-tiny', 'f16'],
    ['gemma3-tiny', 'f32'],
    ['gemma3-tiny', 'f16'],
  ] as const)('%s, %s compute: the loss and every gradient of the materialised path', async (dir, compute) => {
    // gemma3-tiny ties its embeddings; its final soft-capping is switched off to take the fused path
    const m = randomModel(ctx, fixtureConfig(dir, dir === 'gemma3-tiny' ? { final_logit_softcapping: null } : {}), 3);
    m.setComputeDtype(compute);
    const [b, t] = [2, 7];
    const ids = Array.from({ length: b * t }, (_, i) => (i * 37 + 5) % m.config.vocabSize);
    const labels = ids.map((x, i) => (i === 4 ? -100 : x));
    const input = Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' });
    const run = async (logits: boolean) => {
      m.zeroGrad();
      const loss = tidy(() => {
        const r = logits ? m.loss(input, labels) : m.loss(input, labels, { logits: false });
        expect(r.loss.node?.name).toBe(logits ? 'cross_entropy' : 'linear_cross_entropy');
        r.loss.backward();
        return r.loss;
      });
      const grads = new Map<string, Float32Array>();
      for (const [n, p] of m.namedParameters()) grads.set(n, (await p.grad!.toArray()) as Float32Array);
      return { loss: await loss.item(), grads };
    };
    const want = await run(true);
    const got = await run(false);
    expect(Math.abs(got.loss - want.loss) / want.loss).toBeLessThan(1e-6);
    for (const [n, g] of want.grads) expect(testing.relErr(got.grads.get(n)!, g), n).toBeLessThan(1e-5);
    input.dispose();
    m.dispose();
  });

  it('a soft-capped head (Gemma) falls back to the materialised logits, same loss', async () => {
    const m = randomModel(ctx, fixtureConfig('gemma3-tiny', { final_logit_softcapping: 3 }), 4);
    const input = Tensor.fromArray(ctx, [1, 2, 3, 4, 5, 6], [1, 6], { dtype: 'i32' });
    const a = await m.loss(input, [1, 2, 3, 4, 5, 6]).loss.item();
    const fallback = m.loss(input, [1, 2, 3, 4, 5, 6], { logits: false }).loss;
    expect(fallback.node?.name).toBe('cross_entropy');
    const b = await fallback.item();
    expect(b).toBe(a);
    input.dispose();
    m.dispose();
  });
});

describe('CausalLM.f16OperandParameters', () => {
  it('names the untied plain LM head under f16 compute only (not a tied embedding, a LoRA-wrapped head, f32 compute)', () => {
    const m = new CausalLM(ctx, fixtureConfig('llama-tiny'), { empty: true });
    expect(m.f16OperandParameters('f16').map(([n, p]) => [n, p === m.lmHead!.weight])).toEqual([['lm_head.weight', true]]);
    expect(m.f16OperandParameters('f32')).toEqual([]);
    expect(m.f16OperandParameters(null)).toEqual([]);
    m.setComputeDtype('f32'); // the model's own setting wins over the scope's
    expect(m.f16OperandParameters('f16')).toEqual([]);
    m.setComputeDtype('f16');
    expect(m.f16OperandParameters(null)).toHaveLength(1);
    applyLora(m, { r: 2, alpha: 4, targetModules: ['lm_head'] });
    expect(m.f16OperandParameters('f16')).toEqual([]);
    m.dispose();
    const tied = new CausalLM(ctx, fixtureConfig('gemma3-tiny'), { empty: true });
    expect(tied.lmHead).toBeNull();
    expect(tied.f16OperandParameters('f16')).toEqual([]);
    tied.dispose();
  });
});
