import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { download, empty, poison, release, upload, uploadBytes, type DeviceTensor } from '../../tensor';
import { randn, relErr } from '../../testing';
import { matmulRef, roundTo } from './core.ref';
import { matmul, MATMUL_VARIANTS, type MatmulOptions, type MatmulTile, type MatmulVariant } from './matmul';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

let seed = 1000;
function input(shape: number[], dtype: DType = 'f32'): { t: DeviceTensor; v: Float64Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = roundTo(dtype, randn(n, seed++));
  return { t: upload(ctx, v, shape, dtype), v };
}

interface Case {
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  adt?: DType;
  bdt?: DType;
  batchA?: number[];
  batchB?: number[];
  bias?: boolean;
  accumulate?: boolean;
  alpha?: number;
  variant?: MatmulVariant;
  tile?: MatmulTile;
}

/** Run one product on fresh random inputs into a NaN-poisoned output; return the error against float64. */
async function check(c: Case): Promise<number> {
  const { M, N, K } = c;
  const ba = c.batchA ?? [];
  const bb = c.batchB ?? [];
  const A = input([...ba, ...(c.transA ? [K, M] : [M, K])], c.adt);
  const B = input([...bb, ...(c.transB ? [N, K] : [K, N])], c.bdt);
  const nA = ba.reduce((x, y) => x * y, 1);
  const nB = bb.reduce((x, y) => x * y, 1);
  const batchShape = ba.length >= bb.length ? (nA >= nB ? ba : bb) : nB >= nA ? bb : ba;
  const batch = Math.max(nA, nB);
  const bias = c.bias ? input([N]) : undefined;
  const out = empty(ctx, [...batchShape, M, N]);
  let c0: Float64Array | undefined;
  if (c.accumulate) {
    c0 = roundTo('f32', randn(batch * M * N, seed++));
    ctx.write(out.buffer, Float32Array.from(c0));
  } else poison(ctx, out);
  const opts: MatmulOptions = {
    transA: c.transA,
    transB: c.transB,
    bias: bias?.t,
    alpha: c.alpha,
    accumulate: c.accumulate,
    out,
    variant: c.variant,
    tile: c.tile,
  };
  const r = matmul(ctx, A.t, B.t, opts);
  expect(r).toBe(out);
  const got = await download(ctx, out);
  const want = matmulRef(A.v, B.v, {
    M,
    N,
    K,
    batch,
    sa: nA === 1 ? 0 : M * K,
    sb: nB === 1 ? 0 : K * N,
    transA: c.transA,
    transB: c.transB,
    alpha: c.alpha,
    bias: bias?.v,
    c0,
  });
  release(ctx, A.t, B.t, out, ...(bias ? [bias.t] : []));
  return relErr(got, want);
}

const variants = Object.keys(MATMUL_VARIANTS) as MatmulVariant[];

// Each tiled pipeline (variant x layout x dtypes x alignment flags) costs about a second of shader compilation
// on lavapipe, so the cases are grouped to share pipelines: every shape in a group has the same alignment
// (K, M or N a multiple of 4 or not), and together the groups cover M, N, K in {1, 7, 64, 65, 130} and others.
async function group(base: Omit<Case, 'M' | 'N' | 'K'>, shapes: [number, number, number][], tol = 1e-5): Promise<void> {
  for (const [M, N, K] of shapes) {
    const e = await check({ ...base, M, N, K });
    expect(e, `${JSON.stringify(base)} M=${M} N=${N} K=${K}`).toBeLessThan(tol);
  }
}

describe('matmul', () => {
  it.each(variants)('%s: NT with 16-byte loads and TN with scalar loads, at tile and non-tile sizes', async (variant) => {
    // K, N multiples of 4: vector loads of A and B rows and vector stores of C
    await group({ variant, transB: true }, [
      [65, 132, 64],
      [1, 4, 8],
      [130, 68, 132],
      [7, 64, 4],
    ]);
    // M, N not multiples of 4: element loads along m and n, element stores
    await group({ variant, transA: true }, [
      [65, 7, 130],
      [7, 65, 1],
      [130, 1, 65],
      [1, 130, 7],
    ]);
  });

  it('default variants: NN aligned, NN unaligned with accumulate, NT with bias (Linear), TN aligned', async () => {
    for (const variant of ['v4', 'v5'] as const) {
      await group({ variant }, [
        [70, 64, 32],
        [129, 136, 8],
        [64, 64, 64],
      ]);
      await group({ variant, accumulate: true, alpha: -0.5 }, [
        [65, 7, 130],
        [1, 65, 7],
        [130, 130, 65],
      ]);
      await group({ variant, transB: true, bias: true }, [
        [70, 68, 32],
        [1, 4, 132],
      ]);
      await group({ variant, transA: true }, [
        [64, 68, 7],
        [132, 4, 64],
      ]);
    }
  });

  it('f16 and bf16 B (and A), aligned and unaligned, NN and NT', async () => {
    await group({ variant: 'v4', transB: true, bdt: 'f16' }, [
      [65, 64, 64],
      [8, 24, 136],
      [1, 7, 8],
    ]);
    await group({ variant: 'v4', transB: true, bdt: 'bf16' }, [
      [33, 130, 65],
      [7, 1, 9],
    ]);
    await group({ variant: 'v4', bdt: 'bf16' }, [
      [33, 64, 65],
      [130, 8, 7],
    ]);
    await group({ variant: 'v4', bdt: 'f16' }, [
      [40, 70, 48],
      [3, 65, 130],
    ]);
    await group({ variant: 'v5', transA: true, adt: 'bf16', bdt: 'f16' }, [
      [40, 72, 48],
      [7, 8, 65],
    ]);
    // f16 subnormals, zeros and extremes decode exactly in the vector path
    const bits = Uint16Array.from([0x0001, 0x03ff, 0x0400, 0x8001, 0x7bff, 0xfbff, 0x0000, 0x8000]);
    const B = uploadBytes(ctx, bits, [8, 1], 'f16');
    const BT = uploadBytes(ctx, bits, [1, 8], 'f16');
    // rows of A pick single entries of B: 0x0001, 0x7bff, 0x8001
    const A = upload(ctx, [...[1, 0, 0, 0, 0, 0, 0, 0], ...[0, 0, 0, 0, 1, 0, 0, 0], ...[0, 0, 0, 1, 0, 0, 0, 0]], [3, 8]);
    const want = [2 ** -24, 65504, -(2 ** -24)];
    const y = matmul(ctx, A, BT, { transB: true, variant: 'v4' });
    expect(Array.from(await download(ctx, y))).toEqual(want);
    const z = matmul(ctx, A, B, { variant: 'v0' });
    expect(Array.from(await download(ctx, z))).toEqual(want);
    release(ctx, A, B, BT, y, z);
  });

  it('batched, with batch broadcast on either side', async () => {
    const cases: Case[] = [
      // shapes chosen to reuse the pipelines (alignment flags) of the groups above
      { M: 33, N: 20, K: 16, batchA: [3], batchB: [3] },
      { M: 33, N: 20, K: 16, batchA: [2, 3], batchB: [2, 3], transB: true },
      { M: 9, N: 72, K: 24, batchA: [4], batchB: [], transB: true }, // folds into one product
      { M: 9, N: 70, K: 24, batchA: [4], batchB: [1], transA: true }, // A^T: no fold, B reused
      { M: 12, N: 68, K: 20, batchA: [], batchB: [3] }, // A reused
      { M: 12, N: 68, K: 24, batchA: [1, 1], batchB: [2, 3], bdt: 'f16', transB: true },
    ];
    for (const v of ['v0', 'v4'] as const)
      for (const c of cases) {
        const e = await check({ ...c, variant: v });
        expect(e, `${v} ${JSON.stringify(c)}`).toBeLessThan(1e-5);
      }
  });

  it('the reference variant: bias, alpha and accumulate in every layout', async () => {
    for (const c of [
      { M: 70, N: 66, K: 33, bias: true },
      { M: 70, N: 64, K: 32, bias: true, transB: true, alpha: 0.5 },
      { M: 64, N: 65, K: 130, transA: true, accumulate: true },
      { M: 17, N: 40, K: 9, transB: true, bias: true, accumulate: true, alpha: -2, batchA: [2], batchB: [2] },
    ]) {
      const e = await check({ ...c, variant: 'v0' });
      expect(e, `v0 ${JSON.stringify(c)}`).toBeLessThan(1e-5);
    }
  });

  it('grouped workgroup order with a small custom tile covers partial bands', async () => {
    // 32x32 tiles in bands of 3 tile rows: M = 130 gives 5 tile rows (bands of 3 and 2)
    const tile = { bm: 32, bn: 32, bk: 8, tm: 4, tn: 4, gm: 3 };
    await group({ tile }, [
      [130, 100, 20],
      [97, 33, 8],
    ]);
    await group({ tile, transA: true, transB: true }, [[130, 65, 7]]);
    expect(() => matmul(ctx, empty(ctx, [4, 4]), empty(ctx, [4, 4]), { tile: { ...tile, tm: 3 } })).toThrow(/tile rules/);
  });

  it('sliced K (K groups per workgroup): K not a multiple of KS slices, epilogue, batch', async () => {
    // KS = 2 and 3 groups of 8x8-thread 32x32 tiles; K from 4 (groups past K add zeros) to 132 (ragged last step)
    const k2 = { bm: 32, bn: 32, bk: 8, tm: 4, tn: 4, ks: 2 };
    await group({ tile: k2, transB: true }, [
      [65, 36, 132],
      [33, 4, 8],
      [7, 68, 4],
    ]);
    const k3 = { ...k2, ks: 3, gm: 2 };
    await group({ tile: k3, transA: true, bias: true, accumulate: true, alpha: 0.5, batchA: [3], batchB: [3] }, [
      [33, 40, 24],
      [65, 12, 130],
    ]);
    expect(() => matmul(ctx, empty(ctx, [4, 4]), empty(ctx, [4, 4]), { tile: { ...k2, ks: 9 } })).toThrow(/tile rules/);
  });

  it('large K stays within 1e-4 of float64', async () => {
    for (const v of ['v0', 'v4'] as const) {
      const e = await check({ M: 20, N: 36, K: 4100, transB: true, variant: v });
      expect(e).toBeLessThan(1e-4);
    }
  });

  it('auto picks a variant and matches', async () => {
    expect(await check({ M: 130, N: 65, K: 64 })).toBeLessThan(1e-5);
  });

  it('rejects mismatched shapes with the shapes in the message', () => {
    const a = empty(ctx, [4, 5]);
    const b = empty(ctx, [6, 7]);
    expect(() => matmul(ctx, a, b)).toThrow(ShapeError);
    expect(() => matmul(ctx, a, b)).toThrow(/\[4, 5\].*\[6, 7\]/);
    expect(() => matmul(ctx, a, empty(ctx, [5, 7]), { accumulate: true })).toThrow(/accumulate/);
    expect(() => matmul(ctx, empty(ctx, [2, 4, 5]), empty(ctx, [3, 5, 7]))).toThrow(/batch/);
  });
});
