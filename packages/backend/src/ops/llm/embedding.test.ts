import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { release, upload } from '../../tensor';
import { dot, finiteDiff, randn, relErr, rng } from '../../testing';
import { embedding, embeddingBackward } from './embedding';
import { get, poisoned, randTensor } from './test-util';
import { refEmbedding as refFwd, refEmbeddingBackward as refBwd } from './llm.ref';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** ids with repeats (a hot id), and optionally some out of range. */
function makeIds(n: number, vocab: number, seed: number, bad = false): number[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => {
    if (bad && i % 7 === 3) return i % 2 ? vocab + i : -1 - i;
    if (i % 5 === 0) return 1 % vocab; // a frequent id
    return Math.floor(r() * vocab);
  });
}

describe('embedding', () => {
  it('reference backward matches finite differences', () => {
    const ids = [2, 0, 2, 5, -1];
    const vocab = 4;
    const d = 3;
    const w = randn(vocab * d, 1);
    const dy = randn(ids.length * d, 2);
    const fd = finiteDiff((ww) => dot(refFwd(ids, ww, vocab, d), dy), w);
    expect(relErr(refBwd(ids, dy, vocab, d), fd)).toBeLessThan(1e-7);
  });

  const cases: [number[], number, number, DType, boolean][] = [
    [[1], 10, 17, 'f32', false],
    [[3], 5, 64, 'bf16', true],
    [[37], 1000, 100, 'f16', false],
    [[2, 300], 1000, 64, 'f32', true], // 600 ids: crosses the 512-element sort blocks
    [[4, 512], 50, 17, 'bf16', false], // 2048 ids, many repeats, odd D (scalar 16-bit reads)
    [[3], 7, 2100, 'f32', false], // D over 16 units per thread: streamed accumulation
    [[9000], 300, 8, 'f32', true], // more ids than a sort block (4096): global merge passes
  ];
  for (const [idShape, vocab, d, dt, bad] of cases) {
    it(`forward and backward: ids ${JSON.stringify(idShape)}, weight ${dt}[${vocab}, ${d}]${bad ? ', out-of-range ids' : ''}`, async () => {
      const n = idShape.reduce((a, b) => a * b);
      const ids = makeIds(n, vocab, n + vocab, bad);
      const idT = upload(ctx, ids, idShape, 'i32');
      const w = randTensor(ctx, [vocab, d], dt, vocab + d);
      const dy = randTensor(ctx, [...idShape, d], dt, d + 3);
      const out = embedding(ctx, idT, w.t, { out: poisoned(ctx, [...idShape, d]) });
      const dw = embeddingBackward(ctx, idT, dy.t, vocab, { out: poisoned(ctx, [vocab, d]) });
      expect(relErr(await get(ctx, out), refFwd(ids, w.data, vocab, d))).toBe(0);
      expect(relErr(await get(ctx, dw), refBwd(ids, dy.data, vocab, d))).toBeLessThan(1e-6);
      release(ctx, idT, w.t, dy.t, out, dw);
    });
  }

  it('the backward is deterministic (bit-identical on repeat)', async () => {
    const ids = makeIds(1500, 20, 9);
    const idT = upload(ctx, ids, [1500], 'i32');
    const dy = randTensor(ctx, [1500, 33], 'f32', 4);
    const a = await get(ctx, embeddingBackward(ctx, idT, dy.t, 20));
    const b = await get(ctx, embeddingBackward(ctx, idT, dy.t, 20));
    expect(a).toEqual(b);
    // and equal to summing in position order in f32
    const want = new Float32Array(20 * 33);
    ids.forEach((id, n) => {
      for (let j = 0; j < 33; j++) want[id * 33 + j] = Math.fround(want[id * 33 + j]! + dy.data[n * 33 + j]!);
    });
    expect(Array.from(a)).toEqual(Array.from(want));
    release(ctx, idT, dy.t);
  });

  it('paddingIdx (PyTorch padding_idx): that row gets no gradient, the others theirs', async () => {
    const ids = makeIds(700, 12, 5); // crosses a sort block, every id repeated
    const idT = upload(ctx, ids, [700], 'i32');
    const dy = randTensor(ctx, [700, 9], 'f32', 6);
    const want = refBwd(ids, dy.data, 12, 9);
    want.fill(0, 3 * 9, 4 * 9);
    expect(ids.filter((i) => i === 3).length).toBeGreaterThan(10);
    const dw = embeddingBackward(ctx, idT, dy.t, 12, { paddingIdx: 3, out: poisoned(ctx, [12, 9]) });
    expect(relErr(await get(ctx, dw), want)).toBeLessThan(1e-6);
    expect(() => embeddingBackward(ctx, idT, dy.t, 12, { paddingIdx: 12 })).toThrow(/paddingIdx 12/);
    release(ctx, idT, dy.t, dw);
  });

  it('validates shapes', () => {
    const ids = upload(ctx, [0, 1], [2], 'i32');
    const idf = upload(ctx, [0, 1], [2], 'f32');
    const w = upload(ctx, new Float32Array(12), [12]);
    const dy = upload(ctx, new Float32Array(12), [3, 4]);
    expect(() => embedding(ctx, ids, w)).toThrow(ShapeError);
    expect(() => embedding(ctx, idf, dy)).toThrow(/i32/);
    expect(() => embeddingBackward(ctx, ids, dy, 5)).toThrow(/\[3, 4\].*\[2\]/);
    release(ctx, ids, idf, w, dy);
  });
});
