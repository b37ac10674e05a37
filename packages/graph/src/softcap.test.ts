// Gemma's soft-capping fields are honoured when a config sets them: final logits become cap * tanh(logits / cap),
// attention scores are capped inside the fused kernels (forward, and the KV-cache decode path agrees).
import { createContext, testing, type Context } from '@rusty/backend';
import { noGrad, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KVCache } from './kv-cache';
import { fixtureConfig, randomModel } from './test-models';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const ids = [3, 77, 120, 5, 9, 250, 31, 64, 200, 1];
const T = ids.length;
const forward = (m: ReturnType<typeof randomModel>) =>
  noGrad(() => m.forward(Tensor.fromArray(ctx, ids, [1, T], { dtype: 'i32' }))).toArray() as Promise<Float32Array>;

describe('soft-capping (gemma3_text)', () => {
  it('final_logit_softcapping: logits are cap * tanh(logits / cap) of the uncapped model', async () => {
    const plain = randomModel(ctx, fixtureConfig('gemma3-tiny'));
    const capped = randomModel(ctx, fixtureConfig('gemma3-tiny', { final_logit_softcapping: 0.5 }));
    const a = await forward(plain);
    const b = await forward(capped);
    expect(Math.max(...Array.from(a, Math.abs))).toBeGreaterThan(0.5); // the cap bites
    const want = Array.from(a, (x) => 0.5 * Math.tanh(x / 0.5));
    expect(testing.absErr(b, want)).toBeLessThan(1e-5);
    plain.dispose();
    capped.dispose();
  });

  it('attn_logit_softcapping changes the scores, and the KV-cache decode path caps them the same way', async () => {
    const plain = randomModel(ctx, fixtureConfig('gemma3-tiny'));
    const config = fixtureConfig('gemma3-tiny', { attn_logit_softcapping: 0.3 });
    const capped = randomModel(ctx, config);
    capped.eval();
    const full = await forward(capped);
    expect(testing.absErr(full, await forward(plain))).toBeGreaterThan(1e-3);
    const cache = new KVCache(ctx, config, 1, T);
    const V = config.vocabSize;
    const got = new Float32Array(T * V);
    for (let t = 0; t < T; t++) {
      const l = (await noGrad(() => capped.forward(Tensor.fromArray(ctx, [ids[t]!], [1, 1], { dtype: 'i32' }), cache)).toArray()) as Float32Array;
      got.set(l, t * V);
    }
    expect(testing.absErr(got, full) / Math.max(...Array.from(full, Math.abs))).toBeLessThan(1e-4);
    cache.dispose();
    plain.dispose();
    capped.dispose();
  });
});
