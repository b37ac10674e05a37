import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, randu, relErr } from '../../testing';
import { binaryRef, roundTo } from './core.ref';
import {
  add,
  addScalar,
  arange,
  binary,
  BINARY_OPS,
  fill,
  gelu,
  maximum,
  relu,
  scale,
  unary,
  UNARY_OPS,
  type BinaryOp,
  type UnaryOp,
} from './elementwise';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

let seed = 1;
const numel = (s: number[]) => s.reduce((a, b) => a * b, 1);

const sig = (v: number) => 1 / (1 + Math.exp(-v));
const UREF: Record<UnaryOp, (v: number, s: number) => number> = {
  neg: (v) => -v,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (v) => 1 / Math.sqrt(v),
  abs: Math.abs,
  relu: (v) => Math.max(v, 0),
  gelu: (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))),
  silu: (v) => v * sig(v),
  sigmoid: sig,
  tanh: Math.tanh,
  square: (v) => v * v,
  scale: (v, s) => s * v,
  addScalar: (v, s) => v + s,
};
/** Inputs in each op's domain (log/sqrt/rsqrt positive; exp moderate). */
function domain(op: UnaryOp, n: number): Float64Array {
  if (op === 'log' || op === 'sqrt' || op === 'rsqrt') return randu(n, seed++, 0.05, 20);
  if (op === 'exp') return randu(n, seed++, -8, 8);
  return randn(n, seed++, 3);
}

const BREF: Record<BinaryOp, (x: number, y: number) => number> = {
  add: (x, y) => x + y,
  sub: (x, y) => x - y,
  mul: (x, y) => x * y,
  div: (x, y) => x / y,
  max: Math.max,
  min: Math.min,
  pow: (x, y) => x ** y,
};

async function runUnary(op: UnaryOp, dtype: DType, shape: number[], s = 0): Promise<number> {
  const v = roundTo(dtype, domain(op, numel(shape)));
  const x = upload(ctx, v, shape, dtype);
  const y = empty(ctx, shape);
  poison(ctx, y);
  unary(ctx, op, x, s, { out: y });
  const got = await download(ctx, y);
  release(ctx, x, y);
  return relErr(got, v.map((t) => UREF[op](t, s)));
}

describe('unary ops', () => {
  it.each(UNARY_OPS)('%s matches float64 (f32 input, odd length)', async (op) => {
    expect(await runUnary(op, 'f32', [3, 337], op === 'scale' ? -1.75 : 0.625)).toBeLessThan(1e-5);
  });

  it('read f16 and bf16 inputs exactly', async () => {
    for (const dtype of ['f16', 'bf16'] as const)
      for (const op of ['exp', 'gelu', 'silu', 'neg'] as const) expect(await runUnary(op, dtype, [1001]), `${op} ${dtype}`).toBeLessThan(1e-5);
  });

  it('stay finite and exact at the extremes', async () => {
    const v = Float64Array.from([-100, -30, -15.5, -1e-8, 0, 1e-8, 15.5, 30, 100, 88]);
    const x = upload(ctx, v, [v.length]);
    for (const op of ['gelu', 'silu', 'sigmoid', 'tanh'] as const) {
      const y = unary(ctx, op, x);
      const got = await download(ctx, y);
      expect(relErr(got, v.map((t) => UREF[op](t, 0))), op).toBeLessThan(1e-6);
      release(ctx, y);
    }
    release(ctx, x);
  });

  it('named wrappers and out', async () => {
    const v = roundTo('f32', randn(64, seed++));
    const x = upload(ctx, v, [8, 8]);
    const out = empty(ctx, [8, 8]);
    poison(ctx, out);
    expect(relu(ctx, x, { out })).toBe(out);
    expect(relErr(await download(ctx, out), v.map((t) => Math.max(t, 0)))).toBe(0);
    const g = gelu(ctx, x);
    expect(relErr(await download(ctx, g), v.map((t) => UREF.gelu(t, 0)))).toBeLessThan(1e-5);
    const s = addScalar(ctx, scale(ctx, x, 3), -2);
    expect(relErr(await download(ctx, s), v.map((t) => 3 * t - 2))).toBeLessThan(1e-6);
    expect(() => relu(ctx, x, { out: empty(ctx, [64]) })).toThrow(ShapeError);
    expect(() => unary(ctx, 'nope' as UnaryOp, x)).toThrow(/unknown unary op/);
    expect(() => relu(ctx, x, { out: x })).toThrow(/must not share/);
    release(ctx, x, out, g, s);
  });
});

describe('binary ops with broadcasting', () => {
  const cases: [number[], number[]][] = [
    [[5, 7], [5, 7]], // same shape
    [[4, 5, 6], []], // scalar
    [[4, 5, 6], [6]], // row (bias)
    [[4, 5, 6], [5, 1]], // column
    [[3, 1, 5], [1, 4, 1]], // both sides broadcast
    [[2, 1, 3, 1, 5, 2], [1, 4, 1, 2, 1, 2]], // rank 6, alternating
    [[2, 3, 4, 5, 2, 3, 2], [1, 3, 4, 1, 2, 3, 2]], // rank 7 that merges to fewer dims
    [[1], [9, 1, 1]],
  ];
  it.each(BINARY_OPS)('%s matches float64 for every broadcast pattern', async (op) => {
    for (const [as, bs] of cases) {
      const na = numel(as);
      const nb = numel(bs);
      let av = roundTo('f32', randn(na, seed++, 2));
      let bv = roundTo('f32', randn(nb, seed++, 2));
      if (op === 'div') bv = bv.map((t) => (Math.abs(t) < 0.1 ? 0.5 : t));
      if (op === 'pow') {
        av = roundTo('f32', randu(na, seed++, 0.1, 3));
        bv = roundTo('f32', randu(nb, seed++, -2, 2));
      }
      const a = upload(ctx, av, as);
      const b = upload(ctx, bv, bs);
      const outShape = [...Array(Math.max(as.length, bs.length)).keys()].map((i) => {
        const r = Math.max(as.length, bs.length);
        return Math.max(as[as.length - r + i] ?? 1, bs[bs.length - r + i] ?? 1);
      });
      const y = empty(ctx, outShape);
      poison(ctx, y);
      binary(ctx, op, a, b, { out: y });
      const got = await download(ctx, y);
      const want = binaryRef(BREF[op], av, as, bv, bs, outShape);
      expect(relErr(got, want), `${op} ${JSON.stringify(as)} ${JSON.stringify(bs)}`).toBeLessThan(op === 'pow' ? 2e-5 : 1e-6);
      release(ctx, a, b, y);
    }
  });

  it('pow follows NumPy for negative bases and zero exponents', async () => {
    const a = upload(ctx, [-2, -2, -2, 0, 0, 3, -1.5], [7]);
    const b = upload(ctx, [3, 2, 0.5, 0, 2, 0, -2], [7]);
    const got = Array.from(await download(ctx, binary(ctx, 'pow', a, b)));
    expect(got.slice(0, 2)).toEqual([-8, 4]);
    expect(Number.isNaN(got[2])).toBe(true);
    expect(got.slice(3, 6)).toEqual([1, 0, 1]);
    expect(got[6]).toBeCloseTo(1 / 2.25, 6);
  });

  it('mixed f32, f16 and bf16 inputs', async () => {
    for (const [da, db] of [
      ['f16', 'f32'],
      ['bf16', 'f16'],
      ['f32', 'bf16'],
    ] as const) {
      const av = roundTo(da, randn(3 * 33, seed++));
      const bv = roundTo(db, randn(33, seed++));
      const a = upload(ctx, av, [3, 33], da);
      const b = upload(ctx, bv, [33], db);
      const y = maximum(ctx, a, b);
      expect(relErr(await download(ctx, y), binaryRef(Math.max, av, [3, 33], bv, [33], [3, 33]))).toBe(0);
      const z = add(ctx, a, b);
      expect(relErr(await download(ctx, z), binaryRef((x, w) => x + w, av, [3, 33], bv, [33], [3, 33]))).toBeLessThan(1e-7);
      release(ctx, a, b, y, z);
    }
  });

  it('rejects shapes that do not broadcast, naming them', () => {
    const a = empty(ctx, [4, 5]);
    const b = empty(ctx, [4, 6]);
    expect(() => add(ctx, a, b)).toThrow(ShapeError);
    expect(() => add(ctx, a, b)).toThrow(/\[4, 5\] and \[4, 6\]/);
    // 7 dims that cannot merge
    const c = empty(ctx, [2, 1, 2, 1, 2, 1, 2]);
    const d = empty(ctx, [1, 2, 1, 2, 1, 2, 1]);
    expect(() => add(ctx, c, d)).toThrow(/at most 6/);
    release(ctx, a, b, c, d);
  });
});

describe('fill and arange', () => {
  it('fill writes every element in every dtype', async () => {
    for (const [dtype, value, want] of [
      ['f32', -1.25, -1.25],
      ['f16', 0.1, 0.0999755859375],
      ['bf16', 3.3, 3.296875],
      ['i32', -7, -7],
      ['u32', 4000000000, 4000000000],
    ] as const) {
      const t = empty(ctx, [5, 7], dtype);
      poison(ctx, t);
      fill(ctx, [5, 7], value, dtype, { out: t });
      const got = Array.from(await download(ctx, t));
      expect(got.length).toBe(35);
      expect(got.every((g) => g === want), `${dtype}: ${got.slice(0, 3)}`).toBe(true);
      release(ctx, t);
    }
  });

  it('arange in f32 and i32', async () => {
    const f = arange(ctx, 1000, { start: -3, step: 0.25 });
    expect(relErr(await download(ctx, f), Float64Array.from({ length: 1000 }, (_, i) => -3 + 0.25 * i))).toBe(0);
    const g = arange(ctx, 77, { start: 5, step: -3, dtype: 'i32' });
    expect(Array.from(await download(ctx, g))).toEqual(Array.from({ length: 77 }, (_, i) => 5 - 3 * i));
    expect(() => arange(ctx, 4, { step: 0.5, dtype: 'i32' })).toThrow(ShapeError);
    release(ctx, f, g);
  });
});
