// The gated MLP's memory under f16 autocast: when down_proj runs, only what backward keeps is alive (the f16
// copies of the input, of gate and up, and of the activation), not the f32 gate, up and activation outputs.
import { createContext, sizeClass, type Context } from '@rusty/backend';
import { autocast, sum, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proj } from './attention';
import { GatedMLP } from './mlp';
import { fixtureConfig } from './test-models';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('GatedMLP', () => {
  it('under f16 autocast, the f32 gate, up and activation outputs are released before down_proj runs', async () => {
    const config = fixtureConfig('llama-tiny');
    const { hiddenSize: h, intermediateSize: i } = config;
    const mlp = new GatedMLP(ctx, config, { seed: 1, std: 0.1, requiresGrad: false }, 0);
    const rows = 33;
    const x = Tensor.randn(ctx, [rows, h], { seed: 2, requiresGrad: true });
    await ctx.sync();
    const live0 = ctx.memory.live;
    let atDown = -1;
    const down = proj(mlp, 'down_proj');
    const forward = down.forward.bind(down);
    down.forward = (a: Tensor) => {
      atDown = ctx.memory.live - live0;
      return forward(a);
    };
    const y = autocast('f16', () => mlp.forward(x));
    // x in f16 (gate and up read it), the swiglu's f16 copies of gate and up, the activation in f16
    const f16 = (n: number) => sizeClass(n * 2);
    expect(atDown).toBe(f16(rows * h) + 3 * f16(rows * i));
    sum(y).backward();
    expect(x.grad!.shape).toEqual([rows, h]);
    y.dispose();
    x.dispose();
    mlp.dispose();
  });
});
