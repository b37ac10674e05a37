import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { reduceRef, roundTo } from './core.ref';
import { max, mean, reduce, sum, type ReduceOp } from './reduce';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

let seed = 500;
const numel = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

async function check(op: ReduceOp, shape: number[], axes: number[], dtype: DType = 'f32', offset = 0): Promise<number> {
  const v = roundTo(dtype, randn(numel(shape), seed++).map((t) => t + offset));
  const x = upload(ctx, v, shape, dtype);
  const a0 = Math.min(...axes.map((a) => (a < 0 ? a + shape.length : a)));
  const a1 = Math.max(...axes.map((a) => (a < 0 ? a + shape.length : a))) + 1;
  const outShape = [...shape.slice(0, a0), ...shape.slice(a1)];
  const y = empty(ctx, outShape);
  poison(ctx, y);
  expect(reduce(ctx, op, x, axes, { out: y })).toBe(y);
  const got = await download(ctx, y);
  const want = reduceRef(op, v, numel(shape.slice(0, a0)), numel(shape.slice(a0, a1)), numel(shape.slice(a1)));
  release(ctx, x, y);
  return relErr(got, want);
}

describe('reductions', () => {
  const cases: [number[], number[]][] = [
    [[37, 129], [1]], // rows (inner == 1), one workgroup per row
    [[37, 129], [0]], // columns
    [[5, 300, 3], [1]], // narrow inner
    [[4, 7, 70], [1]], // inner > 64: several workgroups per row of outputs
    [[3, 4, 5, 6], [0, 1]], // several leading axes
    [[3, 4, 5, 6], [-3, -2]], // middle pair, negative axes
    [[1000], [0]], // everything
    [[20000], [0]], // long: two passes
    [[2, 9000, 2], [1]], // long with few outputs: two passes
    [[1, 1], [1]],
  ];
  for (const op of ['sum', 'mean', 'max'] as const)
    it(`${op} over rows, columns, middle and leading axes, one and two passes`, async () => {
      for (const [shape, axes] of cases) expect(await check(op, shape, axes), `${op} ${JSON.stringify(shape)} ${axes}`).toBeLessThan(1e-5);
    });

  it('long sums stay accurate (tree, not a running sum)', async () => {
    // mean 3, so a sequential f32 running sum of 300k values would drift by ~1e-4 relative
    expect(await check('sum', [300_000], [0], 'f32', 3)).toBeLessThan(2e-6);
    expect(await check('mean', [3, 40_000], [1], 'f32', 3)).toBeLessThan(2e-6);
  });

  it('reads f16 and bf16 inputs', async () => {
    for (const dtype of ['f16', 'bf16'] as const) {
      expect(await check('sum', [6, 77], [1], dtype)).toBeLessThan(1e-5);
      expect(await check('max', [66, 5], [0], dtype)).toBe(0);
    }
  });

  it('keepDims and the named wrappers', async () => {
    const v = roundTo('f32', randn(24, seed++));
    const x = upload(ctx, v, [2, 3, 4]);
    const s = sum(ctx, x, 1, { keepDims: true });
    expect(s.shape).toEqual([2, 1, 4]);
    expect(relErr(await download(ctx, s), reduceRef('sum', v, 2, 3, 4))).toBeLessThan(1e-6);
    const m = mean(ctx, x, -1);
    expect(m.shape).toEqual([2, 3]);
    expect(relErr(await download(ctx, m), reduceRef('mean', v, 6, 4, 1))).toBeLessThan(1e-6);
    const mx = max(ctx, x, [0, 1, 2]);
    expect(mx.shape).toEqual([]);
    expect(Array.from(await download(ctx, mx))).toEqual([Math.fround(Math.max(...v))]);
    release(ctx, x, s, m, mx);
  });

  it('rejects bad axes with the shape in the message', () => {
    const x = empty(ctx, [2, 3, 4]);
    expect(() => sum(ctx, x, [0, 2])).toThrow(ShapeError);
    expect(() => sum(ctx, x, [0, 2])).toThrow(/\[2, 3, 4\].*consecutive/);
    expect(() => sum(ctx, x, 3)).toThrow(/out of range/);
    expect(() => max(ctx, empty(ctx, [2, 0]), 1)).toThrow(/empty/);
    release(ctx, x);
  });
});
