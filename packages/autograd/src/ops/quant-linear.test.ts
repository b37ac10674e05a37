// quantLinear through autograd: the input (and bias) gradients against finite differences (gradcheck), for the
// fused kernel on many rows and the decode GEMV on few; the quantized weight gets no gradient.
import { createContext, quantize, quantSpec, releaseQuant, upload, type Context, type QuantTensor } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gradcheck, quantLinear, Tensor } from '../index';

let ctx: Context;
let w: QuantTensor;
beforeAll(async () => {
  ctx = await createContext();
  const W = Tensor.randn(ctx, [9, 70], { seed: 4, std: 0.2 });
  w = quantize(ctx, W.data, quantSpec('nf4', 64, true));
});
afterAll(() => {
  releaseQuant(ctx, w);
  ctx.destroy();
});

describe('quantLinear', () => {
  for (const rows of [3, 20])
    it(`passes gradcheck in x and the bias (${rows} rows)`, async () => {
      const x = Tensor.randn(ctx, [rows, 70], { seed: rows, requiresGrad: true });
      const b = Tensor.randn(ctx, [9], { seed: 7, requiresGrad: true });
      const r = await gradcheck((a, c) => quantLinear(a, w, c), [x, b]);
      expect(r.ok, JSON.stringify(r.inputs)).toBe(true);
    });

  it('refuses an input that does not end in in_features', () => {
    const x = new Tensor(ctx, upload(ctx, new Float32Array(2 * 69), [2, 69]), true);
    expect(() => quantLinear(x, w)).toThrow(/in_features 70/);
  });
});
