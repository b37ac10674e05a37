// sampleToken's rules (greedy, temperature, top-k, top-p, seed) on known distributions, and generate() with
// seeds and stop tokens on a small model.
import { createContext, mulberry32, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleToken } from './generate';
import { fixtureConfig, randomModel } from './test-models';

/** Frequencies of each id over n draws. */
function freqs(logits: number[], o: Parameters<typeof sampleToken>[1], n = 20000, seed = 3): number[] {
  const rand = mulberry32(seed);
  const f = new Array(logits.length).fill(0);
  for (let i = 0; i < n; i++) f[sampleToken(logits, o, rand)]++;
  return f.map((c) => c / n);
}

const P = [0.5, 0.3, 0.15, 0.05];
const L = P.map(Math.log);

describe('sampleToken', () => {
  it('greedy (temperature 0) is the argmax and draws nothing from the generator', () => {
    let calls = 0;
    const rand = () => (calls++, 0.99);
    expect(sampleToken([0.1, 3, -2, 2.9], { temperature: 0 }, rand)).toBe(1);
    expect(sampleToken([5, 3, 7], {}, rand)).toBe(2);
    expect(calls).toBe(0);
  });

  it('temperature 1 samples the softmax; temperature 0.5 sharpens it to p^2 / sum p^2', () => {
    const f1 = freqs(L, { temperature: 1 });
    f1.forEach((f, i) => expect(Math.abs(f - P[i]!), `id ${i}`).toBeLessThan(0.015));
    const z = P.reduce((a, p) => a + p * p, 0);
    const f2 = freqs(L, { temperature: 0.5 });
    f2.forEach((f, i) => expect(Math.abs(f - P[i]! ** 2 / z), `id ${i}`).toBeLessThan(0.015));
  });

  it('top-k keeps the k most likely tokens, renormalised', () => {
    const f = freqs(L, { temperature: 1, topK: 2 });
    expect(f[2]).toBe(0);
    expect(f[3]).toBe(0);
    expect(Math.abs(f[0]! - 0.5 / 0.8)).toBeLessThan(0.015);
    expect(freqs(L, { temperature: 1, topK: 1 }, 2000)).toEqual([1, 0, 0, 0]);
  });

  it('top-p keeps the smallest set whose probability reaches p, renormalised', () => {
    // 0.5 + 0.3 = 0.8 >= 0.7: ids 0 and 1
    const f = freqs(L, { temperature: 1, topP: 0.7 });
    expect([f[2], f[3]]).toEqual([0, 0]);
    expect(Math.abs(f[1]! - 0.3 / 0.8)).toBeLessThan(0.015);
    // 0.5 >= 0.5: id 0 alone
    expect(freqs(L, { temperature: 1, topP: 0.5 }, 2000)).toEqual([1, 0, 0, 0]);
    // 0.95 needs three
    const g = freqs(L, { temperature: 1, topP: 0.95 });
    expect(g[3]).toBe(0);
    expect(g[2]).toBeGreaterThan(0.1);
  });

  it('top-k and top-p together: top-p applies to the top-k renormalised distribution', () => {
    // top-3: 0.5/0.95, 0.3/0.95, 0.15/0.95 = 0.526, 0.316, 0.158; top-p 0.8 needs two of them (0.842)
    const f = freqs(L, { temperature: 1, topK: 3, topP: 0.8 });
    expect([f[2], f[3]]).toEqual([0, 0]);
  });

  it('the same seed gives the same draws; another seed others', () => {
    const draw = (seed: number) => {
      const r = mulberry32(seed);
      return Array.from({ length: 50 }, () => sampleToken(L, { temperature: 1 }, r));
    };
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
  });
});

describe('generate', () => {
  let ctx: Context;
  beforeAll(async () => {
    ctx = await createContext();
  });
  afterAll(() => ctx.destroy());

  it('is reproducible for a seed, stops after a stop token, and refuses bad prompts', async () => {
    const model = randomModel(ctx, fixtureConfig('llama-tiny'));
    const prompt = [3, 14, 15, 92];
    const o = { maxNewTokens: 8, temperature: 1.5, seed: 11, stopTokens: [] };
    const a = await model.generate(prompt, o);
    expect(a.length).toBe(8);
    expect(await model.generate(prompt, o)).toEqual(a);
    const others = await Promise.all([12, 13, 14].map((seed) => model.generate(prompt, { ...o, seed })));
    expect(others.some((b) => b.join() !== a.join())).toBe(true);
    // stop at the first occurrence of a[3] (the stop token is yielded, nothing after it)
    const stop = a[3]!;
    const cut = await model.generate(prompt, { ...o, stopTokens: [stop] });
    expect(cut).toEqual(a.slice(0, a.indexOf(stop) + 1));
    await expect(model.generate([], o)).rejects.toThrow(/prompt is empty/);
    await expect(model.generate([256], o)).rejects.toThrow(/outside the vocabulary/);
    model.dispose();
  });

  it('greedy decoding picks its tokens on the GPU: the same ids as on the host at every lookahead, stop tokens and all', async () => {
    for (const arch of ['llama-tiny', 'qwen3-tiny', 'gemma3-tiny'] as const) {
      const model = randomModel(ctx, fixtureConfig(arch));
      const prompt = [3, 14, 15, 92, 65];
      const o = { maxNewTokens: 10, temperature: 0, stopTokens: [] };
      const host = await model.generate(prompt, { ...o, lookahead: 0 });
      expect(host.length, arch).toBe(10);
      const live = ctx.memory.live;
      for (const lookahead of [1, 2, 5, 20]) expect(await model.generate(prompt, { ...o, lookahead }), `${arch} lookahead ${lookahead}`).toEqual(host);
      expect(ctx.memory.live, `${arch}: buffers left behind`).toBe(live);
      // fewer steps than the lookahead; a stop token with encoded steps after it (dropped)
      expect(await model.generate(prompt, { ...o, maxNewTokens: 1 })).toEqual(host.slice(0, 1));
      const stop = host[4]!;
      const cut = host.slice(0, host.indexOf(stop) + 1);
      expect(await model.generate(prompt, { ...o, stopTokens: [stop], lookahead: 0 })).toEqual(cut);
      expect(await model.generate(prompt, { ...o, stopTokens: [stop], lookahead: 3 })).toEqual(cut);
      expect(ctx.memory.live, `${arch}: buffers left behind after a stop`).toBe(live);
      model.dispose();
    }
    const model = randomModel(ctx, fixtureConfig('llama-tiny'));
    await expect(model.generate([1, 2], { temperature: 0, lookahead: -1 })).rejects.toThrow(/lookahead must be a non-negative integer/);
    model.dispose();
  });

  it('submits a step in pieces (submitEvery), with the same tokens, and gives the context its own setting back', async () => {
    const model = randomModel(ctx, fixtureConfig('llama-tiny'));
    const prompt = [3, 14, 15, 92];
    const o = { maxNewTokens: 6, temperature: 0, stopTokens: [] };
    const submits = async (every: number) => {
      const s0 = ctx.stats.submits;
      const ids = await model.generate(prompt, { ...o, submitEvery: every });
      return { ids, submits: ctx.stats.submits - s0 };
    };
    const whole = await submits(1 << 20);
    const pieces = await submits(4);
    expect(pieces.ids).toEqual(whole.ids);
    expect(whole.submits).toBe(6); // one per step: the read-back of its logits
    expect(pieces.submits).toBeGreaterThan(6 * 4); // every step has more than 16 dispatches
    // the context's own limit (4096 by default) is back, also after generators that ran at once
    expect(ctx.dispatchesPerSubmit).toBe(4096);
    const [a, b] = await Promise.all([model.generate(prompt, { ...o, submitEvery: 5 }), model.generate(prompt, { ...o, submitEvery: 7 })]);
    expect([a, b]).toEqual([whole.ids, whole.ids]);
    expect(ctx.dispatchesPerSubmit).toBe(4096);
    await expect(model.generate(prompt, { ...o, submitEvery: 0 })).rejects.toThrow(/submitEvery must be a positive integer/);
    expect(() => ctx.capDispatchesPerSubmit(1.5)).toThrow(/positive integer/);
    expect(ctx.dispatchesPerSubmit).toBe(4096);
    model.dispose();
  });
});
