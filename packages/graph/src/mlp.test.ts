// The gated MLP's memory under f16 autocast: when down_proj runs, only what backward keeps is alive (the f16
// copies of the input, of gate and up, and of the activation), not the f32 gate, up and activation outputs; the
// activation and (for projections that round it so) the gradients of gate and up are written in f16, and every
// projection reads the values it read from the f32 tensors, bit for bit.
import { createContext, sizeClass, testing, upload, type Context, type DeviceTensor } from '@rusty/backend';
import { autocast, geluTanhGate, mul, sum, swiglu, Tensor, tidy, toCompute } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compute, proj } from './attention';
import { applyLora } from './lora';
import type { ModelConfig } from './config';
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

  /** The MLP as it ran before the f16 activation and gradients: f32 activation, cast for down_proj, f32 gradients. */
  const f32Path = (mlp: GatedMLP, x: Tensor): Tensor =>
    tidy(() => {
      const xc = toCompute(x);
      const g = proj(mlp, 'gate_proj').forward(xc);
      const u = proj(mlp, 'up_proj').forward(xc);
      const a = (mlp.config.hiddenAct === 'gelu_tanh' ? geluTanhGate : swiglu)(g, u);
      g.dispose();
      u.dispose();
      return proj(mlp, 'down_proj').forward(compute(a));
    });

  /** A new buffer of random values (std 0.3) for a parameter to take over. */
  const randnData = (shape: readonly number[], seed: number): DeviceTensor => upload(ctx, testing.randn(shape.reduce((a, b) => a * b, 1), seed, 0.3), shape);

  const bits = async (t: Tensor) => new Uint32Array((await t.toArray()).buffer);

  /** Output, input gradient and every trainable parameter's gradient of `run`, as bits. */
  async function grads(mlp: GatedMLP, x: Tensor, run: (m: GatedMLP, x: Tensor) => Tensor, dy: Tensor): Promise<Uint32Array[]> {
    mlp.zeroGrad?.();
    x.grad = null;
    for (const [, p] of mlp.namedParameters()) p.grad = null;
    const y = autocast('f16', () => run(mlp, x));
    sum(mul(y, dy)).backward();
    const out = [await bits(y), await bits(x.grad!)];
    for (const [, p] of mlp.namedParameters()) if (p.requiresGrad) out.push(await bits(p.grad!));
    y.dispose();
    return out;
  }

  const llama = fixtureConfig('llama-tiny');
  const cases: [string, ModelConfig, 'frozen' | 'lora' | 'full'][] = [
    ['silu, frozen projections', llama, 'frozen'],
    ['silu, LoRA on all three', llama, 'lora'],
    ['gelu_tanh, trainable weights and biases: gradients of gate and up stay f32', { ...fixtureConfig('llama-tiny', { mlp_bias: true }), hiddenAct: 'gelu_tanh' }, 'full'],
  ];
  for (const [name, config, mode] of cases)
    it(`under f16 autocast: output and gradients equal the f32-activation path bit for bit (${name})`, async () => {
      const mlp = new GatedMLP(ctx, config, { seed: 3, std: 0.1, requiresGrad: mode === 'full' }, 0);
      if (mode === 'lora') {
        applyLora(mlp, { r: 4, alpha: 8, targetModules: ['gate_proj', 'up_proj', 'down_proj'], seed: 5 });
        // B starts at zero: random B so that every product of the update matters
        for (const [n, p] of mlp.namedParameters()) if (n.endsWith('lora_B.weight')) p.assign(randnData(p.shape, 9));
      }
      if (mode === 'full') for (const [n, p] of mlp.namedParameters()) if (n.endsWith('bias')) p.assign(randnData(p.shape, 11));
      const rows = 37;
      const x = Tensor.randn(ctx, [rows, config.hiddenSize], { seed: 4, requiresGrad: true });
      const dy = Tensor.randn(ctx, [rows, config.hiddenSize], { seed: 6, std: 50 });
      const want = await grads(mlp, x, f32Path, dy);
      const got = await grads(mlp, x, (m, v) => m.forward(v), dy);
      expect(got.length).toBe(mode === 'frozen' ? 2 : 8);
      got.forEach((g, i) => expect(g, `tensor ${i}`).toEqual(want[i]));
      x.dispose();
      dy.dispose();
      mlp.dispose();
    });

  it('under f16 autocast: the activation is written in f16 (forward peak) and the LoRA projections get f16 gradients (backward peak)', async () => {
    const config = fixtureConfig('llama-tiny');
    const { hiddenSize: h, intermediateSize: i } = config;
    const mlp = new GatedMLP(ctx, config, { seed: 1, std: 0.1, requiresGrad: false }, 0);
    applyLora(mlp, { r: 4, alpha: 8, targetModules: ['gate_proj', 'up_proj', 'down_proj'], seed: 5 });
    const rows = 512; // [rows, i] tensors well above the weights
    const x = Tensor.randn(ctx, [rows, h], { seed: 2, requiresGrad: true });
    const peaks = async (run: (m: GatedMLP, x: Tensor) => Tensor) => {
      await ctx.sync();
      ctx.resetPeak();
      const live0 = ctx.memory.live;
      const y = autocast('f16', () => run(mlp, x));
      const fwd = ctx.memory.peak - live0;
      const live1 = ctx.memory.live;
      ctx.resetPeak();
      sum(y).backward();
      const bwd = ctx.memory.peak - live1;
      y.dispose();
      x.grad = null;
      for (const [, p] of mlp.namedParameters()) p.grad = null;
      return { fwd, bwd };
    };
    const before = await peaks(f32Path);
    const now = await peaks((m, v) => m.forward(v));
    const f16 = (n: number) => sizeClass(n * 2);
    const f32 = (n: number) => sizeClass(n * 4);
    // forward peak, at the activation: x in f16, f32 gate and up, the activation and the f16 copies of gate and up
    // (each LoRA projection's u = x A^T, f32 [rows, 4], beside them)
    expect(now.fwd - 2 * sizeClass(rows * 4 * 4)).toBe(f16(rows * h) + 2 * f32(rows * i) + 3 * f16(rows * i));
    expect(before.fwd - now.fwd).toBe(f32(rows * i) - f16(rows * i));
    // backward: dgate and dup in f16 instead of f32
    expect(before.bwd - now.bwd).toBe(2 * (f32(rows * i) - f16(rows * i)));
    x.dispose();
    mlp.dispose();
  });
});
