// Storage-buffer slices in ctx.dispatch, kernelKey's code hash, and the LLM kernels that split tensors larger
// than one storage binding, at this device's real limit (lavapipe: 128 MiB; a 164 MB embedding table and
// 157 MB of logits). Big outputs are checked on sampled rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GpuBuffer } from './buffer-pool';
import { createContext, type Context } from './context';
import { DeviceError } from './errors';
import { kernelKey, type KernelDef } from './kernel';
import { crossEntropy } from './ops/llm/cross-entropy';
import { embedding, embeddingBackward } from './ops/llm/embedding';
import { empty, poison, release, upload, type DeviceTensor } from './tensor';
import { relErr } from './testing';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** y[i] = x[i] * 2 + i over the bound ranges (n = elements of the y binding). */
const affine: KernelDef = {
  name: 'test_affine',
  code: `@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < arrayLength(&y)) { y[g.x] = x[g.x] * 2.0 + f32(g.x); }
}`,
  bindings: [
    { name: 'x', access: 'read', dtype: 'f32' },
    { name: 'y', access: 'rw', dtype: 'f32' },
  ],
};

async function readF32(buf: GpuBuffer, bytes = buf.size, offset = 0): Promise<Float32Array> {
  return new Float32Array(await ctx.read(buf, bytes, offset));
}

describe('ctx.dispatch with buffer slices', () => {
  it('binds byte ranges; each (buffer, offset, size) gets its own bind group', async () => {
    const a = ctx.bindingAlignment;
    const n = 3 * a; // elements; x holds 4n
    const xs = Float32Array.from({ length: 4 * n }, (_, i) => i * 0.5 - 7);
    const x = upload(ctx, xs, [4 * n]);
    const y = empty(ctx, [4 * n]);
    poison(ctx, y);
    const k = ctx.kernel(affine);
    const wg = Math.ceil(n / 64);
    // same buffers, three different slices (a cache keyed on the buffer alone would reuse the first)
    const cases = [
      { xo: 0, yo: 0, len: n },
      { xo: a * 4, yo: n * 4, len: n - 5 },
      { xo: 2 * a * 4, yo: 3 * n * 4, len: a },
    ];
    for (const c of cases)
      ctx.dispatch(k, [{ buffer: x.buffer, offset: c.xo, size: c.len * 4 }, { buffer: y.buffer, offset: c.yo, size: c.len * 4 }], wg);
    ctx.dispatch(k, [{ buffer: x.buffer, offset: 0, size: n * 4 }, { buffer: y.buffer, offset: 0, size: n * 4 }], wg); // cached again
    const got = await readF32(y.buffer, 16 * n);
    const want = new Float32Array(4 * n).fill(NaN);
    for (const c of cases)
      for (let i = 0; i < c.len; i++) want[c.yo / 4 + i] = Math.fround(xs[c.xo / 4 + i]! * 2 + i);
    expect(Array.from(got)).toEqual(Array.from(want));
    // whole buffers still bind as before
    ctx.dispatch(k, [x.buffer, y.buffer], Math.ceil(y.buffer.size / 4 / 64));
    const whole = await readF32(y.buffer, 16 * n);
    expect(whole[17]).toBe(Math.fround(xs[17]! * 2 + 17));
    release(ctx, x, y);
  });

  it('rejects misaligned, oversized and out-of-range slices with a clear error', () => {
    const a = ctx.bindingAlignment;
    const x = empty(ctx, [4 * a]);
    const y = empty(ctx, [4 * a]);
    const k = ctx.kernel(affine);
    const run = (off: number, size: number) => () => ctx.dispatch(k, [{ buffer: x.buffer, offset: off, size }, y.buffer], 1);
    expect(run(a / 2, 64)).toThrow(DeviceError);
    expect(run(a / 2, 64)).toThrow(
      new RegExp(`binding 1 \\(buffer 0\\) slice at byte offset ${a / 2}, size 64: .*minStorageBufferOffsetAlignment \\(${a}\\)`),
    );
    expect(run(4, 64)).toThrow(/minStorageBufferOffsetAlignment/);
    expect(run(-a, 64)).toThrow(/minStorageBufferOffsetAlignment/);
    expect(run(a, 6)).toThrow(/positive multiple of 4/);
    expect(run(a, 0)).toThrow(/positive multiple of 4/);
    expect(run(0, x.buffer.size + 4)).toThrow(/binding limit|past the/);
    expect(run(a, x.buffer.size)).toThrow(/ends past the \d+-byte buffer/);
    const big = { id: x.buffer.id, gpu: x.buffer.gpu, size: ctx.maxBinding + 1024, released: false };
    expect(() => ctx.dispatch(k, [{ buffer: big, offset: 0, size: ctx.maxBinding + 4 }, y.buffer], 1)).toThrow(
      /over the storage binding limit/,
    );
    ctx.dispatch(k, [{ buffer: x.buffer, offset: a, size: 64 }, y.buffer], 1); // a valid one still works
    release(ctx, y);
    expect(() => ctx.dispatch(k, [x.buffer, { buffer: y.buffer, offset: 0, size: 64 }], 1)).toThrow(/already released/);
    release(ctx, x);
  });
});

describe('kernelKey', () => {
  it('hashes the code: same name, different WGSL -> different pipelines', async () => {
    const def = (c: number): KernelDef => ({
      name: 'test_same_name',
      code: `@compute @workgroup_size(1) fn main() { y[0] = ${c}.0; }`,
      bindings: [{ name: 'y', access: 'rw', dtype: 'f32' }],
    });
    expect(kernelKey(def(1))).not.toBe(kernelKey(def(2)));
    expect(kernelKey(def(1))).toBe(kernelKey(def(1)));
    const y = empty(ctx, [2]);
    ctx.dispatch(ctx.kernel(def(1)), [y.buffer], 1);
    const a = (await readF32(y.buffer, 4))[0];
    ctx.dispatch(ctx.kernel(def(2)), [y.buffer], 1);
    const b = (await readF32(y.buffer, 4))[0];
    expect([a, b]).toEqual([1, 2]);
    release(ctx, y);
  });
});

// ---- kernels over tensors larger than one storage binding (the device's own limit) ----

/** Deterministic f32 test values without a 40M-element random generator: a hash of the index in [-1, 1). */
function val(i: number): number {
  let h = Math.imul(i ^ 0x9e3779b9, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return Math.fround(((h >>> 8) / 8388608) - 1);
}

function bigF32(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = val(i + seed);
  return a;
}

async function rowsOf(t: DeviceTensor, rowLen: number, rows: number[]): Promise<Float64Array[]> {
  const out: Float64Array[] = [];
  for (const r of rows) out.push(Float64Array.from(await readF32(t.buffer, rowLen * 4, r * rowLen * 4)));
  return out;
}

describe('LLM kernels past the storage binding limit', () => {
  it('embedding forward and backward over a [40000, 1024] f32 table (164 MB)', async () => {
    const vocab = 40000;
    const d = 1024;
    expect(vocab * d * 4).toBeGreaterThan(ctx.maxBinding);
    const chunkRows = Math.floor(ctx.maxBinding / (d * 4)); // 32768 on lavapipe
    const w = empty(ctx, [vocab, d]);
    ctx.write(w.buffer, bigF32(vocab * d, 0));
    const idList = [0, chunkRows - 1, chunkRows, vocab - 1, 5, chunkRows, -1, vocab, 12345, chunkRows + 77, 5];
    const ids = upload(ctx, idList, [idList.length], 'i32');
    const out = empty(ctx, [idList.length, d]);
    poison(ctx, out);
    embedding(ctx, ids, w, { out });
    const got = await readF32(out.buffer, idList.length * d * 4);
    for (let n = 0; n < idList.length; n++) {
      const id = idList[n]!;
      const want = Float64Array.from({ length: d }, (_, c) => (id >= 0 && id < vocab ? val(id * d + c) : 0));
      expect(relErr(got.subarray(n * d, (n + 1) * d), want), `row for id ${id}`).toBe(0);
    }

    // backward: dw [vocab, d] is 164 MB too; check the rows that ids hit, their neighbours and chunk edges
    const dyData = bigF32(idList.length * d, 77);
    const dy = upload(ctx, dyData, [idList.length, d]);
    const dw = empty(ctx, [vocab, d]);
    poison(ctx, dw);
    embeddingBackward(ctx, ids, dy, vocab, { out: dw });
    const check = [0, 1, 4, 5, 6, chunkRows - 2, chunkRows - 1, chunkRows, chunkRows + 1, 12345, chunkRows + 77, vocab - 1];
    const rows = await rowsOf(dw, d, check);
    check.forEach((v, i) => {
      const want = new Float64Array(d);
      idList.forEach((id, n) => {
        if (id === v) for (let c = 0; c < d; c++) want[c] = Math.fround(want[c]! + dyData[n * d + c]!); // f32 sums in order
      });
      expect(relErr(rows[i]!, want), `dw row ${v}`).toBe(0);
    });
    release(ctx, w, ids, out, dy, dw);
  });

  it('cross-entropy over [264, 131072] f32 logits (138 MB) and their gradient', async () => {
    const n = 264;
    const v = 131072;
    expect(n * v * 4).toBeGreaterThan(ctx.maxBinding);
    const logits = empty(ctx, [n, v]);
    const x = bigF32(n * v, 5);
    for (let i = 0; i < x.length; i++) x[i] = x[i]! * 4;
    ctx.write(logits.buffer, x);
    const tg = Array.from({ length: n }, (_, r) => (r % 7 === 3 ? -100 : (r * 7919) % v));
    const targets = upload(ctx, tg, [n], 'i32');
    const dl = empty(ctx, [n, v]);
    poison(ctx, dl);
    const res = crossEntropy(ctx, logits, targets, { dlogitsOut: dl, labelSmoothing: 0.1 });
    // float64 reference of every row loss (cheap), dlogits on sampled rows
    const eps = 0.1;
    const count = tg.filter((t) => t !== -100).length;
    const rowRef = new Float64Array(n);
    const lseOf = new Float64Array(n);
    for (let r = 0; r < n; r++) {
      let m = -Infinity;
      let sx = 0;
      for (let j = 0; j < v; j++) {
        m = Math.max(m, x[r * v + j]!);
        sx += x[r * v + j]!;
      }
      let s = 0;
      for (let j = 0; j < v; j++) s += Math.exp(x[r * v + j]! - m);
      const lse = m + Math.log(s);
      lseOf[r] = lse;
      if (tg[r] !== -100) rowRef[r] = (1 - eps) * (lse - x[r * v + tg[r]!]!) + eps * (lse - sx / v);
    }
    const lossRef = rowRef.reduce((a, b) => a + b, 0) / count;
    const rowGot = Float64Array.from(await readF32(res.rowLoss.buffer, n * 4));
    expect(relErr(rowGot, rowRef)).toBeLessThan(1e-5);
    const lossGot = (await readF32(res.loss.buffer, 4))[0]!;
    expect(Math.abs(lossGot - lossRef) / lossRef).toBeLessThan(1e-5);
    const chunkRows = Math.floor(ctx.maxBinding / (v * 4));
    const sample = [0, 3, chunkRows - 1, chunkRows, chunkRows + 1, n - 1];
    const got = await rowsOf(dl, v, sample);
    sample.forEach((r, i) => {
      const want = new Float64Array(v);
      if (tg[r] !== -100)
        for (let j = 0; j < v; j++)
          want[j] = (Math.exp(x[r * v + j]! - lseOf[r]!) - eps / v - (j === tg[r] ? 1 - eps : 0)) / count;
      expect(relErr(got[i]!, want), `dlogits row ${r}`).toBeLessThan(1e-4);
    });
    release(ctx, logits, targets, dl, res.rowLoss, res.loss, res.count);
  });
});
