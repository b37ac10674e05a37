import { createContext, testing, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autocast, crossEntropy, linear, noGrad, Tensor } from '../index';
import { randn } from '../random';
import { chunkRowsFor, linearCrossEntropy } from './linear-cross-entropy';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

// float64 reference of mean cross-entropy of x W^T (ignored targets skipped) and its gradients
function reference(x: Float32Array, w: Float32Array, t: number[], n: number, h: number, v: number) {
  const dx = new Float64Array(n * h);
  const dw = new Float64Array(v * h);
  const cnt = t.filter((y) => y !== -100).length;
  let loss = 0;
  for (let r = 0; r < n; r++) {
    if (t[r] === -100) continue;
    const z = Array.from({ length: v }, (_, j) => {
      let s = 0;
      for (let k = 0; k < h; k++) s += x[r * h + k]! * w[j * h + k]!;
      return s;
    });
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((a, zz) => a + Math.exp(zz - m), 0));
    loss += (lse - z[t[r]!]!) / cnt;
    for (let j = 0; j < v; j++) {
      const d = (Math.exp(z[j]! - lse) - (j === t[r] ? 1 : 0)) / cnt;
      for (let k = 0; k < h; k++) {
        dx[r * h + k]! += d * w[j * h + k]!;
        dw[j * h + k]! += d * x[r * h + k]!;
      }
    }
  }
  return { loss, dx, dw };
}

describe('linearCrossEntropy (chunked LM head + loss)', () => {
  it('chunks hold at most 32 MiB of f32 logits, whole 64-row tiles where that allows', () => {
    for (const [v, rows] of [[32000, 256], [128256, 64], [151936, 55], [2 ** 23, 1], [700, 11968]] as const) {
      expect(chunkRowsFor(v), String(v)).toBe(rows);
      expect(chunkRowsFor(v) * v * 4).toBeLessThanOrEqual(32 * 2 ** 20);
    }
  });

  it.each([3, 4, 100])('matches float64 in loss and both gradients, chunks of %i rows, ignored targets, upstream gradient', async (chunkRows) => {
    const [N, H, V] = [11, 10, 37];
    const xv = randn(N * H, 1);
    const wv = randn(V * H, 2, 0.5);
    const tv = Array.from({ length: N }, (_, i) => (i % 4 === 3 ? -100 : (i * 7 + 3) % V));
    const x = Tensor.fromArray(ctx, xv, [N, H], { requiresGrad: true });
    const w = Tensor.fromArray(ctx, wv, [V, H], { requiresGrad: true });
    const t = Tensor.fromArray(ctx, tv, [N], { dtype: 'i32' });
    const loss = linearCrossEntropy(x, w, t, { chunkRows });
    loss.backward(Tensor.fromArray(ctx, [2.5], [1]));
    const ref = reference(xv, wv, tv, N, H, V);
    expect(Math.abs((await loss.item()) - ref.loss) / ref.loss).toBeLessThan(1e-5);
    expect(testing.relErr(await x.grad!.toArray(), ref.dx.map((d) => 2.5 * d))).toBeLessThan(1e-5);
    expect(testing.relErr(await w.grad!.toArray(), ref.dw.map((d) => 2.5 * d))).toBeLessThan(1e-5);
    for (const a of [x, w, t, loss]) a.dispose();
  });

  it('under f16 autocast: the same as linear(compute f16) + crossEntropy, chunked; without grad only the loss', async () => {
    const [N, H, V] = [9, 16, 45];
    const x = Tensor.fromArray(ctx, randn(N * H, 3), [N, H], { requiresGrad: true });
    const w = Tensor.fromArray(ctx, randn(V * H, 4, 0.3), [V, H], { dtype: 'f16' });
    const t = Tensor.fromArray(ctx, Array.from({ length: N }, (_, i) => (i * 5) % V), [N], { dtype: 'i32' });
    const want = crossEntropy(linear(x, w, null, { compute: 'f16' }), t);
    want.backward();
    const dxWant = await x.grad!.toArray();
    x.zeroGrad();
    const got = autocast('f16', () => linearCrossEntropy(x, w, t, { chunkRows: 2 }));
    got.backward();
    expect(Math.abs((await got.item()) - (await want.item())) / (await want.item())).toBeLessThan(1e-6);
    expect(testing.relErr(await x.grad!.toArray(), dxWant)).toBeLessThan(1e-5);
    const plain = noGrad(() => linearCrossEntropy(x, w, t));
    const f32 = crossEntropy(linear(x, w, null), t);
    expect(Math.abs((await plain.item()) - (await f32.item())) / (await f32.item())).toBeLessThan(1e-6);
    for (const a of [x, w, t, want, got, plain, f32]) a.dispose();
  });

  it('refuses shapes that do not fit, naming them', () => {
    const x = Tensor.zeros(ctx, [4, 6]);
    const w = Tensor.zeros(ctx, [9, 5]);
    const t = Tensor.fromArray(ctx, [0, 1, 2, 3], [4], { dtype: 'i32' });
    expect(() => linearCrossEntropy(x, w, t)).toThrow(/x \[4, 6\] and weight \[9, 5\]/);
    for (const a of [x, w, t]) a.dispose();
  });
});
