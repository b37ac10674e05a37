import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, release, upload } from '../../tensor';
import { absErr, dot, finiteDiff, randn, relErr } from '../../testing';
import { rope, ropeAttentionScaling, ropeInvFreq, ropePair, type RopeFreqConfig } from './rope';
import { copyRows } from '../copy-rows';
import { HF_COS_DEFAULT64, HF_ROPE, HF_SIN_DEFAULT64 } from './rope.hf';
import { checkRope, get, poisoned, randTensor } from './test-util';
import { refRope, type Geo } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** f32 bits distance (ulps) between two float32 values of the same sign. */
function ulps(a: number, b: number): number {
  const fa = new Float32Array([a, b]);
  const u = new Int32Array(fa.buffer);
  return Math.abs(u[0]! - u[1]!);
}

describe('ropeInvFreq', () => {
  const cfgs: Record<string, RopeFreqConfig> = {
    default64: { theta: 10000, headDim: 64 },
    default128_500k: { theta: 500000, headDim: 128 },
    default100: { theta: 10000, headDim: 100 },
    linear: { type: 'linear', theta: 10000, headDim: 64, factor: 4 },
    dynamic_init: { type: 'dynamic', theta: 10000, headDim: 64, factor: 2, maxPositionEmbeddings: 2048 },
    dynamic_5000: { type: 'dynamic', theta: 10000, headDim: 64, factor: 2, maxPositionEmbeddings: 2048, seqLen: 5000 },
    dynamic_1000: { type: 'dynamic', theta: 10000, headDim: 64, factor: 2, maxPositionEmbeddings: 2048, seqLen: 1000 },
    llama3: {
      type: 'llama3', theta: 500000, headDim: 128, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192,
    },
    llama3_32: {
      type: 'llama3', theta: 500000, headDim: 128, factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192,
    },
  };

  /** The formulas in float64, written independently of the implementation. */
  function derive(c: RopeFreqConfig): number[] {
    const dim = c.headDim;
    let base = c.theta;
    if (c.type === 'dynamic') {
      const L = Math.max(c.seqLen ?? c.maxPositionEmbeddings!, c.maxPositionEmbeddings!);
      base = c.theta * ((c.factor! * L) / c.maxPositionEmbeddings! - (c.factor! - 1)) ** (dim / (dim - 2));
    }
    const inv = Array.from({ length: dim / 2 }, (_, i) => 1 / base ** ((2 * i) / dim));
    if (c.type === 'linear') return inv.map((v) => v / c.factor!);
    if (c.type !== 'llama3') return inv;
    const old = c.originalMaxPositionEmbeddings!;
    return inv.map((v) => {
      const wl = (2 * Math.PI) / v;
      if (wl < old / c.highFreqFactor!) return v;
      if (wl > old / c.lowFreqFactor!) return v / c.factor!;
      const s = (old / wl - c.lowFreqFactor!) / (c.highFreqFactor! - c.lowFreqFactor!);
      return (1 - s) * (v / c.factor!) + s * v;
    });
  }

  for (const [name, cfg] of Object.entries(cfgs)) {
    it(`${name}: matches HF transformers to 1 ulp and the float64 formulas to 1e-6`, () => {
      const got = ropeInvFreq(cfg);
      const hf = HF_ROPE[name]!;
      expect(got.length).toBe(hf.inv.length);
      let worst = 0;
      for (let i = 0; i < got.length; i++) worst = Math.max(worst, ulps(got[i]!, hf.inv[i]!));
      expect(worst).toBeLessThanOrEqual(1);
      expect(relErr(got, derive(cfg))).toBeLessThan(1e-6);
      expect(ropeAttentionScaling(cfg)).toBe(hf.att);
    });
  }

  it('llama3 keeps high frequencies, divides low ones by factor, and smooths between', () => {
    const c = cfgs.llama3!;
    const base = ropeInvFreq({ theta: c.theta, headDim: c.headDim });
    const l3 = ropeInvFreq(c);
    expect(l3[0]).toBe(base[0]);
    expect(l3[63]).toBe(Math.fround(base[63]! / 8));
    const mid = l3.findIndex((v, i) => v !== base[i] && v !== Math.fround(base[i]! / 8));
    expect(mid).toBeGreaterThan(0);
  });

  it('rejects bad configs', () => {
    expect(() => ropeInvFreq({ type: 'linear', theta: 1e4, headDim: 64 })).toThrow(ConfigError);
    expect(() => ropeInvFreq({ theta: 1e4, headDim: 63 })).toThrow(ConfigError);
    expect(() => ropeInvFreq({ type: 'yarn' as 'linear', theta: 1e4, headDim: 64, factor: 2 })).toThrow(/unsupported/);
  });
});

describe('rope kernel', () => {
  it('cos/sin match HF LlamaRotaryEmbedding, positions up to 100000', async () => {
    const inv = ropeInvFreq({ theta: 10000, headDim: 64 });
    const positions = [0, 1, 7, 100, 2047, 100000];
    const T = positions.length;
    const x = new Float32Array(T * 64);
    for (let t = 0; t < T; t++) for (let i = 0; i < 32; i++) x[t * 64 + i] = 1; // y = (cos, sin)
    const xt = upload(ctx, x, [1, T, 1, 64]);
    const it = upload(ctx, inv, [32]);
    const ids = upload(ctx, positions, [1, T], 'i32');
    const y = await get(ctx, rope(ctx, xt, it, { positionIds: ids, out: poisoned(ctx, [1, T, 1, 64]) }));
    let worst = 0;
    for (let t = 0; t < T; t++)
      for (let i = 0; i < 32; i++) {
        worst = Math.max(worst, Math.abs(y[t * 64 + i]! - HF_COS_DEFAULT64[t]![i]!));
        worst = Math.max(worst, Math.abs(y[t * 64 + 32 + i]! - HF_SIN_DEFAULT64[t]![i]!));
      }
    expect(worst).toBeLessThan(2e-6);
    release(ctx, xt, it, ids);
  });

  it('reference backward matches finite differences', () => {
    const g: Geo = { b: 2, t: 3, h: 2, d: 8, layout: 'BTHD' };
    const inv = ropeInvFreq({ theta: 10000, headDim: 6 }); // partial: 3 pairs of 4
    const pos = [
      [0, 5, 9],
      [3, 4, 100],
    ];
    const n = g.b * g.t * g.h * g.d;
    const x = randn(n, 1);
    const dy = randn(n, 2);
    const dx = refRope(dy, inv, pos, g, -1, 0.7);
    const fd = finiteDiff((xx) => dot(refRope(xx, inv, pos, g, 1, 0.7), dy), x);
    expect(relErr(dx, fd)).toBeLessThan(1e-7);
  });

  const cases: [string, Geo, DType, number, 'ids1' | 'ids2' | number][] = [
    ['f32 BTHD', { b: 2, t: 5, h: 3, d: 64, layout: 'BTHD' }, 'f32', 64, 0],
    ['bf16 head_dim 100, offset 1000', { b: 1, t: 7, h: 2, d: 100, layout: 'BTHD' }, 'bf16', 100, 1000],
    ['f16 BHTD with [B, T] ids', { b: 2, t: 3, h: 4, d: 16, layout: 'BHTD' }, 'f16', 16, 'ids2'],
    ['partial rotary 32 of 64, [T] ids', { b: 2, t: 3, h: 3, d: 64, layout: 'BTHD' }, 'f32', 32, 'ids1'],
    ['head_dim 256, 37 tokens', { b: 1, t: 37, h: 2, d: 256, layout: 'BTHD' }, 'f32', 256, 17],
  ];
  for (const [name, g, dt, rd, posMode] of cases) {
    it(`forward and backward: ${name}`, async () => {
      const n = g.b * g.t * g.h * g.d;
      await checkRope(ctx, g, dt, rd, posMode, 40000, [n, n + 1]);
    });
  }

  it('attention scaling multiplies cos and sin', async () => {
    const g: Geo = { b: 1, t: 4, h: 2, d: 8, layout: 'BTHD' };
    const inv = ropeInvFreq({ theta: 10000, headDim: 8 });
    const x = randTensor(ctx, [1, 4, 2, 8], 'f32', 3);
    const invT = upload(ctx, inv, [4]);
    const y = rope(ctx, x.t, invT, { attentionScaling: 1.25, positionOffset: 5 });
    const pos = [[5, 6, 7, 8]];
    expect(absErr(await get(ctx, y), refRope(x.data, inv, pos, g, 1, 1.25))).toBeLessThan(2e-5);
    release(ctx, x.t, invT, y);
  });

  it('validates shapes', () => {
    const x = upload(ctx, new Float32Array(2 * 3 * 8), [2, 3, 8]);
    const inv = upload(ctx, new Float32Array(5), [5]);
    expect(() => rope(ctx, x, inv)).toThrow(ShapeError);
    expect(() => rope(ctx, x, inv)).toThrow(/\[5\].*\[2, 3, 8\]/);
    const inv4 = upload(ctx, new Float32Array(4), [4]);
    const ids = upload(ctx, [0, 1, 2], [3], 'i32');
    expect(() => rope(ctx, x, inv4, { positionIds: ids })).toThrow(/positionIds \[3\]/);
    release(ctx, x, inv, inv4, ids);
  });
});

describe('ropePair', () => {
  it('two tensors at the same positions in one dispatch: the values of two rope calls, bit for bit', async () => {
    const inv = upload(ctx, ropeInvFreq({ theta: 10000, headDim: 16, partialRotaryFactor: 0.75 }), [6]);
    for (const [T, H, H2, dt2, ids] of [
      [1, 4, 2, 'f32', false],
      [3, 5, 1, 'f16', false],
      [2, 2, 3, 'f32', true],
    ] as [number, number, number, DType, boolean][]) {
      const x = upload(ctx, randn(2 * T * H * 16, 70 + T), [2, T, H, 16]);
      const x2 = upload(ctx, randn(2 * T * H2 * 16, 80 + T), [2, T, H2, 16], dt2);
      const positionIds = ids ? upload(ctx, [7, 3], [T], 'i32') : undefined;
      const opts = { positionOffset: 11, attentionScaling: 1.25, ...(positionIds ? { positionIds } : {}) };
      const [y, y2] = ropePair(ctx, x, x2, inv, opts);
      const [a, a2] = [rope(ctx, x, inv, opts), rope(ctx, x2, inv, opts)];
      const label = `T ${T}, heads ${H} + ${H2}, ${dt2}${ids ? ', ids' : ''}`;
      expect(Array.from(await download(ctx, y)), label).toEqual(Array.from(await download(ctx, a)));
      expect(Array.from(await download(ctx, y2)), label).toEqual(Array.from(await download(ctx, a2)));
      release(ctx, x, x2, y, y2, a, a2, ...(positionIds ? [positionIds] : []));
    }
    const x = upload(ctx, randn(64, 1), [1, 1, 4, 16]);
    expect(() => ropePair(ctx, x, upload(ctx, randn(64, 1), [1, 1, 2, 32]), inv)).toThrow(ShapeError);
    expect(() => ropePair(ctx, x, x, inv, { layout: 'BHTD' })).toThrow(ShapeError);
    release(ctx, inv, x);
  });

  it('with store: the rotated keys and the values written into a KV cache at its position, what copyRows writes, bit for bit; nothing else of the cache touched', async () => {
    const inv = upload(ctx, ropeInvFreq({ theta: 10000, headDim: 16, partialRotaryFactor: 0.75 }), [6]);
    const L = 9;
    for (const [B, T, at, vt] of [
      [1, 1, 4, 'f32'],
      [2, 3, 6, 'f16'],
      [2, 1, 0, 'f32'],
    ] as [number, number, number, DType][]) {
      const [H, H2] = [4, 2];
      const x = upload(ctx, randn(B * T * H * 16, 70 + T), [B, T, H, 16]);
      const x2 = upload(ctx, randn(B * T * H2 * 16, 80 + T), [B, T, H2, 16]);
      const v = upload(ctx, randn(B * T * H2 * 16, 90 + T), [B, T, H2, 16], vt);
      const cache = () => upload(ctx, randn(B * L * H2 * 16, 5), [B, L, H2, 16]);
      const [kc, vc, kw, vw] = [cache(), cache(), cache(), cache()];
      const opts = { positionOffset: at, attentionScaling: 1.25 };
      const [y, y2] = ropePair(ctx, x, x2, inv, { ...opts, store: { v, kCache: kc, vCache: vc, at } });
      const [a, a2] = ropePair(ctx, x, x2, inv, opts);
      copyRows(ctx, a2, kw, T, 0, at, { src: v, dst: vw });
      const label = `B ${B}, T ${T} at ${at}, v ${vt}`;
      expect(Array.from(await download(ctx, y)), label).toEqual(Array.from(await download(ctx, a)));
      expect(Array.from(await download(ctx, y2)), label).toEqual(Array.from(await download(ctx, a2)));
      expect(Array.from(await download(ctx, kc)), label).toEqual(Array.from(await download(ctx, kw)));
      expect(Array.from(await download(ctx, vc)), label).toEqual(Array.from(await download(ctx, vw)));
      release(ctx, x, x2, v, kc, vc, kw, vw, y, y2, a, a2);
    }
    // a cache too short, of another shape or dtype
    const x = upload(ctx, randn(64, 1), [1, 1, 4, 16]);
    const k = upload(ctx, randn(32, 2), [1, 1, 2, 16]);
    const c = upload(ctx, randn(3 * 32, 3), [1, 3, 2, 16]);
    expect(() => ropePair(ctx, x, k, inv, { store: { v: k, kCache: c, vCache: c, at: 3 } })).toThrow(ShapeError);
    expect(() => ropePair(ctx, x, k, inv, { store: { v: k, kCache: upload(ctx, randn(96, 3), [1, 3, 1, 32]), vCache: c, at: 0 } })).toThrow(ShapeError);
    expect(() => ropePair(ctx, x, k, inv, { store: { v: k, kCache: c, vCache: upload(ctx, randn(96, 3), [1, 3, 2, 16], 'f16'), at: 0 } })).toThrow(ShapeError);
    release(ctx, inv, x, k, c);
  });
});
