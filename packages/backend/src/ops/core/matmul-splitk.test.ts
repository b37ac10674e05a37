import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { randn, relErr } from '../../testing';
import { download, poison, upload } from '../../tensor';
import { matmul } from './matmul';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('split-K matmul (TN, the weight-gradient shape)', () => {
  it('matches the float64 reference and the unsplit kernel, into a poisoned out', async () => {
    const [K, M, N] = [96, 13, 10];
    const a = randn(K * M, 21);
    const b = randn(K * N, 22);
    const ref = new Float64Array(M * N);
    for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) for (let k = 0; k < K; k++) ref[i * N + j]! += a[k * M + i]! * b[k * N + j]!;
    const A = upload(ctx, a, [K, M]);
    const B = upload(ctx, b, [K, N]);
    for (const s of [1, 4, 6]) {
      const out = upload(ctx, new Float32Array(M * N), [M, N]);
      poison(ctx, out);
      matmul(ctx, A, B, { transA: true, splitK: s, out, alpha: 0.5 });
      expect(relErr(await download(ctx, out), ref.map((x) => 0.5 * x)), `splitK ${s}`).toBeLessThan(1e-5);
    }
    expect(() => matmul(ctx, A, B, { transA: true, splitK: 5 })).toThrow(/divisor/);
    expect(() => matmul(ctx, A, B, { splitK: 2 })).toThrow();
  });
});
