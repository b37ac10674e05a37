import { createContext, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gradcheck, Tensor, tidy } from '../index';
import { add, div, exp, linear, log, matmul, mean, mul, reshape, scale, sigmoid, silu, square, sub, sum, tanh, transpose } from '../index';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const rnd = (shape: number[], seed: number, opts: { positive?: boolean } = {}) => {
  const t = Tensor.randn(ctx, shape, { seed, requiresGrad: true });
  if (!opts.positive) return t;
  const v = Tensor.fromArray(ctx, [...Float32Array.from({ length: t.size }, (_, i) => 0.5 + ((i * 7919) % 13) / 10)], shape, { requiresGrad: true });
  t.dispose();
  return v;
};

async function check(name: string, fn: (...t: Tensor[]) => Tensor, inputs: Tensor[]) {
  const r = await gradcheck(fn, inputs);
  expect({ name, ok: r.ok, r: r.inputs }).toMatchObject({ name, ok: true });
}

describe('differentiable ops pass gradcheck', () => {
  it('binary ops with broadcasting', async () => {
    const a = rnd([3, 4], 1);
    const b = rnd([4], 2);
    const c = rnd([3, 1], 3, { positive: true });
    await check('add', add, [a, b]);
    await check('sub', sub, [a, c]);
    await check('mul', mul, [a, b]);
    await check('div', div, [a, c]);
  });

  it('unary ops', async () => {
    const x = rnd([2, 5], 4);
    const p = rnd([2, 5], 5, { positive: true });
    for (const [n, f] of [['exp', exp], ['tanh', tanh], ['sigmoid', sigmoid], ['silu', silu], ['square', square]] as const)
      await check(n, f, [x]);
    await check('log', log, [p]);
    await check('scale', (t) => scale(t, -2.5, 1), [x]);
  });

  it('reductions, reshape and transpose', async () => {
    const x = rnd([2, 3, 4], 6);
    await check('sum all', (t) => sum(t), [x]);
    await check('mean axis 1', (t) => mean(t, 1), [x]);
    await check('sum axes 0,2 keep', (t) => sum(t, [0, 2], true), [x]);
    await check('reshape', (t) => mul(reshape(t, [6, 4]), reshape(t, [6, 4])), [x]);
    await check('transpose', (t) => transpose(t, 0, 2), [x]);
  });

  it('matmul in every transpose combination, batched and broadcast, and linear', async () => {
    const a = rnd([2, 3, 5], 7);
    const b = rnd([2, 5, 4], 8);
    await check('nn', (p, q) => matmul(p, q), [a, b]);
    const bt = rnd([2, 4, 5], 9);
    await check('nt', (p, q) => matmul(p, q, { transB: true }), [a, bt]);
    const at = rnd([2, 5, 3], 10);
    await check('tn', (p, q) => matmul(p, q, { transA: true }), [at, b]);
    await check('tt', (p, q) => matmul(p, q, { transA: true, transB: true }), [at, bt]);
    const w2 = rnd([5, 4], 11);
    await check('unbatched B', (p, q) => matmul(p, q), [a, w2]);
    const w = rnd([6, 5], 12);
    const bias = rnd([6], 13);
    await check('linear', (x, ww, bb) => linear(x, ww, bb), [a, w, bias]);
  });

  it('views and every op release their storage: live memory returns to its level after each step', async () => {
    const x = rnd([4, 6], 20);
    const w = rnd([6, 6], 21);
    const step = () =>
      tidy(() => {
        const h = reshape(linear(reshape(x, [2, 2, 6]), w), [4, 6]);
        sum(mul(transpose(h), transpose(h))).backward();
      });
    step();
    x.zeroGrad();
    w.zeroGrad();
    const live = ctx.memory.live;
    for (let i = 0; i < 5; i++) {
      step();
      x.zeroGrad();
      w.zeroGrad();
      expect(ctx.memory.live).toBe(live);
    }
  });

  it('gradients accumulate over uses and into .grad across backward calls', async () => {
    const x = Tensor.fromArray(ctx, [1, 2, 3], [3], { requiresGrad: true });
    sum(mul(x, x)).backward(); // 2x
    sum(add(x, x)).backward(); // +2
    expect(Array.from(await x.grad!.toArray())).toEqual([4, 6, 8]);
  });
});
