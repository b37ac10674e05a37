import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { randn } from '../../testing';
import { gradNorm } from './grad-norm';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

async function readRes(t: DeviceTensor): Promise<[number, number]> {
  const r = await download(ctx, t);
  return [r[0]!, r[1]!];
}

describe('gradNorm', () => {
  it('matches the float64 global L2 norm over several tensors (odd sizes, f16/bf16, >1024 workgroups)', async () => {
    const specs: [number, number, DType][] = [
      [1, 3, 'f32'],
      [7, 0.1, 'f32'],
      [1000, 1, 'f16'],
      [4097, 2, 'bf16'],
      [2_200_003, 0.01, 'f32'], // more than 1024 * 2048 elements: the per-tensor workgroup cap
      [0, 1, 'f32'],
    ];
    const grads: DeviceTensor[] = [];
    let sumsq = 0;
    specs.forEach(([n, scale, dt], i) => {
      const g = upload(ctx, randn(n, 90 + i, scale), [n], dt);
      grads.push(g);
    });
    for (const g of grads) for (const x of await download(ctx, g)) sumsq += x * x; // exact stored values
    const norm = Math.sqrt(sumsq);
    const out = empty(ctx, [2]);
    for (const [maxNorm, want] of [
      [norm / 3, norm / 3 / (norm + 1e-6)],
      [norm * 10, 1],
      [Infinity, 1],
    ]) {
      poison(ctx, out);
      gradNorm(ctx, grads, { maxNorm, out });
      const [coef, got] = await readRes(out);
      expect(Math.abs(got - norm) / norm).toBeLessThan(1e-5);
      expect(Math.abs(coef - want!) / want!).toBeLessThan(1e-5);
    }
    // deterministic: bit-identical on a repeat
    const a = gradNorm(ctx, grads, { maxNorm: 1 });
    const b = gradNorm(ctx, grads, { maxNorm: 1 });
    expect(new Uint32Array(await ctx.read(a.buffer, 8))).toEqual(new Uint32Array(await ctx.read(b.buffer, 8)));
    release(ctx, out, a, b, ...grads);
  });

  it('propagates inf (coefficient 0) and NaN (coefficient NaN); an empty list gives norm 0', async () => {
    const g1 = upload(ctx, [1, 2, 3], [3]);
    const g2 = upload(ctx, [1, Infinity, 3], [3]);
    const g3 = upload(ctx, [1, NaN, 3], [3]);
    const [c1, n1] = await readRes(gradNorm(ctx, [g1, g2], { maxNorm: 1 }));
    expect(n1).toBe(Infinity);
    expect(c1).toBe(0);
    const [c2, n2] = await readRes(gradNorm(ctx, [g1, g3], { maxNorm: 1 }));
    expect(n2).toBeNaN();
    expect(c2).toBeNaN();
    const [c3, n3] = await readRes(gradNorm(ctx, [], { maxNorm: 1 }));
    expect([c3, n3]).toEqual([1, 0]);
    expect(() => gradNorm(ctx, [g1], { maxNorm: 0 })).toThrow(ConfigError);
    expect(() => gradNorm(ctx, [upload(ctx, [1], [1], 'i32')])).toThrow(ShapeError);
    expect(() => gradNorm(ctx, [g1], { out: upload(ctx, [1], [1]) })).toThrow(ShapeError);
    release(ctx, g1, g2, g3);
  });

  it('reads the pieces of an arena in one dispatch, bit-identical to the same data as tensors', async () => {
    // pieces of 5000 (3 workgroups), 17 and 70001 (35 workgroups) elements at 64-element offsets of one arena,
    // listed out of arena order and around a separate tensor
    const sizes = [5000, 17, 70001];
    const offsets = [0, 5056, 5120];
    const arena = upload(ctx, randn(offsets[2]! + sizes[2]!, 21), [offsets[2]! + sizes[2]!]);
    const alone = upload(ctx, randn(999, 22), [999]);
    const tensors = sizes.map((n, i) => upload(ctx, randn(offsets[2]! + sizes[2]!, 21).subarray(offsets[i]!, offsets[i]! + n), [n]));
    const piece = (i: number) => ({ arena, offset: offsets[i]!, length: sizes[i]! });
    const d0 = ctx.stats.dispatches;
    const a = gradNorm(ctx, [piece(2), alone, piece(0), piece(1)], { maxNorm: 1 });
    expect(ctx.stats.dispatches - d0).toBe(3); // the arena's pieces, the tensor, the final sum
    const b = gradNorm(ctx, [tensors[2]!, alone, tensors[0]!, tensors[1]!], { maxNorm: 1 });
    const [ra, rb] = [await download(ctx, a), await download(ctx, b)];
    expect(new Uint32Array(ra.buffer)).toEqual(new Uint32Array(rb.buffer));
    expect(() => gradNorm(ctx, [{ arena, offset: offsets[2]! + 1, length: sizes[2]! }])).toThrow(ShapeError);
    release(ctx, arena, alone, a, b, ...tensors);
  });
});
