import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr, toF32 } from '../../testing';
import { sgdStep, sgdStepMulti } from './sgd';
import { advanceStep, createStepState } from './step';
import { createSegmentTable, releaseSegmentTable } from './table';
import { sgdRef } from './optim.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const TOL = 2e-6;

async function f64(t: DeviceTensor): Promise<Float64Array> {
  return Float64Array.from(await download(ctx, t));
}

async function bits(t: DeviceTensor): Promise<Uint32Array> {
  return new Uint32Array(await ctx.read(t.buffer, t.shape.reduce((a, b) => a * b, 1) * 4));
}

function expectParams(got: Float64Array, ref: Float64Array, p0: ArrayLike<number>): void {
  expect(relErr(got, ref)).toBeLessThan(TOL);
  const d = (a: Float64Array) => Float64Array.from(a, (x, i) => x - p0[i]!);
  expect(relErr(d(got), d(ref))).toBeLessThan(1e-4);
}

const VARIANTS = [
  { momentum: 0, dampening: 0, nesterov: false, wd: 0 },
  { momentum: 0, dampening: 0, nesterov: false, wd: 0.05 },
  { momentum: 0.9, dampening: 0, nesterov: false, wd: 0 },
  { momentum: 0.9, dampening: 0.3, nesterov: false, wd: 0.01 },
  { momentum: 0.8, dampening: 0, nesterov: true, wd: 0.1 },
];

describe('sgdStep (per tensor)', () => {
  it('matches float64 torch.optim.SGD (momentum, dampening, nesterov, weight decay) at odd sizes', async () => {
    for (const [vi, h] of VARIANTS.entries())
      for (const [si, n] of [1, 7, 1000, 4097].entries()) {
        const p0 = toF32(randn(n, 10 * vi + si));
        const p = upload(ctx, p0, [n]);
        const buf = h.momentum ? empty(ctx, [n]) : null;
        if (buf) poison(ctx, buf); // an output on the first step
        const rp = Float64Array.from(p0);
        const rb = new Float64Array(n);
        for (let t = 1; t <= 3; t++) {
          const g0 = toF32(randn(n, 1000 + 10 * vi + si + 100 * t));
          const g = upload(ctx, g0, [n]);
          sgdStep(ctx, p, g, buf, { lr: 0.05, weightDecay: h.wd, momentum: h.momentum, dampening: h.dampening, nesterov: h.nesterov, step: t });
          sgdRef(rp, g0, rb, { lr: 0.05, ...h, first: t === 1 });
          release(ctx, g);
        }
        expectParams(await f64(p), rp, p0);
        if (buf) expect(relErr(await f64(buf), rb)).toBeLessThan(TOL);
        release(ctx, p, ...(buf ? [buf] : []));
      }
  });

  it('gradScale applies, skip is a no-op, and the GPU step state keeps the first step for a skipped start', async () => {
    const n = 999;
    const p0 = toF32(randn(n, 7));
    const p = upload(ctx, p0, [n]);
    const buf = empty(ctx, [n]);
    poison(ctx, buf);
    const flag = upload(ctx, [1], [1], 'u32');
    const gs = upload(ctx, [0.5], [1]);
    const st = createStepState(ctx);
    const rp = Float64Array.from(p0);
    const rb = new Float64Array(n);
    const h = { momentum: 0.9, dampening: 0.5, nesterov: false, wd: 0.01 };
    let t = 0;
    for (let k = 1; k <= 4; k++) {
      const skip = k === 1; // the very first step is skipped: the next one must still initialise the buffer
      ctx.write(flag.buffer, new Uint32Array([skip ? 1 : 0]));
      const g0 = toF32(randn(n, 70 + k));
      const g = upload(ctx, g0, [n]);
      const before = skip ? [await bits(p), await bits(buf)] : null;
      advanceStep(ctx, st, { skip: flag });
      sgdStep(ctx, p, g, buf, { lr: 0.1, weightDecay: h.wd, momentum: h.momentum, dampening: h.dampening, stepState: st, skip: flag, gradScale: gs });
      if (before) expect([await bits(p), await bits(buf)]).toEqual(before);
      else sgdRef(rp, g0, rb, { lr: 0.1, ...h, first: ++t === 1, gs: 0.5 });
      release(ctx, g);
    }
    expectParams(await f64(p), rp, p0);
    expect(relErr(await f64(buf), rb)).toBeLessThan(TOL);
    release(ctx, p, buf, flag, gs, st);
  });

  it('validates its inputs', () => {
    const a = upload(ctx, [1, 2, 3], [3]);
    const b = upload(ctx, [1, 2, 3], [3]);
    const c = upload(ctx, [1, 2], [2]);
    const d = upload(ctx, [1, 2, 3], [3]);
    expect(() => sgdStep(ctx, a, b, null, { lr: 1, momentum: 0.9, step: 1 })).toThrow(ShapeError);
    expect(() => sgdStep(ctx, a, b, c, { lr: 1, momentum: 0.9, step: 1 })).toThrow(ShapeError);
    expect(() => sgdStep(ctx, a, c, null, { lr: 1, step: 1 })).toThrow(ShapeError);
    expect(() => sgdStep(ctx, a, a, null, { lr: 1, step: 1 })).toThrow(ShapeError);
    expect(() => sgdStep(ctx, a, b, d, { lr: 1, momentum: 0.9, dampening: 0.1, nesterov: true, step: 1 })).toThrow(ConfigError);
    expect(() => sgdStep(ctx, a, b, null, { lr: NaN, step: 1 })).toThrow(ConfigError);
    release(ctx, a, b, c, d);
  });
});

describe('sgdStepMulti (flat arena + segment table)', () => {
  it('matches per-segment float64 SGD with momentum and per-segment lr/wd', async () => {
    const segs = [
      { offset: 4200, length: 4097, lr: 0.05, weightDecay: 0.1 },
      { offset: 0, length: 1, lr: 0.1 },
      { offset: 1, length: 7, lr: 0.02, weightDecay: 0.5 },
      { offset: 100, length: 4100, lr: 0.01, weightDecay: 0.01 },
    ];
    const N = 8297;
    const table = createSegmentTable(ctx, segs);
    for (const h of [VARIANTS[3]!, VARIANTS[4]!, VARIANTS[1]!]) {
      const p0 = toF32(randn(N, 41));
      const p = upload(ctx, p0, [N]);
      const buf = h.momentum ? empty(ctx, [N]) : null;
      if (buf) poison(ctx, buf);
      const rp = Float64Array.from(p0);
      const rb = new Float64Array(N);
      for (let t = 1; t <= 3; t++) {
        const g0 = toF32(randn(N, 300 + t));
        const g = upload(ctx, g0, [N]);
        sgdStepMulti(ctx, table, p, g, buf, { momentum: h.momentum, dampening: h.dampening, nesterov: h.nesterov, step: t, lrScale: 2 });
        for (const s of segs)
          sgdRef(rp, g0, rb, { ...h, lr: s.lr * 2, wd: s.weightDecay ?? 0, first: t === 1 }, s.offset, s.length);
        release(ctx, g);
      }
      const got = await f64(p);
      // elements 8..99 lie in no segment: untouched
      for (let i = 8; i < 100; i++) expect(got[i]).toBe(p0[i]);
      expectParams(got, rp, p0);
      if (buf) {
        const gb = await f64(buf);
        for (let i = 8; i < 100; i++) rb[i] = gb[i]!; // gap: still poison on the GPU
        expect(relErr(gb.subarray(0, 8), rb.subarray(0, 8))).toBeLessThan(TOL);
        expect(relErr(gb.subarray(100), rb.subarray(100))).toBeLessThan(TOL);
        expect(Number.isNaN(gb[50]!)).toBe(true);
      }
      release(ctx, p, ...(buf ? [buf] : []));
    }
    releaseSegmentTable(ctx, table);
  });
});
