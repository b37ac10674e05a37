import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { refAttention, refAttentionBackward, refAttentionUnfused, type RefDims, type RefOpts } from './attention.ref';
import { flashAttention, flashAttentionBackward } from './flash';
import type { AttentionTiles } from './tiles';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

interface Case extends RefDims {
  causal?: boolean;
  qOffset?: number;
  /** 'none' | a mask kind */
  mask?: 'i32' | 'u32';
  dtype?: DType;
  scale?: number;
  tiles?: AttentionTiles;
  seed?: number;
  /** Sliding window. */
  window?: number;
  /** Logit soft-capping. */
  softcap?: number;
}

function makeMask(c: { B: number; S: number }): Int32Array {
  // Some masked keys in every sequence; sequence 1 (if any) masks its first keys, like left padding.
  const m = new Int32Array(c.B * c.S);
  for (let b = 0; b < c.B; b++)
    for (let s = 0; s < c.S; s++) m[b * c.S + s] = b === 1 ? (s < Math.min(3, c.S - 1) ? 0 : 1) : (s * 7 + 3) % 5 === 0 ? 0 : 1;
  return m;
}

interface Setup {
  q: DeviceTensor;
  k: DeviceTensor;
  v: DeviceTensor;
  mask?: DeviceTensor;
  qv: Float64Array;
  kv: Float64Array;
  vv: Float64Array;
  mv?: Int32Array;
  opts: RefOpts;
}

async function setup(c: Case): Promise<Setup> {
  const seed = c.seed ?? c.T * 131 + c.S * 17 + c.D;
  const dt = c.dtype ?? 'f32';
  const q = upload(ctx, randn(c.B * c.T * c.Hq * c.D, seed), [c.B, c.T, c.Hq, c.D], dt);
  const k = upload(ctx, randn(c.B * c.S * c.Hkv * c.D, seed + 1), [c.B, c.S, c.Hkv, c.D], dt);
  const v = upload(ctx, randn(c.B * c.S * c.Hkv * c.D, seed + 2), [c.B, c.S, c.Hkv, c.D], dt);
  const mv = c.mask ? makeMask(c) : undefined;
  const mask = mv ? upload(ctx, mv, [c.B, c.S], c.mask) : undefined;
  const qv = Float64Array.from(await download(ctx, q));
  const kv = Float64Array.from(await download(ctx, k));
  const vv = Float64Array.from(await download(ctx, v));
  const opts: RefOpts = {
    causal: c.causal ?? true,
    scale: c.scale ?? 1 / Math.sqrt(c.D),
    qOffset: c.qOffset ?? c.S - c.T,
    mask: mv,
    window: c.window,
    softcap: c.softcap,
  };
  return { q, k, v, mask, qv, kv, vv, mv, opts };
}

function apiOpts(c: Case, st: Setup) {
  // the portable kernels (f16 inputs take the tensor-core kernels by themselves where the adapter has them:
  // flash-tc.test.ts)
  return { causal: c.causal, qOffset: c.qOffset, keyMask: st.mask, scale: c.scale, tiles: c.tiles, slidingWindow: c.window, softcap: c.softcap, tensorCores: false };
}

function expectLse(got: ArrayLike<number>, want: ArrayLike<number>): void {
  let bad = 0;
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    if (w === -Infinity) {
      if (g !== -Infinity) bad++;
    } else if (!Number.isFinite(g)) bad++;
    else worst = Math.max(worst, Math.abs(g - w));
  }
  expect(bad).toBe(0);
  expect(worst).toBeLessThan(1e-4);
}

const name = (c: Case) =>
  `B${c.B} T${c.T} S${c.S} Hq${c.Hq} Hkv${c.Hkv} D${c.D}${c.causal === false ? ' non-causal' : ''}` +
  `${c.qOffset !== undefined ? ` qOffset${c.qOffset}` : ''}${c.mask ? ` mask:${c.mask}` : ''}${c.dtype ? ` ${c.dtype}` : ''}` +
  `${c.tiles ? ` tiles ${JSON.stringify(c.tiles)}` : ''}${c.window !== undefined ? ` window${c.window}` : ''}${c.softcap !== undefined ? ` softcap${c.softcap}` : ''}`;

// Few distinct pipelines (each costs seconds of LLVM time on lavapipe): u32 masks share the no-mask pipeline.
const FWD_CASES: Case[] = [
  { B: 2, T: 16, S: 16, Hq: 2, Hkv: 2, D: 16 },
  { B: 1, T: 1, S: 1, Hq: 1, Hkv: 1, D: 16 },
  { B: 2, T: 33, S: 33, Hq: 4, Hkv: 2, D: 64, mask: 'u32' },
  { B: 2, T: 5, S: 37, Hq: 4, Hkv: 1, D: 80 },
  { B: 1, T: 64, S: 64, Hq: 2, Hkv: 1, D: 64, causal: false, mask: 'u32' },
  { B: 1, T: 1, S: 20, Hq: 4, Hkv: 4, D: 16 },
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, qOffset: -3 },
  { B: 1, T: 12, S: 12, Hq: 2, Hkv: 1, D: 64, scale: 0.3 },
  { B: 2, T: 9, S: 23, Hq: 2, Hkv: 1, D: 13, qOffset: 4, mask: 'i32', dtype: 'f16' },
];

describe('flashAttention forward', () => {
  for (const c of FWD_CASES)
    it(name(c), async () => {
      const st = await setup(c);
      const out = empty(ctx, [c.B, c.T, c.Hq, c.D]);
      const lse = empty(ctx, [c.B, c.Hq, c.T]);
      poison(ctx, out);
      poison(ctx, lse);
      flashAttention(ctx, st.q, st.k, st.v, { ...apiOpts(c, st), out, lse });
      const got = await download(ctx, out);
      const gotL = await download(ctx, lse);
      const ref = refAttention(c, st.opts, st.qv, st.kv, st.vv);
      expect(relErr(got, ref.out)).toBeLessThan(2e-6);
      expect(relErr(got, refAttentionUnfused(c, st.opts, st.qv, st.kv, st.vv))).toBeLessThan(2e-6);
      expectLse(gotL, ref.lse);
      release(ctx, st.q, st.k, st.v, out, lse, ...(st.mask ? [st.mask] : []));
    });
});

describe('attention reference backward', () => {
  for (const c of [
    { B: 2, T: 5, S: 7, Hq: 2, Hkv: 1, D: 4, qOffset: 1, mask: true, causal: true },
    { B: 1, T: 4, S: 6, Hq: 2, Hkv: 2, D: 3, qOffset: 0, mask: false, causal: false },
  ])
    it(`matches finite differences of the float64 forward (causal ${c.causal}, mask ${c.mask})`, () => {
      const o: RefOpts = { causal: c.causal, scale: 0.7, qOffset: c.qOffset, mask: c.mask ? makeMask(c) : undefined };
      const q = randn(c.B * c.T * c.Hq * c.D, 5);
      const k = randn(c.B * c.S * c.Hkv * c.D, 6);
      const v = randn(c.B * c.S * c.Hkv * c.D, 7);
      const w = randn(q.length, 8);
      const g = refAttentionBackward(c, o, q, k, v, w);
      const fq = finiteDiff((x) => dot(refAttention(c, o, x, k, v).out, w), q);
      const fk = finiteDiff((x) => dot(refAttention(c, o, q, x, v).out, w), k);
      const fv = finiteDiff((x) => dot(refAttention(c, o, q, k, x).out, w), v);
      expect(relErr(g.dq, fq)).toBeLessThan(1e-6);
      expect(relErr(g.dk, fk)).toBeLessThan(1e-6);
      expect(relErr(g.dv, fv)).toBeLessThan(1e-6);
    });
});

const BWD_CASES: (Case & { doutType?: DType })[] = [
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 2, D: 16 },
  { B: 2, T: 33, S: 33, Hq: 4, Hkv: 1, D: 64, mask: 'u32' },
  { B: 1, T: 5, S: 37, Hq: 4, Hkv: 2, D: 80 },
  { B: 1, T: 64, S: 64, Hq: 2, Hkv: 1, D: 64, causal: false, mask: 'u32' },
  { B: 2, T: 1, S: 9, Hq: 2, Hkv: 1, D: 16 },
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, qOffset: -3 },
  { B: 2, T: 16, S: 40, Hq: 4, Hkv: 2, D: 80, mask: 'u32' },
  // bf16 q/k/v (its forward is checked here too) with an f16 upstream gradient, odd head dim
  { B: 2, T: 9, S: 23, Hq: 2, Hkv: 1, D: 13, qOffset: 4, mask: 'u32', dtype: 'bf16', doutType: 'f16' },
  // the tiles a 48 KiB-workgroup-memory GPU picks at D = 64 (lavapipe picks others; see tiles.ts)
  { B: 2, T: 70, S: 70, Hq: 4, Hkv: 2, D: 16, mask: 'u32', tiles: { fwd: [64, 32, 2], dkdv: [32, 32, 2], dq: [64, 16, 2] } },
];

describe('flashAttention backward', () => {
  for (const c of BWD_CASES)
    it(name(c) + (c.doutType ? ` dout:${c.doutType}` : ''), async () => {
      const st = await setup(c);
      const dOut = upload(ctx, randn(c.B * c.T * c.Hq * c.D, 99), [c.B, c.T, c.Hq, c.D], c.doutType ?? 'f32');
      const dov = Float64Array.from(await download(ctx, dOut));
      const { out, lse } = flashAttention(ctx, st.q, st.k, st.v, apiOpts(c, st));
      expect(relErr(await download(ctx, out), refAttention(c, st.opts, st.qv, st.kv, st.vv).out)).toBeLessThan(2e-6);
      const dq = empty(ctx, st.q.shape);
      const dk = empty(ctx, st.k.shape);
      const dv = empty(ctx, st.v.shape);
      for (const t of [dq, dk, dv]) poison(ctx, t);
      flashAttentionBackward(ctx, dOut, st.q, st.k, st.v, out, lse, { ...apiOpts(c, st), dq, dk, dv });
      const ref = refAttentionBackward(c, st.opts, st.qv, st.kv, st.vv, dov);
      expect(relErr(await download(ctx, dq), ref.dq)).toBeLessThan(1e-5);
      expect(relErr(await download(ctx, dk), ref.dk)).toBeLessThan(1e-5);
      expect(relErr(await download(ctx, dv), ref.dv)).toBeLessThan(1e-5);
      release(ctx, st.q, st.k, st.v, out, lse, dOut, dq, dk, dv, ...(st.mask ? [st.mask] : []));
    });

  it('is deterministic: two runs are bit-identical', async () => {
    const c: Case = { B: 2, T: 40, S: 40, Hq: 4, Hkv: 1, D: 64, mask: 'u32' };
    const st = await setup(c);
    const dOut = upload(ctx, randn(c.B * c.T * c.Hq * c.D, 3), [c.B, c.T, c.Hq, c.D]);
    const { out, lse } = flashAttention(ctx, st.q, st.k, st.v, apiOpts(c, st));
    const runs: Uint32Array[][] = [];
    for (let r = 0; r < 2; r++) {
      const g = flashAttentionBackward(ctx, dOut, st.q, st.k, st.v, out, lse, apiOpts(c, st));
      runs.push([]);
      for (const t of [g.dq, g.dk, g.dv]) {
        runs[r]!.push(new Uint32Array(await ctx.read(t.buffer, t.shape.reduce((a, b) => a * b, 4))));
        release(ctx, t);
      }
    }
    for (let i = 0; i < 3; i++) expect(Buffer.compare(Buffer.from(runs[0]![i]!.buffer), Buffer.from(runs[1]![i]!.buffer))).toBe(0);
    release(ctx, st.q, st.k, st.v, out, lse, dOut, st.mask!);
  });
});

// Sliding window, forward and backward, on pipelines the cases above already compile (lavapipe): windows of 1,
// 3, one longer than S, windows that are not tile multiples, T != S with qOffset, GQA, key masks, and long
// enough sequences that whole key (and query) tiles fall outside every row's window and are skipped.
const WINDOW_CASES: Case[] = [
  { B: 2, T: 16, S: 16, Hq: 2, Hkv: 2, D: 16, window: 1 },
  { B: 2, T: 33, S: 33, Hq: 4, Hkv: 2, D: 64, mask: 'u32', window: 3 },
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, window: 40 },
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, qOffset: -3, window: 2 ** 30 },
  { B: 2, T: 9, S: 40, Hq: 4, Hkv: 2, D: 16, qOffset: 20, window: 7 },
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, qOffset: -3, window: 4 },
  { B: 1, T: 5, S: 37, Hq: 4, Hkv: 2, D: 80, window: 6 },
  { B: 1, T: 70, S: 70, Hq: 2, Hkv: 1, D: 16, window: 20 },
  { B: 2, T: 70, S: 70, Hq: 4, Hkv: 2, D: 16, mask: 'u32', window: 5, tiles: { fwd: [64, 32, 2], dkdv: [32, 32, 2], dq: [64, 16, 2] } },
];

// Logit soft-capping (Gemma 2), alone and with a window: caps that saturate many scores and a Gemma-sized one.
const SOFTCAP_CASES: Case[] = [
  { B: 1, T: 16, S: 16, Hq: 2, Hkv: 1, D: 16, scale: 0.6, softcap: 1.5 },
  { B: 2, T: 33, S: 33, Hq: 4, Hkv: 2, D: 64, mask: 'u32', scale: 0.4, softcap: 4, window: 7 },
  { B: 1, T: 5, S: 37, Hq: 4, Hkv: 2, D: 80, softcap: 50 },
  { B: 1, T: 64, S: 64, Hq: 2, Hkv: 1, D: 64, causal: false, mask: 'u32', scale: 0.5, softcap: 3 },
];

describe('flashAttention sliding window and soft-capping', () => {
  for (const c of [...WINDOW_CASES, ...SOFTCAP_CASES])
    it(name(c), async () => {
      const st = await setup(c);
      const dOut = upload(ctx, randn(c.B * c.T * c.Hq * c.D, 98), [c.B, c.T, c.Hq, c.D]);
      const dov = Float64Array.from(await download(ctx, dOut));
      const out = empty(ctx, [c.B, c.T, c.Hq, c.D]);
      const lse = empty(ctx, [c.B, c.Hq, c.T]);
      const dq = empty(ctx, st.q.shape);
      const dk = empty(ctx, st.k.shape);
      const dv = empty(ctx, st.v.shape);
      for (const t of [out, lse, dq, dk, dv]) poison(ctx, t);
      flashAttention(ctx, st.q, st.k, st.v, { ...apiOpts(c, st), out, lse });
      flashAttentionBackward(ctx, dOut, st.q, st.k, st.v, out, lse, { ...apiOpts(c, st), dq, dk, dv });
      const ref = refAttention(c, st.opts, st.qv, st.kv, st.vv);
      expect(relErr(await download(ctx, out), ref.out)).toBeLessThan(2e-6);
      expect(relErr(await download(ctx, out), refAttentionUnfused(c, st.opts, st.qv, st.kv, st.vv))).toBeLessThan(2e-6);
      expectLse(await download(ctx, lse), ref.lse);
      const refB = refAttentionBackward(c, st.opts, st.qv, st.kv, st.vv, dov);
      expect(relErr(await download(ctx, dq), refB.dq)).toBeLessThan(1e-5);
      expect(relErr(await download(ctx, dk), refB.dk)).toBeLessThan(1e-5);
      expect(relErr(await download(ctx, dv), refB.dv)).toBeLessThan(1e-5);
      release(ctx, st.q, st.k, st.v, out, lse, dOut, dq, dk, dv, ...(st.mask ? [st.mask] : []));
    });

  it('reference: the window keeps exactly the last `window` keys up to the own position', () => {
    // HF masking_utils: causal `kv <= q` and sliding_window_overlay `kv > q - window`.
    const d = { B: 1, T: 6, S: 6, Hq: 1, Hkv: 1, D: 1 };
    const { out } = refAttention(d, { causal: true, scale: 1, qOffset: 0, window: 3 }, [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 2, 4, 8, 16, 32]);
    // uniform weights over the visible keys: row 5 sees keys 3, 4, 5
    [1, 1.5, 7 / 3, 14 / 3, 28 / 3, 56 / 3].forEach((want, t) => expect(out[t]).toBeCloseTo(want, 12));
  });

  // Every window from 1 to past S at sizes that straddle the tile edges, with lavapipe's tiles (32 and 16 rows or
  // keys at D = 16) and an H200's (64, 32, 16): an off-by-one in the tile ranges of the skip logic shows at some
  // window.
  it('window sweep at both tile sets: forward and backward', async () => {
    const gpu: AttentionTiles = { fwd: [64, 32, 2], dkdv: [32, 32, 2], dq: [64, 16, 2] };
    const bad: string[] = [];
    const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
    // The last two: tiles wholly inside the window of every row of a row block, next to ones that are not.
    for (const [T, S, wins, tiles] of [
      [40, 40, upTo(36), undefined],
      [9, 40, upTo(12), undefined],
      [70, 70, upTo(68), gpu],
      [100, 100, [62, 63, 64, 95, 96], undefined],
      [130, 130, [95, 96, 127, 128], gpu],
    ] as const)
      for (const window of wins) {
        const c: Case = { B: 1, T, S, Hq: 2, Hkv: 1, D: 16, window, seed: 7, tiles };
        const st = await setup(c);
        const dOut = upload(ctx, randn(c.B * c.T * c.Hq * c.D, 97), [c.B, c.T, c.Hq, c.D]);
        const { out, lse } = flashAttention(ctx, st.q, st.k, st.v, apiOpts(c, st));
        const g = flashAttentionBackward(ctx, dOut, st.q, st.k, st.v, out, lse, apiOpts(c, st));
        const ref = refAttention(c, st.opts, st.qv, st.kv, st.vv);
        const refB = refAttentionBackward(c, st.opts, st.qv, st.kv, st.vv, Float64Array.from(await download(ctx, dOut)));
        const errs = {
          out: relErr(await download(ctx, out), ref.out) / 2e-6,
          dq: relErr(await download(ctx, g.dq), refB.dq) / 1e-5,
          dk: relErr(await download(ctx, g.dk), refB.dk) / 1e-5,
          dv: relErr(await download(ctx, g.dv), refB.dv) / 1e-5,
        };
        for (const [k, e] of Object.entries(errs)) if (!(e < 1)) bad.push(`T${T} S${S} window${window}${tiles ? ' gpu tiles' : ''} ${k}`);
        release(ctx, st.q, st.k, st.v, dOut, out, lse, g.dq, g.dk, g.dv);
      }
    expect(bad).toEqual([]);
  });

  for (const o of [
    { causal: true, scale: 0.7, qOffset: 2, window: 3 },
    { causal: true, scale: 0.9, qOffset: 2, softcap: 1.2 },
  ] as RefOpts[])
    it(`reference backward matches finite differences (${o.window ? `window ${o.window}` : `softcap ${o.softcap}`})`, () => {
      const c = { B: 1, T: 5, S: 7, Hq: 2, Hkv: 1, D: 3 };
      const q = randn(c.B * c.T * c.Hq * c.D, 15);
      const k = randn(c.B * c.S * c.Hkv * c.D, 16);
      const v = randn(c.B * c.S * c.Hkv * c.D, 17);
      const w = randn(q.length, 18);
      const g = refAttentionBackward(c, o, q, k, v, w);
      expect(relErr(g.dq, finiteDiff((x) => dot(refAttention(c, o, x, k, v).out, w), q))).toBeLessThan(1e-6);
      expect(relErr(g.dk, finiteDiff((x) => dot(refAttention(c, o, q, x, v).out, w), k))).toBeLessThan(1e-6);
      expect(relErr(g.dv, finiteDiff((x) => dot(refAttention(c, o, q, k, x).out, w), v))).toBeLessThan(1e-6);
    });

  it('throws ConfigError for a bad window or softcap', () => {
    const q = empty(ctx, [1, 4, 2, 16]);
    for (const c of [0, -1, Number.POSITIVE_INFINITY]) expect(() => flashAttention(ctx, q, q, q, { softcap: c })).toThrow(ConfigError);
    expect(() => flashAttention(ctx, q, q, q, { softcap: -1 })).toThrow(/softcap must be a positive number, got -1/);
    for (const w of [0, -2, 2.5, Number.NaN]) expect(() => flashAttention(ctx, q, q, q, { slidingWindow: w })).toThrow(ConfigError);
    expect(() => flashAttention(ctx, q, q, q, { slidingWindow: 0 })).toThrow(/slidingWindow must be a positive integer, got 0/);
    expect(() => flashAttention(ctx, q, q, q, { slidingWindow: 3, causal: false })).toThrow(/causal/);
    release(ctx, q);
  });
});

describe('flashAttention validation', () => {
  it('throws ShapeError naming the shapes', () => {
    const q = empty(ctx, [1, 4, 4, 16]);
    const k = empty(ctx, [1, 4, 3, 16]);
    const k2 = empty(ctx, [1, 4, 2, 8]);
    const k3 = empty(ctx, [1, 4, 2, 16]);
    const m = empty(ctx, [1, 5], 'i32');
    const mf = empty(ctx, [1, 4], 'f32');
    expect(() => flashAttention(ctx, q, k, k)).toThrow(ShapeError);
    expect(() => flashAttention(ctx, q, k, k)).toThrow(/f32\[1, 4, 3, 16\]/);
    expect(() => flashAttention(ctx, q, k2, k2)).toThrow(/head dim/);
    expect(() => flashAttention(ctx, q, k3, k)).toThrow(/same shape/);
    expect(() => flashAttention(ctx, q, k3, k3, { keyMask: m })).toThrow(/keyMask i32\[1, 5\]/);
    expect(() => flashAttention(ctx, q, k3, k3, { keyMask: mf })).toThrow(ShapeError);
    expect(() => flashAttention(ctx, empty(ctx, [4, 4, 16]), k3, k3)).toThrow(ShapeError);
    const { out, lse } = flashAttention(ctx, q, k3, k3);
    expect(() => flashAttentionBackward(ctx, k3, q, k3, k3, out, lse)).toThrow(/dOut f32\[1, 4, 2, 16\]/);
    release(ctx, q, k, k2, k3, m, mf, out, lse);
  });
});
