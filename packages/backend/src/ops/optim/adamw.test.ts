import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { bf16BitsToF32, f32ToBf16Bits } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr, toF32 } from '../../testing';
import { adamwStep, adamwStepMulti } from './adamw';
import { advanceStep, createStepState } from './step';
import { createSegmentTable, releaseSegmentTable, updateSegmentTable } from './table';
import { adamwRef } from './optim.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const H = { b1: 0.9, b2: 0.999, eps: 1e-8 };
const TOL = 2e-6;

async function f64(t: DeviceTensor): Promise<Float64Array> {
  return Float64Array.from(await download(ctx, t));
}

/** Params vs reference, and the update (p - p0) vs the reference update: sensitive to small step errors. */
function expectParams(got: Float64Array, ref: Float64Array, p0: ArrayLike<number>): void {
  expect(relErr(got, ref)).toBeLessThan(TOL);
  const d = (a: Float64Array) => Float64Array.from(a, (x, i) => x - p0[i]!);
  expect(relErr(d(got), d(ref))).toBeLessThan(1e-4);
}

async function bits(t: DeviceTensor): Promise<Uint32Array> {
  return new Uint32Array(await ctx.read(t.buffer, t.shape.reduce((a, b) => a * b, 1) * 4));
}

describe('adamwStep (per tensor)', () => {
  it('matches a float64 torch.optim.AdamW over several steps at odd sizes', async () => {
    for (const [si, n] of [1, 7, 1000, 4097].entries()) {
      const p0 = toF32(randn(n, 10 + si));
      const p = upload(ctx, p0, [n]);
      const m = upload(ctx, new Float32Array(n), [n]);
      const v = upload(ctx, new Float32Array(n), [n]);
      const rp = Float64Array.from(p0);
      const rm = new Float64Array(n);
      const rv = new Float64Array(n);
      const lr = 1e-2;
      const wd = 0.1;
      for (let t = 1; t <= 4; t++) {
        const g0 = toF32(randn(n, 100 * si + t, 0.5));
        const g = upload(ctx, g0, [n]);
        adamwStep(ctx, p, g, m, v, { lr, weightDecay: wd, step: t });
        adamwRef(rp, g0, rm, rv, { lr, wd, ...H, t });
        release(ctx, g);
      }
      expectParams(await f64(p), rp, p0);
      expect(relErr(await f64(m), rm)).toBeLessThan(TOL);
      expect(relErr(await f64(v), rv)).toBeLessThan(TOL);
      release(ctx, p, m, v);
    }
  });

  it('applies gradScale and gradMultiplier, honours maximize, and reads bf16 gradients', async () => {
    const n = 777;
    const p0 = toF32(randn(n, 3));
    const g0 = toF32(randn(n, 4));
    const gb = Float64Array.from(g0, (x) => bf16BitsToF32(f32ToBf16Bits(x)));
    const cases = [
      { gs: 0.25, mult: 1, max: false, dt: 'f32' as const, g: g0 },
      { gs: 1, mult: 0.5, max: true, dt: 'f32' as const, g: g0 },
      { gs: 2, mult: 1, max: false, dt: 'bf16' as const, g: gb },
    ];
    for (const c of cases) {
      const p = upload(ctx, p0, [n]);
      const m = upload(ctx, new Float32Array(n), [n]);
      const v = upload(ctx, new Float32Array(n), [n]);
      const g = upload(ctx, g0, [n], c.dt);
      const s = upload(ctx, [c.gs], [1]);
      const rp = Float64Array.from(p0);
      const rm = new Float64Array(n);
      const rv = new Float64Array(n);
      for (let t = 1; t <= 2; t++) {
        adamwStep(ctx, p, g, m, v, { lr: 1e-3, step: t, gradScale: s, gradMultiplier: c.mult, maximize: c.max });
        adamwRef(rp, c.g, rm, rv, { lr: 1e-3, wd: 0.01, ...H, t, gs: c.gs * c.mult * (c.max ? -1 : 1) });
      }
      expect(relErr(await f64(p), rp)).toBeLessThan(TOL);
      expect(relErr(await f64(m), rm)).toBeLessThan(TOL);
      expect(relErr(await f64(v), rv)).toBeLessThan(TOL);
      release(ctx, p, m, v, g, s);
    }
  });

  it('skip leaves params and moments bit-identical; a GPU step state does not count skipped steps', async () => {
    const n = 1031;
    const p0 = toF32(randn(n, 5));
    const p = upload(ctx, p0, [n]);
    const m = upload(ctx, new Float32Array(n), [n]);
    const v = upload(ctx, new Float32Array(n), [n]);
    const flag = upload(ctx, [0], [1], 'u32');
    const st = createStepState(ctx);
    const rp = Float64Array.from(p0);
    const rm = new Float64Array(n);
    const rv = new Float64Array(n);
    // a state never advanced (t = 0) makes the step a no-op rather than dividing by a zero bias correction
    const p00 = await bits(p);
    const ones = upload(ctx, new Float32Array(n).fill(1), [n]);
    adamwStep(ctx, p, ones, m, v, { lr: 1, stepState: st });
    expect(await bits(p)).toEqual(p00);
    release(ctx, ones);
    let t = 0;
    for (let k = 1; k <= 5; k++) {
      const skip = k === 2 || k === 3;
      ctx.write(flag.buffer, new Uint32Array([skip ? 7 : 0]));
      const g0 = toF32(randn(n, 50 + k));
      const g = upload(ctx, g0, [n]);
      const before = skip ? [await bits(p), await bits(m), await bits(v)] : null;
      advanceStep(ctx, st, { skip: flag });
      adamwStep(ctx, p, g, m, v, { lr: 1e-2, weightDecay: 0.1, stepState: st, skip: flag });
      if (before) {
        expect(await bits(p)).toEqual(before[0]);
        expect(await bits(m)).toEqual(before[1]);
        expect(await bits(v)).toEqual(before[2]);
      } else adamwRef(rp, g0, rm, rv, { lr: 1e-2, wd: 0.1, ...H, t: ++t });
      release(ctx, g);
    }
    const s = new Uint32Array(await ctx.read(st.buffer, 12));
    expect(s[0]).toBe(3);
    expect(new Float32Array(s.buffer)[1]).toBeCloseTo(1 - 0.9 ** 3, 6);
    expect(new Float32Array(s.buffer)[2]).toBeCloseTo(1 - 0.999 ** 3, 8);
    expectParams(await f64(p), rp, p0);
    expect(relErr(await f64(m), rm)).toBeLessThan(TOL);
    expect(relErr(await f64(v), rv)).toBeLessThan(TOL);
    release(ctx, p, m, v, flag, st);
  });

  it('validates shapes, dtypes and hyper-parameters', () => {
    const a = upload(ctx, [1, 2, 3], [3]);
    const b = upload(ctx, [1, 2, 3], [3]);
    const c = upload(ctx, [1, 2, 3], [3]);
    const d = upload(ctx, [1, 2, 3], [3]);
    const h = upload(ctx, [1, 2, 3], [3], 'f16');
    const wrong = upload(ctx, [1, 2, 3, 4], [4]);
    expect(() => adamwStep(ctx, a, b, c, wrong, { lr: 1, step: 1 })).toThrow(ShapeError);
    expect(() => adamwStep(ctx, h, b, c, d, { lr: 1, step: 1 })).toThrow(ShapeError);
    expect(() => adamwStep(ctx, a, b, b, d, { lr: 1, step: 1 })).toThrow(ShapeError);
    expect(() => adamwStep(ctx, a, b, c, d, { lr: 1, step: 0 })).toThrow(ConfigError);
    expect(() => adamwStep(ctx, a, b, c, d, { lr: 1 })).toThrow(ConfigError);
    expect(() => adamwStep(ctx, a, b, c, d, { lr: 1, step: 1, beta2: 1 })).toThrow(ConfigError);
    expect(() => adamwStep(ctx, a, b, c, d, { lr: 1, step: 1, gradScale: h })).toThrow(ShapeError);
    const huge = { buffer: a.buffer, dtype: 'f32' as const, shape: [ctx.maxBinding / 4 + 1] };
    expect(() => adamwStep(ctx, huge, huge, huge, huge, { lr: 1, step: 1 })).toThrow(/maxStorageBufferBindingSize/);
    release(ctx, a, b, c, d, h, wrong);
  });
});

describe('adamwStepMulti (flat arena + segment table)', () => {
  it('matches per-segment float64 AdamW with per-segment lr/wd, lrScale, and leaves gaps untouched', async () => {
    // segments deliberately out of order, with gaps, one spanning several chunks, one empty
    const segs = [
      { offset: 9000, length: 4097, lr: 2e-2, weightDecay: 0.1 },
      { offset: 0, length: 1, lr: 1e-2, weightDecay: 0 },
      { offset: 3, length: 7, lr: 5e-3, weightDecay: 0.5 },
      { offset: 20, length: 1000, lr: 1e-2, weightDecay: 0.01 },
      { offset: 1100, length: 0, lr: 1, weightDecay: 1 },
      { offset: 1100, length: 7900, lr: 3e-2, weightDecay: 0.05 },
    ];
    const N = 13_100;
    const table = createSegmentTable(ctx, segs);
    expect(table.chunks).toBe(2 + 1 + 1 + 1 + 3); // chunks break at multiples of 4096 in the arena
    const p0 = toF32(randn(N, 21));
    const inSeg = new Uint8Array(N);
    for (const s of segs) inSeg.fill(1, s.offset, s.offset + s.length);
    const pInit = new Float32Array(p0);
    for (let i = 0; i < N; i++) if (!inSeg[i]) pInit[i] = NaN;
    const p = upload(ctx, pInit, [N]);
    const m = upload(ctx, new Float32Array(N), [N]);
    const v = upload(ctx, new Float32Array(N), [N]);
    const rp = Float64Array.from(p0);
    const rm = new Float64Array(N);
    const rv = new Float64Array(N);
    const lrScale = 0.5;
    for (let t = 1; t <= 3; t++) {
      if (t === 3) {
        segs[0]!.lr = 4e-2;
        updateSegmentTable(ctx, table, segs);
      }
      const g0 = toF32(randn(N, 200 + t));
      const g = upload(ctx, g0, [N]);
      adamwStepMulti(ctx, table, p, g, m, v, { step: t, lrScale });
      for (const s of segs) adamwRef(rp, g0, rm, rv, { lr: s.lr * lrScale, wd: s.weightDecay, ...H, t }, s.offset, s.length);
      release(ctx, g);
    }
    const gp = await f64(p);
    const pick = (a: ArrayLike<number>) => Float64Array.from({ length: N }, (_, i) => (inSeg[i] ? a[i]! : 0));
    for (let i = 0; i < N; i++) if (!inSeg[i] && !Number.isNaN(gp[i]!)) expect(`gap ${i}`).toBe('NaN');
    expectParams(pick(gp), pick(rp), pick(p0));
    expect(relErr(pick(await f64(m)), pick(rm))).toBeLessThan(TOL);
    expect(relErr(pick(await f64(v)), pick(rv))).toBeLessThan(TOL);
    releaseSegmentTable(ctx, table);
    release(ctx, p, m, v);
  });

  it('multi-tensor skip is a no-op and gradScale applies; validates the table and arena sizes', async () => {
    const segs = [
      { offset: 0, length: 5000, lr: 1e-2, weightDecay: 0.1 },
      { offset: 5000, length: 33, lr: 1e-3 },
    ];
    const N = 5033;
    const table = createSegmentTable(ctx, segs);
    const p0 = toF32(randn(N, 31));
    const g0 = toF32(randn(N, 32));
    const p = upload(ctx, p0, [N]);
    const m = upload(ctx, new Float32Array(N), [N]);
    const v = upload(ctx, new Float32Array(N), [N]);
    const g = upload(ctx, g0, [N]);
    const skip = upload(ctx, [1], [1], 'u32');
    const gs = upload(ctx, [0.125], [1]);
    const before = [await bits(p), await bits(m), await bits(v)];
    adamwStepMulti(ctx, table, p, g, m, v, { step: 1, skip, gradScale: gs });
    expect([await bits(p), await bits(m), await bits(v)]).toEqual(before);
    ctx.write(skip.buffer, new Uint32Array([0]));
    adamwStepMulti(ctx, table, p, g, m, v, { step: 1, skip, gradScale: gs });
    const rp = Float64Array.from(p0);
    const rm = new Float64Array(N);
    const rv = new Float64Array(N);
    for (const s of segs) adamwRef(rp, g0, rm, rv, { lr: s.lr, wd: s.weightDecay ?? 0, ...H, t: 1, gs: 0.125 }, s.offset, s.length);
    expect(relErr(await f64(p), rp)).toBeLessThan(TOL);
    expect(relErr(await f64(v), rv)).toBeLessThan(TOL);
    const small = upload(ctx, new Float32Array(N - 1), [N - 1]);
    expect(() => adamwStepMulti(ctx, table, p, g, m, small, { step: 1 })).toThrow(ShapeError);
    expect(() => createSegmentTable(ctx, [{ offset: 0, length: 10, lr: 1 }, { offset: 9, length: 2, lr: 1 }])).toThrow(ShapeError);
    expect(() => createSegmentTable(ctx, [{ offset: -1, length: 10, lr: 1 }])).toThrow(ShapeError);
    expect(() => updateSegmentTable(ctx, table, [{ lr: 1 }])).toThrow(ShapeError);
    releaseSegmentTable(ctx, table);
    release(ctx, p, m, v, g, skip, gs, small);
  });
});
