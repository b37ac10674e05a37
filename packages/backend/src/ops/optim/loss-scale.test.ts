import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { download, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr, rng, toF32 } from '../../testing';
import { adamwStep } from './adamw';
import { gradNorm } from './grad-norm';
import {
  clearFlag,
  createFlag,
  createLossScaleState,
  readLossScaleState,
  scaleInPlace,
  unscaleAndCheck,
  updateLossScale,
} from './loss-scale';
import { adamwRef, GradScalerSim } from './optim.ref';
import { advanceStep, createStepState } from './step';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

async function flagOf(f: DeviceTensor): Promise<number> {
  return new Uint32Array(await ctx.read(f.buffer, 4))[0]!;
}

describe('scaleInPlace', () => {
  it('multiplies by a host number or a GPU scalar, exactly as f32', async () => {
    const n = 4097;
    const x0 = Float32Array.from(randn(n, 1));
    const x = upload(ctx, x0, [n]);
    scaleInPlace(ctx, x, 0.3);
    const s = upload(ctx, [-1.7], [1]);
    scaleInPlace(ctx, x, s);
    const got = await download(ctx, x);
    const f1 = Math.fround(0.3);
    const f2 = Math.fround(-1.7);
    let bad = 0;
    for (let i = 0; i < n; i++) if (got[i] !== Math.fround(Math.fround(x0[i]! * f1) * f2)) bad++;
    expect(bad).toBe(0);
    expect(() => scaleInPlace(ctx, x, x)).toThrow(ShapeError);
    expect(() => scaleInPlace(ctx, x, NaN)).toThrow(ConfigError);
    release(ctx, x, s);
  });
});

describe('unscaleAndCheck', () => {
  it('unscales exactly, leaves the flag clear on clean grads and sets it on inf or NaN', async () => {
    const flag = createFlag(ctx);
    const state = createLossScaleState(ctx, 1024);
    for (const n of [1, 7, 1000, 4097]) {
      const g0 = toF32(randn(n, n));
      const scaled = upload(ctx, Float32Array.from(g0, (x) => x * 1024), [n]);
      unscaleAndCheck(ctx, scaled, state, flag);
      expect(Array.from(await download(ctx, scaled))).toEqual(Array.from(g0, (x) => Math.fround(x)));
      expect(await flagOf(flag)).toBe(0);
      release(ctx, scaled);
    }
    for (const bad of [Infinity, -Infinity, NaN]) {
      const n = 1000;
      const g0 = Float32Array.from(randn(n, 3));
      g0[n - 17] = bad;
      const clean = upload(ctx, randn(50, 4), [50]);
      const dirty = upload(ctx, g0, [n]);
      unscaleAndCheck(ctx, dirty, 8, flag);
      unscaleAndCheck(ctx, clean, 8, flag); // the flag only accumulates
      expect(await flagOf(flag)).toBe(1);
      const got = await download(ctx, dirty);
      expect(Object.is(got[n - 17], bad / 8)).toBe(true);
      expect(got[0]).toBe(Math.fround(g0[0]! / 8));
      clearFlag(ctx, flag);
      expect(await flagOf(flag)).toBe(0);
      release(ctx, clean, dirty);
    }
    release(ctx, flag, state);
  });
});

describe('updateLossScale', () => {
  it('follows a CPU GradScaler simulation step by step', async () => {
    const state = createLossScaleState(ctx, 2 ** 12);
    const flag = createFlag(ctx);
    const sim = new GradScalerSim(2 ** 12, 2, 0.5, 3);
    const r = rng(5);
    for (let k = 0; k < 30; k++) {
      const inf = r() < 0.25;
      ctx.write(flag.buffer, new Uint32Array([inf ? 1 : 0]));
      updateLossScale(ctx, state, flag, { growthInterval: 3 });
      sim.update(inf);
      expect(await readLossScaleState(ctx, state)).toEqual({ scale: sim.scale, growthTracker: sim.tracker });
      expect(await flagOf(flag)).toBe(0);
    }
    const big = createLossScaleState(ctx, 2 ** 127);
    updateLossScale(ctx, big, flag, { growthInterval: 1 });
    expect(await readLossScaleState(ctx, big)).toEqual({ scale: 2 ** 127, growthTracker: 0 });
    expect(() => updateLossScale(ctx, state, flag, { growthInterval: 0 })).toThrow(ConfigError);
    expect(() => updateLossScale(ctx, state, state)).toThrow(ShapeError);
    release(ctx, state, flag, big);
  });
});

describe('a GPU-resident mixed-precision step', () => {
  it('unscale + check, clip, AdamW with skip, scale update: matches PyTorch semantics with no read-back', async () => {
    const sizes = [7, 1000, 4097];
    const init = 2 ** 10;
    const maxNorm = 3;
    const p0 = sizes.map((n, i) => toF32(randn(n, 500 + i)));
    const ps = p0.map((x, i) => upload(ctx, x, [sizes[i]!]));
    const ms = sizes.map((n) => upload(ctx, new Float32Array(n), [n]));
    const vs = sizes.map((n) => upload(ctx, new Float32Array(n), [n]));
    const rp = p0.map((x) => Float64Array.from(x));
    const rm = sizes.map((n) => new Float64Array(n));
    const rv = sizes.map((n) => new Float64Array(n));
    const state = createLossScaleState(ctx, init);
    const flag = createFlag(ctx);
    const st = createStepState(ctx);
    const sim = new GradScalerSim(init, 2, 0.5, 2);
    let t = 0;
    for (let k = 1; k <= 6; k++) {
      // grads as the backward of a loss scaled by the current scale (a power of two: exact)
      const g0 = sizes.map((n, i) => toF32(randn(n, 40 * k + i, 2)));
      const inf = k === 2 || k === 5;
      const scaled = g0.map((g, i) => {
        const s = Float32Array.from(g, (x) => x * sim.scale);
        if (inf && i === 1) s[3] = Infinity;
        return upload(ctx, s, [sizes[i]!]);
      });
      for (const g of scaled) unscaleAndCheck(ctx, g, state, flag);
      const clip = gradNorm(ctx, scaled, { maxNorm });
      advanceStep(ctx, st, { skip: flag });
      for (let i = 0; i < sizes.length; i++)
        adamwStep(ctx, ps[i]!, scaled[i]!, ms[i]!, vs[i]!, { lr: 1e-2, gradScale: clip, skip: flag, stepState: st });
      updateLossScale(ctx, state, flag, { growthInterval: 2 });
      if (!inf) {
        let sq = 0;
        for (const g of g0) for (const x of g) sq += x * x;
        const coef = Math.min(1, maxNorm / (Math.sqrt(sq) + 1e-6));
        t++;
        for (let i = 0; i < sizes.length; i++) adamwRef(rp[i]!, g0[i]!, rm[i]!, rv[i]!, { lr: 1e-2, wd: 0.01, b1: 0.9, b2: 0.999, eps: 1e-8, t, gs: coef });
      }
      sim.update(inf);
      release(ctx, clip, ...scaled);
    }
    expect(await readLossScaleState(ctx, state)).toEqual({ scale: sim.scale, growthTracker: sim.tracker });
    for (let i = 0; i < sizes.length; i++) {
      expect(relErr(await download(ctx, ps[i]!), rp[i]!)).toBeLessThan(2e-6);
      expect(relErr(await download(ctx, vs[i]!), rv[i]!)).toBeLessThan(2e-5);
    }
    release(ctx, state, flag, st, ...ps, ...ms, ...vs);
  });
});

describe('unscaleAndCheck over arena pieces', () => {
  it('unscales the pieces of an arena in one dispatch, like the same tensors one by one; gaps untouched', async () => {
    // pieces of 3000 (3 chunks), 1 and 1025 elements at offsets 0, 3008 and 3072 of an arena filled with NaN
    const sizes = [3000, 1, 1025];
    const offsets = [0, 3008, 3072];
    const total = 3072 + 1025 + 31;
    const data = Float32Array.from(randn(total, 7, 1e3));
    const nan = new Uint32Array(total).fill(0x7fc00000);
    const arenaInit = new Float32Array(nan.buffer);
    sizes.forEach((n, i) => arenaInit.set(data.subarray(offsets[i]!, offsets[i]! + n), offsets[i]!));
    const arena = upload(ctx, arenaInit, [total]);
    const tensors = sizes.map((n, i) => upload(ctx, data.subarray(offsets[i]!, offsets[i]! + n), [n]));
    const alone = upload(ctx, randn(77, 8), [77]);
    const scale = createLossScaleState(ctx, 1024);
    const [fa, fb] = [createFlag(ctx), createFlag(ctx)];
    const pieces = sizes.map((n, i) => ({ arena, offset: offsets[i]!, length: n }));
    const d0 = ctx.stats.dispatches;
    unscaleAndCheck(ctx, [pieces[2]!, alone, pieces[0]!, pieces[1]!], scale, fa);
    expect(ctx.stats.dispatches - d0).toBe(2); // the tensor, then the arena's pieces
    for (const t of tensors) unscaleAndCheck(ctx, t, scale, fb);
    const got = new Uint32Array((await download(ctx, arena)).buffer);
    for (let i = 0; i < 3; i++) {
      const want = new Uint32Array((await download(ctx, tensors[i]!)).buffer);
      expect(got.subarray(offsets[i]!, offsets[i]! + sizes[i]!)).toEqual(want);
    }
    // the NaN gaps were neither scaled nor seen by the check
    for (let e = 0; e < total; e++) if (!sizes.some((n, i) => e >= offsets[i]! && e < offsets[i]! + n)) expect(got[e]).toBe(0x7fc00000);
    expect(await flagOf(fa)).toBe(0);
    // an inf inside a piece sets the flag
    ctx.write(arena.buffer, new Float32Array([Infinity]), 4 * (3072 + 1024));
    unscaleAndCheck(ctx, pieces, scale, fa);
    expect(await flagOf(fa)).toBe(1);
    release(ctx, arena, alone, scale, fa, fb, ...tensors);
  });

  it("an arena's segment tables (unscale, grad norm) are released with the arena: live bytes back where they were", async () => {
    const live0 = ctx.memory.live;
    const arena = upload(ctx, randn(4000, 9), [4000]);
    const pieces = [{ arena, offset: 0, length: 3000 }, { arena, offset: 3008, length: 900 }];
    const scale = createLossScaleState(ctx, 1024);
    const flag = createFlag(ctx);
    for (let step = 0; step < 3; step++) {
      unscaleAndCheck(ctx, pieces, scale, flag);
      release(ctx, gradNorm(ctx, pieces, { maxNorm: 1 }));
    }
    release(ctx, scale, flag);
    const withTables = ctx.memory.live;
    expect(withTables).toBeGreaterThan(live0 + 4000 * 4); // the arena and its two tables
    release(ctx, arena);
    await ctx.sync();
    expect(ctx.memory.live).toBe(live0);
  });
});
