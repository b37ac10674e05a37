import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { llmTuning } from './common';
import { softmax, softmaxBackward } from './softmax';
import { get, poisoned, randTensor } from './test-util';
import { refSoftmax, refSoftmaxBackward as refBackward } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('softmax', () => {
  it('reference backward matches finite differences', () => {
    const x = randn(3 * 7, 1, 2);
    const dy = randn(3 * 7, 2);
    const dx = refBackward(refSoftmax(x, 3, 7), dy, 3, 7);
    expect(relErr(dx, finiteDiff((xx) => dot(refSoftmax(xx, 3, 7), dy), x))).toBeLessThan(1e-7);
  });

  const cases: [number, number, DType][] = [
    [1, 17, 'f32'],
    [3, 64, 'f16'],
    [37, 100, 'bf16'],
    [3, 1000, 'f32'],
    [2, 40000, 'bf16'], // 20000 pairs: cached in registers (forward), streamed (backward)
    [2, 33000, 'f32'], // over 64 per thread: streamed
    [1, 131073, 'f32'], // 128k vocabulary, odd
  ];
  for (const [rows, len, dt] of cases) {
    it(`forward and backward ${dt}[${rows}, ${len}]`, async () => {
      const x = randTensor(ctx, [rows, len], dt, rows + len, 4);
      const y = softmax(ctx, x.t, { out: poisoned(ctx, [rows, len]) });
      const ref = refSoftmax(x.data, rows, len);
      const got = await get(ctx, y);
      expect(relErr(got, ref)).toBeLessThan(1e-5);
      const dy = randTensor(ctx, [rows, len], dt, len);
      const dx = softmaxBackward(ctx, y, dy.t, { out: poisoned(ctx, [rows, len]) });
      expect(relErr(await get(ctx, dx), refBackward(got, dy.data, rows, len))).toBeLessThan(1e-4);
      release(ctx, x.t, y, dy.t, dx);
    });
  }

  it('portable workgroup reductions (no subgroups)', async () => {
    llmTuning.subgroups = false;
    try {
      for (const [rows, len] of [
        [3, 1000],
        [2, 33000],
      ]) {
        const x = randTensor(ctx, [rows!, len!], 'f32', 7, 4);
        const y = softmax(ctx, x.t, { out: poisoned(ctx, [rows!, len!]) });
        const got = await get(ctx, y);
        expect(relErr(got, refSoftmax(x.data, rows!, len!))).toBeLessThan(1e-5);
        const dy = randTensor(ctx, [rows!, len!], 'f32', 8);
        const dx = softmaxBackward(ctx, y, dy.t);
        expect(relErr(await get(ctx, dx), refBackward(got, dy.data, rows!, len!))).toBeLessThan(1e-4);
        release(ctx, x.t, y, dy.t, dx);
      }
    } finally {
      llmTuning.subgroups = true;
    }
  });

  it('is stable for large logits', async () => {
    const x = Float64Array.from([1000, 999, -1000, 50, 88, 89]);
    const t = upload(ctx, x, [2, 3]);
    expect(relErr(await get(ctx, softmax(ctx, t)), refSoftmax(x, 2, 3))).toBeLessThan(1e-6);
    release(ctx, t);
  });

  it('validates shapes', () => {
    const y = upload(ctx, new Float32Array(6), [2, 3]);
    const dy = upload(ctx, new Float32Array(6), [3, 2]);
    expect(() => softmaxBackward(ctx, y, dy)).toThrow(ShapeError);
    expect(() => softmaxBackward(ctx, y, dy)).toThrow(/\[2, 3\].*\[3, 2\]/);
    release(ctx, y, dy);
  });
});
