import { cast, createContext, ropeInvFreq, swigluBackward, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addRmsNorm, attention, autocast, crossEntropy, embedding, geluTanhGate, gradcheck, mul, rmsNorm, rope, scale, sum, swiglu, Tensor } from '../index';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const rnd = (shape: number[], seed: number, std = 1) => Tensor.randn(ctx, shape, { seed, std, requiresGrad: true });

async function check(name: string, fn: (...t: Tensor[]) => Tensor, inputs: Tensor[]) {
  const r = await gradcheck(fn, inputs);
  expect({ name, ok: r.ok, r: r.inputs }).toMatchObject({ name, ok: true });
}

describe('LLM ops pass gradcheck through autograd', () => {
  it('rmsNorm and the fused residual form (both outputs used)', async () => {
    const x = rnd([3, 10], 1);
    const r = rnd([3, 10], 2);
    const w = rnd([10], 3);
    await check('rmsNorm', (a, b) => rmsNorm(a, b, 1e-5), [x, w]);
    await check('addRmsNorm', (a, b, c) => {
      const [s, y] = addRmsNorm(a, b, c, 1e-5);
      return mul(s, y);
    }, [x, r, w]);
    await check('rmsNorm weightOffset 1', (a, b) => rmsNorm(a, b, 1e-5, { weightOffset: 1 }), [x, w]);
    await check('addRmsNorm weightOffset 1', (a, b, c) => {
      const [s, y] = addRmsNorm(a, b, c, 1e-5, { weightOffset: 1 });
      return mul(s, y);
    }, [x, r, w]);
  });

  it('rope, swiglu, geluTanhGate, embedding', async () => {
    const inv = Tensor.fromArray(ctx, ropeInvFreq({ theta: 10000, headDim: 8 }), [4]);
    await check('rope', (a) => rope(a, inv, { positionOffset: 3 }), [rnd([2, 3, 2, 8], 4)]);
    await check('swiglu', (a, b) => swiglu(a, b), [rnd([4, 6], 5), rnd([4, 6], 6)]);
    await check('geluTanhGate', (a, b) => geluTanhGate(a, b), [rnd([4, 6], 12, 2), rnd([4, 6], 13)]);
    const ids = Tensor.fromArray(ctx, [3, 0, 3, 5], [2, 2], { dtype: 'i32' });
    await check('embedding', (w) => embedding(ids, w), [rnd([7, 5], 7)]);
  });

  it('fused attention (causal, GQA) and cross-entropy with ignored targets', async () => {
    const q = rnd([1, 5, 4, 16], 8, 0.5);
    const k = rnd([1, 5, 2, 16], 9, 0.5);
    const v = rnd([1, 5, 2, 16], 10, 0.5);
    await check('attention', (a, b, c) => attention(a, b, c, { causal: true }), [q, k, v]);
    await check('attention window 2', (a, b, c) => attention(a, b, c, { slidingWindow: 2 }), [q, k, v]);
    await check('attention softcap', (a, b, c) => attention(a, b, c, { softcap: 0.5, scale: 1 }), [q, k, v]);
    const t = Tensor.fromArray(ctx, [1, -100, 4, 0, 2], [5], { dtype: 'i32' });
    await check('crossEntropy', (l) => crossEntropy(l, t), [rnd([5, 6], 11)]);
  });
});

describe('gated activations with f16 gradients (gradsInCompute)', () => {
  // what the backend writes for dgate / dup in f16, as f32 values
  async function f16Grads(g: Tensor, u: Tensor, dy: Tensor): Promise<[Float32Array, Float32Array]> {
    const { dgate, dup } = swigluBackward(ctx, dy.data, cast(ctx, g.data, 'f16'), cast(ctx, u.data, 'f16'), { dtype: 'f16' });
    const out = [cast(ctx, dgate, 'f32'), cast(ctx, dup, 'f32')];
    const r = await Promise.all(out.map(async (t) => new Float32Array(await ctx.read(t.buffer, t.shape.reduce((a, b) => a * b) * 4))));
    for (const t of [dgate, dup, ...out]) ctx.release(t.buffer);
    return [r[0]!, r[1]!];
  }

  it('a leaf gets its 16-bit gradient as f32 .grad; two that meet at a node are summed in f32', async () => {
    const x = rnd([3, 8], 21);
    const w = rnd([3, 8], 22);
    const dy = Tensor.randn(ctx, [3, 8], { seed: 23 });
    // leaves: x as gate, w as up
    const y = autocast('f16', () => swiglu(x, w, { gradsInCompute: true }));
    sum(mul(y, dy)).backward();
    const [dg, du] = await f16Grads(x, w, dy);
    expect(x.grad!.dtype).toBe('f32');
    expect(w.grad!.dtype).toBe('f32');
    expect(await x.grad!.toArray()).toEqual(dg);
    expect(await w.grad!.toArray()).toEqual(du);
    // one node (h = 2 x) as gate and up: its two f16 gradients meet, summed in f32, then scaled into x.grad
    x.grad = null;
    const h = scale(x, 2);
    const y2 = autocast('f16', () => swiglu(h, h, { gradsInCompute: true }));
    sum(mul(y2, dy)).backward();
    const [dg2, du2] = await f16Grads(h, h, dy);
    const want = dg2.map((v, i) => Math.fround(Math.fround(v + du2[i]!) * 2));
    expect(x.grad!.dtype).toBe('f32');
    expect(await x.grad!.toArray()).toEqual(want);
    for (const t of [x, w, dy, y, h, y2]) t.dispose();
  });
});
