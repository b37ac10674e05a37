import { createContext, scale as scaleKernel, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { add, checkpoint, defineOp, linear, mean, square, sum, tanh, Tensor, tidy } from './index';

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

  it("backpropagates through the recomputation with the incoming gradient itself, the recomputed output already dropped", async () => {
    const [n, d] = [64, 32];
    const B = n * d * 4;
    let atProbe = -1;
    let base = 0;
    // y = add(probe(a), a): probe is a copy whose backward notes the live bytes (deep inside the recomputation's backward)
    const probe = defineOp({
      name: 'checkpoint-test-probe',
      forward: (c, [a]) => ({ outputs: scaleKernel(c, a!, 1) }),
      backward: (c, [g]) => {
        atProbe = ctx.memory.live - base;
        return [scaleKernel(c, g!, 1)];
      },
    });
    const x = Tensor.randn(ctx, [n, d], { seed: 3, requiresGrad: true });
    const out = checkpoint((a) => add(probe([a], undefined), a), x);
    const loss = sum(out);
    await ctx.sync();
    base = ctx.memory.live;
    loss.backward();
    // alive then beyond the forward's tensors: the checkpoint's incoming gradient (from sum, which add hands on to
    // both inputs as it is) and the recomputed probe output; no copy of the gradient, no recomputed output (4 B when
    // backward copied the gradient and the output lived until the end)
    expect(atProbe).toBe(2 * B);
    expect(Array.from(await x.grad!.toArray()).every((v) => v === 2)).toBe(true);
    for (const t of [x, out, loss]) t.dispose();
  });
});
