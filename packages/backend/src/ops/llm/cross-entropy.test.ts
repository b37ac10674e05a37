import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { finiteDiff, randn, relErr, rng } from '../../testing';
import { llmTuning } from './common';
import { crossEntropy, crossEntropyCount } from './cross-entropy';
import { get, poisoned, randTensor } from './test-util';
import { refCrossEntropy as refLoss, refCrossEntropyGrad as refGrad, type RefOpts } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

function targetsFor(n: number, v: number, seed: number, ignoreEvery = 0, ignore = -100): number[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => (ignoreEvery && i % ignoreEvery === 1 ? ignore : Math.floor(r() * v)));
}

describe('crossEntropy', () => {
  it('reference gradient matches finite differences (smoothing, ignored rows)', () => {
    const n = 4;
    const v = 5;
    const x = randn(n * v, 1, 2);
    const tg = [3, -100, 0, 4];
    for (const o of [
      { ignore: -100, eps: 0, mean: true },
      { ignore: -100, eps: 0.2, mean: true },
      { ignore: -100, eps: 0.1, mean: false },
    ]) {
      const fd = finiteDiff((xx) => refLoss(xx, tg, v, o).loss, x);
      expect(relErr(refGrad(x, tg, v, o), fd)).toBeLessThan(1e-7);
    }
  });

  const cases: [number, number, DType, RefOpts, number][] = [
    [1, 17, 'f32', { ignore: -100, eps: 0, mean: true }, 0],
    [37, 1000, 'f32', { ignore: -100, eps: 0, mean: true }, 5],
    [37, 100, 'bf16', { ignore: 7, eps: 0.1, mean: true }, 3],
    [5, 64, 'f16', { ignore: -100, eps: 0, mean: false }, 4],
    [3, 32000, 'bf16', { ignore: -100, eps: 0, mean: true }, 0], // cached: 16 pairs per thread
    [3, 32001, 'f32', { ignore: -100, eps: 0.05, mean: true }, 2], // 32 per thread, cached
    [2, 131072, 'f16', { ignore: -100, eps: 0, mean: true }, 0], // 128k vocabulary, streamed
    [5000, 8, 'f32', { ignore: -100, eps: 0, mean: true }, 3], // many rows: the unrolled count and mean
  ];
  for (const [n, v, dt, o, ignoreEvery] of cases) {
    it(`loss and dlogits ${dt}[${n}, ${v}] eps ${o.eps} ${o.mean ? 'mean' : 'sum'}`, async () => {
      const x = randTensor(ctx, [n, v], dt, n * v, 3);
      const tg = targetsFor(n, v, v, ignoreEvery, o.ignore);
      const t = upload(ctx, tg, [n], 'i32');
      const scale = 1.5;
      const out = crossEntropy(ctx, x.t, t, {
        ignoreIndex: o.ignore,
        labelSmoothing: o.eps,
        reduction: o.mean ? 'mean' : 'sum',
        gradScale: scale,
        dlogitsOut: poisoned(ctx, [n, v]),
      });
      const ref = refLoss(x.data, tg, v, o);
      expect(relErr(await get(ctx, out.loss), [ref.loss])).toBeLessThan(2e-5);
      expect(relErr(await get(ctx, out.rowLoss), ref.rows)).toBeLessThan(2e-5);
      expect(Array.from(await get(ctx, out.count))).toEqual([ref.count]);
      expect(relErr(await get(ctx, out.dlogits!), refGrad(x.data, tg, v, o, scale))).toBeLessThan(2e-5);
      release(ctx, x.t, t, out.loss, out.rowLoss, out.count, out.dlogits!);
    });
  }

  it('row chunks with a shared count give the whole batch mean and gradient', async () => {
    const [n, v] = [10, 50];
    const o = { ignore: -100, eps: 0, mean: true };
    const x = randTensor(ctx, [n, v], 'f32', 11);
    const tg = targetsFor(n, v, 12, 3);
    const all = upload(ctx, tg, [n], 'i32');
    const count = crossEntropyCount(ctx, all);
    expect(Array.from(await get(ctx, count))).toEqual([tg.filter((t) => t !== -100).length]);
    // two chunks of rows 0-5 and 6-9
    const halves = [
      [0, 6],
      [6, 10],
    ] as const;
    let loss = 0;
    const grad: number[] = [];
    for (const [a, b] of halves) {
      const xs = upload(ctx, x.data.slice(a * v, b * v), [b - a, v]);
      const ts = upload(ctx, tg.slice(a, b), [b - a], 'i32');
      const r = crossEntropy(ctx, xs, ts, { count });
      loss += (await get(ctx, r.loss))[0]!;
      grad.push(...(await get(ctx, r.dlogits!)));
      release(ctx, xs, ts, r.loss, r.rowLoss, r.dlogits!);
    }
    expect(relErr([loss], [refLoss(x.data, tg, v, o).loss])).toBeLessThan(2e-5);
    expect(relErr(grad, refGrad(x.data, tg, v, o))).toBeLessThan(2e-5);
    release(ctx, x.t, all, count);
  });

  it('portable workgroup reductions (no subgroups) give the same results', async () => {
    llmTuning.subgroups = false;
    try {
      for (const [n, v, dt] of [
        [37, 1000, 'f32'],
        [2, 131072, 'bf16'],
      ] as [number, number, DType][]) {
        const o = { ignore: -100, eps: 0.1, mean: true };
        const x = randTensor(ctx, [n, v], dt, n + v, 3);
        const tg = targetsFor(n, v, 5, 4);
        const t = upload(ctx, tg, [n], 'i32');
        const out = crossEntropy(ctx, x.t, t, { labelSmoothing: o.eps, dlogitsOut: poisoned(ctx, [n, v]) });
        expect(relErr(await get(ctx, out.loss), [refLoss(x.data, tg, v, o).loss])).toBeLessThan(2e-5);
        expect(relErr(await get(ctx, out.dlogits!), refGrad(x.data, tg, v, o))).toBeLessThan(2e-5);
        release(ctx, x.t, t, out.loss, out.rowLoss, out.count, out.dlogits!);
      }
    } finally {
      llmTuning.subgroups = true;
    }
  });

  it('without the gradient, and with every target ignored (loss NaN, gradient 0)', async () => {
    const x = randTensor(ctx, [3, 10], 'f32', 1);
    const tg = [1, 2, 3];
    const t = upload(ctx, tg, [3], 'i32');
    const a = crossEntropy(ctx, x.t, t, { computeGrad: false });
    expect(a.dlogits).toBeUndefined();
    expect(relErr(await get(ctx, a.loss), [refLoss(x.data, tg, 10, { ignore: -100, eps: 0, mean: true }).loss])).toBeLessThan(2e-5);
    const ti = upload(ctx, [-100, -100, -100], [3], 'i32');
    const b = crossEntropy(ctx, x.t, ti, { dlogitsOut: poisoned(ctx, [3, 10]) });
    expect(Number.isNaN((await get(ctx, b.loss))[0])).toBe(true);
    expect(Array.from(await get(ctx, b.dlogits!)).every((g) => g === 0)).toBe(true);
    release(ctx, x.t, t, ti, a.loss, a.rowLoss, a.count, b.loss, b.rowLoss, b.count, b.dlogits!);
  });

  it('an out-of-range target gives NaN for its row and the mean, without reading out of bounds', async () => {
    const x = randTensor(ctx, [3, 10], 'f32', 2);
    const t = upload(ctx, [1, 10, -5], [3], 'i32');
    const out = crossEntropy(ctx, x.t, t);
    const rows = await get(ctx, out.rowLoss);
    expect(Number.isFinite(rows[0]!)).toBe(true);
    expect(Number.isNaN(rows[1]!) && Number.isNaN(rows[2]!)).toBe(true);
    expect(Number.isNaN((await get(ctx, out.loss))[0])).toBe(true);
    const g = await get(ctx, out.dlogits!);
    expect(g.slice(0, 10).every(Number.isFinite)).toBe(true);
    expect(g.slice(10).every(Number.isNaN)).toBe(true);
    release(ctx, x.t, t, out.loss, out.rowLoss, out.count, out.dlogits!);
  });

  it('validates shapes', () => {
    const x = upload(ctx, new Float32Array(12), [3, 4]);
    const t = upload(ctx, [0, 1], [2], 'i32');
    const tf = upload(ctx, [0, 1, 2], [3], 'f32');
    expect(() => crossEntropy(ctx, x, t)).toThrow(ShapeError);
    expect(() => crossEntropy(ctx, x, t)).toThrow(/\[2\].*\[3\].*\[3, 4\]/);
    expect(() => crossEntropy(ctx, x, tf)).toThrow(/i32/);
    release(ctx, x, t, tf);
  });
});
