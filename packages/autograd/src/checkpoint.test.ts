import { createContext, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpoint, linear, mean, square, tanh, Tensor, tidy } from './index';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('gradient checkpointing', () => {
  it('gives identical gradients with a lower peak memory on a multi-layer stack', async () => {
    const layers = 6;
    const [n, d] = [512, 64];
    const ws = Array.from({ length: layers }, (_, i) => Tensor.randn(ctx, [d, d], { seed: 10 + i, std: 0.1, requiresGrad: true }));
    const x = Tensor.randn(ctx, [n, d], { seed: 1 });
    // a block that keeps 8 activations for backward (as a transformer layer keeps many); checkpointed, 1
    const block = (h: Tensor, w: Tensor) =>
      tidy(() => {
        let a = h;
        for (let i = 0; i < 4; i++) a = tanh(linear(a, w));
        return a;
      });
    const run = async (ckpt: boolean) => {
      ws.forEach((w) => w.zeroGrad(true));
      await ctx.sync();
      ctx.resetPeak();
      const base = ctx.memory.live;
      tidy(() => {
        let h = x;
        for (const w of ws) h = ckpt ? checkpoint((a) => block(a, w), h) : block(h, w);
        mean(square(h)).backward();
      });
      const peak = ctx.memory.peak - base;
      const grads = await Promise.all(ws.map(async (w) => Array.from(await w.grad!.toArray())));
      return { peak, grads };
    };
    const plain = await run(false);
    const ck = await run(true);
    expect(ck.grads).toEqual(plain.grads); // bit-identical: the same kernels recompute the same values
    expect(ck.peak).toBeLessThan(plain.peak * 0.6);
  });
});
