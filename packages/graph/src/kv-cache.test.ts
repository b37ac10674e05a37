// The KV-cache paths (prefill, a multi-token chunk after a prefix, one-token decode) against the full forward,
// for every architecture, with Mistral's and Gemma's sliding windows shorter than the sequence.
import { createContext, testing, type Context } from '@rusty/backend';
import { noGrad, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KVCache } from './kv-cache';
import { ARCH_FIXTURES, fixtureConfig, randomModel } from './test-models';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const T = 13;
const ids = Array.from({ length: T }, (_, i) => (i * 37 + 11) % 256);

describe('KV cache', () => {
  for (const dir of ARCH_FIXTURES) {
    it(`${dir}: prefill, a chunk after a prefix and one-token steps give the full forward's logits, past the window`, async () => {
      // windows of 3 and 6 keys: well inside the 13 positions
      const config = fixtureConfig(dir, dir === 'mistral-tiny' ? { sliding_window: 3 } : {});
      const model = randomModel(ctx, config);
      model.eval();
      const V = config.vocabSize;
      const full = await noGrad(() => model.forward(Tensor.fromArray(ctx, ids, [1, T], { dtype: 'i32' }))).toArray();
      const cache = new KVCache(ctx, config, 1, T);
      const got = new Float32Array(T * V).fill(NaN);
      let pos = 0;
      for (const n of [4, 3, 1, 1, 1, 1, 1, 1]) {
        const chunk = ids.slice(pos, pos + n);
        const l = await noGrad(() => model.forward(Tensor.fromArray(ctx, chunk, [1, n], { dtype: 'i32' }), cache)).toArray();
        got.set(l, pos * V);
        pos += n;
      }
      expect(pos).toBe(T);
      expect(cache.length).toBe(T);
      for (let t = 0; t < T; t++)
        expect(rel(got.subarray(t * V, (t + 1) * V), (full as Float32Array).subarray(t * V, (t + 1) * V)), `${dir} position ${t}`).toBeLessThan(1e-4);
      cache.dispose();
      model.dispose();
    });
  }

  it('refuses a batch or a length it was not made for', () => {
    const config = fixtureConfig('llama-tiny');
    const model = randomModel(ctx, config);
    const cache = new KVCache(ctx, config, 1, 4);
    expect(() => noGrad(() => model.forward(Tensor.fromArray(ctx, [1, 2, 3, 4, 5], [1, 5], { dtype: 'i32' }), cache))).toThrow(/KV cache is full/);
    expect(() => noGrad(() => model.forward(Tensor.fromArray(ctx, [1, 2, 1, 2], [2, 2], { dtype: 'i32' }), cache))).toThrow(/holds 1 sequences/);
    cache.dispose();
    model.dispose();
  });
});
