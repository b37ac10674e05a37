// The LLM kernels on tensors larger than one storage binding, split into row chunks. The context caps its
// bindings at 16 KiB (`maxBindingSize`), so small tensors take many chunks, with odd row lengths and 16-bit
// packing at chunk edges; binding.test.ts runs the same code at the device's real limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, numel, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr, rng } from '../../testing';
import { llmTuning, rowChunks } from './common';
import { crossEntropy } from './cross-entropy';
import { embedding, embeddingBackward } from './embedding';
import { geluTanhGate, geluTanhGateBackward, swiglu, swigluBackward } from './gated';
import {
  refCrossEntropy,
  refCrossEntropyGrad,
  refEmbedding,
  refGeluTanhGate,
  refGeluTanhGateBackward,
  refRmsNorm,
  refRmsNormBackward,
  refSwiglu,
  refSwigluBackward,
  type Geo,
} from './llm.ref';
import { addRmsNorm, rmsNormBackward } from './rmsnorm';
import { rope, ropeInvFreq, ropePair } from './rope';
import { checkRope, get, poisoned, randTensor } from './test-util';

const CAP = 16384;
let ctx: Context;
beforeAll(async () => {
  ctx = await createContext({ maxBindingSize: CAP });
});
afterAll(() => ctx.destroy());

const bytes = (t: DeviceTensor) => (t.dtype === 'f16' || t.dtype === 'bf16' ? 2 : 4) * numel(t.shape);

/** Run `f` with launch-shape overrides (e.g. `{ max: 1 }` forces the streaming paths), then restore them. */
async function withShapes(over: Record<string, { max?: number }>, f: () => Promise<void>): Promise<void> {
  const saved = { ...llmTuning.shapes };
  Object.assign(llmTuning.shapes, over);
  try {
    await f();
  } finally {
    llmTuning.shapes = saved;
  }
}

it('the context binds at most maxBindingSize bytes; rowChunks plans aligned ranges', () => {
  expect(ctx.maxBinding).toBe(CAP);
  const t = (shape: number[], dtype: DType = 'f32'): DeviceTensor => ({ buffer: null!, dtype, shape });
  expect(rowChunks(ctx, 'test', 100, [[t([100, 30]), 120, 't']])).toEqual({ whole: true, ranges: [[0, 100]] });
  // 120-byte rows: 136 rows (16320 bytes) per chunk, an even count so that offsets stay 16-byte aligned
  const a = ctx.bindingAlignment;
  const plan = rowChunks(ctx, 'test', 200, [[t([200, 30]), 120, 't']]);
  expect(plan.whole).toBe(false);
  expect(plan.ranges.at(-1)![1]).toBe(200);
  for (const [u0, u1] of plan.ranges) {
    expect((u0 * 120) % a).toBe(0);
    expect((u1 - u0) * 120).toBeLessThanOrEqual(CAP);
  }
  // a bf16 row of 17 elements (34 bytes) with its f32 output: chunks of a multiple of 8 rows
  const p2 = rowChunks(ctx, 'test', 1000, [
    [t([1000, 17], 'bf16'), 34, 'x'],
    [t([1000, 17]), 68, 'y'],
  ]);
  for (const [u0] of p2.ranges) expect([(u0 * 34) % a, (u0 * 68) % a]).toEqual([0, 0]);
  expect(() => rowChunks(ctx, 'test', 4, [[t([4, 5000]), 20000, 'x']])).toThrow(/test: x f32\[4, 5000\] cannot be split/);
  // rows of 5000 bytes fit three to a binding, but a 4-byte-per-row part needs chunks of 4 rows for alignment
  expect(() =>
    rowChunks(ctx, 'test', 9, [
      [t([9, 1250]), 5000, 'x'],
      [t([9]), 4, 'rstd'],
    ]),
  ).toThrow(/x f32\[9, 1250\] cannot be split into storage bindings: .* multiples of 4 rows, 20000 bytes/);
});

describe('embedding in chunks', () => {
  const cases: [number, number, number, DType, boolean][] = [
    // [positions, vocab, D, dtype, force streaming accumulation]
    [300, 310, 40, 'f32', false], // weight 3 chunks, out 3 chunks
    [600, 500, 17, 'bf16', false], // odd D: 16-bit words straddle rows; chunks of 8 rows keep offsets aligned
    [700, 200, 64, 'f16', false], // vec2 reads; dy 7 chunks x dw 4 chunks
    [333, 130, 40, 'f32', true], // streamed accumulation (acc read back from dw)
  ];
  for (const [n, vocab, d, dt, stream] of cases) {
    it(`forward and backward: ${n} ids, weight ${dt}[${vocab}, ${d}]${stream ? ', streamed' : ''}`, () =>
      withShapes(stream ? { emb_bwd: { max: 1 } } : {}, async () => {
        const r = rng(n + d);
        // some out of range (both sides), a frequent id in the last chunk, the rest random
        const ids = Array.from({ length: n }, (_, i) =>
          i % 11 === 4 ? (i % 2 ? vocab + i : -1 - i) : i % 5 === 0 ? vocab - 1 : Math.floor(r() * vocab),
        );
        const idT = upload(ctx, ids, [n], 'i32');
        const w = randTensor(ctx, [vocab, d], dt, vocab);
        const dy = randTensor(ctx, [n, d], dt, d);
        expect(bytes(w.t)).toBeGreaterThan(CAP);
        const out = embedding(ctx, idT, w.t, { out: poisoned(ctx, [n, d]) });
        expect(relErr(await get(ctx, out), refEmbedding(ids, w.data, vocab, d))).toBe(0);
        const dw = embeddingBackward(ctx, idT, dy.t, vocab, { out: poisoned(ctx, [vocab, d]) });
        // bit-identical to summing in position order in f32, as without chunks
        const want = new Float32Array(vocab * d);
        ids.forEach((id, p) => {
          if (id >= 0 && id < vocab) for (let j = 0; j < d; j++) want[id * d + j] = Math.fround(want[id * d + j]! + dy.data[p * d + j]!);
        });
        expect(Array.from(await get(ctx, dw))).toEqual(Array.from(want));
        release(ctx, idT, w.t, dy.t, out, dw);
      }));
  }
});

describe('crossEntropy in chunks', () => {
  const cases: [number, number, DType, number, boolean, boolean][] = [
    // [rows, V, dtype, smoothing, mean, force streaming]
    [50, 300, 'f32', 0.1, true, false],
    [40, 501, 'bf16', 0, false, false], // odd V in 16-bit
    [37, 250, 'f16', 0.05, true, true], // rows streamed (read twice)
  ];
  for (const [n, v, dt, eps, mean, stream] of cases) {
    it(`[${n}, ${v}] ${dt}, smoothing ${eps}, ${mean ? 'mean' : 'sum'}${stream ? ', streamed' : ''}`, () =>
      withShapes(stream ? { ce: { max: 1 } } : {}, async () => {
        const x = randTensor(ctx, [n, v], dt, n + v, 3);
        expect(bytes(x.t)).toBeGreaterThan(CAP);
        const r = rng(v);
        const tg = Array.from({ length: n }, (_, i) => (i % 6 === 2 ? -100 : Math.floor(r() * v)));
        const t = upload(ctx, tg, [n], 'i32');
        const o = { ignore: -100, eps, mean };
        const res = crossEntropy(ctx, x.t, t, {
          labelSmoothing: eps,
          reduction: mean ? 'mean' : 'sum',
          gradScale: 2,
          dlogitsOut: poisoned(ctx, [n, v]),
        });
        const ref = refCrossEntropy(x.data, tg, v, o);
        expect(relErr(await get(ctx, res.rowLoss), ref.rows)).toBeLessThan(2e-5);
        expect(relErr(await get(ctx, res.loss), [ref.loss])).toBeLessThan(2e-5);
        expect((await get(ctx, res.count))[0]).toBe(ref.count);
        expect(relErr(await get(ctx, res.dlogits!), refCrossEntropyGrad(x.data, tg, v, o, 2))).toBeLessThan(2e-5);
        const noGrad = crossEntropy(ctx, x.t, t, { labelSmoothing: eps, reduction: mean ? 'mean' : 'sum', computeGrad: false });
        expect(relErr(await get(ctx, noGrad.loss), [ref.loss])).toBeLessThan(2e-5);
        release(ctx, x.t, t, res.loss, res.rowLoss, res.count, res.dlogits!, noGrad.loss, noGrad.rowLoss, noGrad.count);
      }));
  }

  it('a single row over the binding limit is a clear ShapeError', () => {
    const x = randTensor(ctx, [2, 5000], 'f32', 1);
    const t = upload(ctx, [0, 1], [2], 'i32');
    expect(() => crossEntropy(ctx, x.t, t)).toThrow(ShapeError);
    expect(() => crossEntropy(ctx, x.t, t)).toThrow(
      /logits f32\[2, 5000\] cannot be split into storage bindings: one row is 20000 bytes, over .* limit \(16384 bytes\)/,
    );
    release(ctx, x.t, t);
  });
});

describe('rmsNorm in chunks', () => {
  const cases: [number, number, DType, DType, boolean][] = [
    [70, 100, 'f32', 'bf16', false],
    [60, 81, 'bf16', 'f16', false], // odd D
    [90, 64, 'f16', 'f32', true], // streamed rows and dw partial sums
  ];
  for (const [rows, d, xd, rd, stream] of cases) {
    it(`fused residual [${rows}, ${d}] ${xd} + ${rd}${stream ? ', streamed' : ''}`, () =>
      withShapes(stream ? { rmsnorm: { max: 1 }, rmsnorm_bwd: { max: 1 } } : {}, async () => {
        const eps = 1e-5;
        const x = randTensor(ctx, [rows, d], xd, rows);
        const res = randTensor(ctx, [rows, d], rd, d);
        const w = randTensor(ctx, [d], 'f32', 3);
        const dy = randTensor(ctx, [rows, d], 'f32', 4);
        expect(rows * d * 4).toBeGreaterThan(CAP);
        const f = addRmsNorm(ctx, x.t, res.t, w.t, {
          eps,
          out: poisoned(ctx, [rows, d]),
          sumOut: poisoned(ctx, [rows, d]),
          rstdOut: poisoned(ctx, [rows]),
        });
        const s = x.data.map((v, i) => v + res.data[i]!);
        const ref = refRmsNorm(s, w.data, rows, d, eps);
        expect(relErr(await get(ctx, f.sum), s)).toBeLessThan(1e-6);
        expect(relErr(await get(ctx, f.y), ref.y)).toBeLessThan(1e-5);
        expect(relErr(await get(ctx, f.rstd), ref.rstd)).toBeLessThan(1e-5);
        const b = rmsNormBackward(ctx, dy.t, f.sum, w.t, f.rstd, { dxOut: poisoned(ctx, [rows, d]), dwOut: poisoned(ctx, [d]) });
        const refB = refRmsNormBackward(dy.data, s, w.data, rows, d, eps);
        expect(relErr(await get(ctx, b.dx), refB.dx)).toBeLessThan(1e-4);
        expect(relErr(await get(ctx, b.dw), refB.dw)).toBeLessThan(1e-4);
        release(ctx, x.t, res.t, w.t, dy.t, f.y, f.sum, f.rstd, b.dx, b.dw);
      }));
  }
});

describe('gated activations in chunks', () => {
  const ops = [
    ['swiglu', swiglu, swigluBackward, refSwiglu, refSwigluBackward],
    ['geluTanhGate', geluTanhGate, geluTanhGateBackward, refGeluTanhGate, refGeluTanhGateBackward],
  ] as const;
  for (const [name, fwd, bwd, refFwd, refBwd] of ops)
    for (const [gd, ud] of [
      ['f32', 'f32'],
      ['bf16', 'f16'],
    ] as [DType, DType][])
      it(`${name} [3, 40, 96] gate ${gd}, up ${ud}`, async () => {
        const shape = [3, 40, 96];
        const g = randTensor(ctx, shape, gd, 1, 3);
        const u = randTensor(ctx, shape, ud, 2);
        const dy = randTensor(ctx, shape, 'f32', 3);
        expect(bytes(u.t)).toBeGreaterThan(CAP);
        const out = fwd(ctx, g.t, u.t, { out: poisoned(ctx, shape) });
        const b = bwd(ctx, dy.t, g.t, u.t, { dgateOut: poisoned(ctx, shape), dupOut: poisoned(ctx, shape) });
        const rb = refBwd(dy.data, g.data, u.data);
        expect(relErr(await get(ctx, out), refFwd(g.data, u.data))).toBeLessThan(1e-5);
        expect(relErr(await get(ctx, b.dgate), rb.dg)).toBeLessThan(1e-5);
        expect(relErr(await get(ctx, b.dup), rb.du)).toBeLessThan(1e-5);
        release(ctx, g.t, u.t, dy.t, out, b.dgate, b.dup);
      });
});

describe('rope in chunks', () => {
  const cases: [string, Geo, DType, 'ids1' | 'ids2' | number][] = [
    ['f32 BTHD, chunks across the batch boundary, offset 5', { b: 2, t: 40, h: 4, d: 16, layout: 'BTHD' }, 'f32', 5],
    ['bf16 BTHD, [T] ids, head dim 18', { b: 3, t: 21, h: 5, d: 18, layout: 'BTHD' }, 'bf16', 'ids1'],
    ['f16 BHTD by batches, [B, T] ids', { b: 5, t: 20, h: 4, d: 16, layout: 'BHTD' }, 'f16', 'ids2'],
  ];
  for (const [name, g, dt, posMode] of cases) {
    it(name, async () => {
      expect(g.b * g.t * g.h * g.d * 4).toBeGreaterThan(CAP);
      await checkRope(ctx, g, dt, g.d, posMode, 400, [g.t, g.h]);
    });
  }

  it('ropePair with store, x over one binding: the pair falls back to one rope each and the cache rows are still written, nothing else of the cache touched', async () => {
    const [B, T, H, H2, D, L, at] = [2, 5, 28, 2, 16, 9, 3];
    expect(B * T * H * D * 4).toBeGreaterThan(CAP); // x takes row chunks: the one-dispatch pair cannot run
    expect(B * L * H2 * D * 4).toBeLessThanOrEqual(CAP); // the cache itself fits one binding
    const inv = upload(ctx, ropeInvFreq({ theta: 10000, headDim: D }), [D / 2]);
    const x = upload(ctx, randn(B * T * H * D, 11), [B, T, H, D]);
    const x2 = upload(ctx, randn(B * T * H2 * D, 12), [B, T, H2, D]);
    const v = upload(ctx, randn(B * T * H2 * D, 13), [B, T, H2, D], 'f16');
    const c0 = { k: randn(B * L * H2 * D, 14), v: randn(B * L * H2 * D, 15) };
    const kc = upload(ctx, c0.k, [B, L, H2, D]);
    const vc = upload(ctx, c0.v, [B, L, H2, D]);
    const opts = { positionOffset: at, attentionScaling: 1.5 };
    const [y, y2] = ropePair(ctx, x, x2, inv, { ...opts, store: { v, kCache: kc, vCache: vc, at } });
    const want = rope(ctx, x, inv, opts);
    const want2 = rope(ctx, x2, inv, opts);
    const [gy, gy2, w, w2, gk, gv, vh] = await Promise.all([y, y2, want, want2, kc, vc, v].map((t) => download(ctx, t)));
    expect(Array.from(gy)).toEqual(Array.from(w));
    expect(Array.from(gy2)).toEqual(Array.from(w2));
    const row = H2 * D;
    for (let b = 0; b < B; b++)
      for (let l = 0; l < L; l++) {
        const o = (b * L + l) * row;
        const inNew = l >= at && l < at + T;
        const src = (b * T + (l - at)) * row;
        for (let e = 0; e < row; e++) {
          expect(gk[o + e], `k b ${b} l ${l}`).toBe(inNew ? w2[src + e] : Math.fround(c0.k[o + e]!));
          expect(gv[o + e], `v b ${b} l ${l}`).toBe(inNew ? vh[src + e] : Math.fround(c0.v[o + e]!));
        }
      }
    release(ctx, inv, x, x2, v, kc, vc, y, y2, want, want2);
  });
});
