// The fused dequantize + tensor-core kernel: its scalar reference (the same staging, decoding, tiling and
// epilogue, sums without subgroup matrices) on this adapter against float64 of the f16-rounded operands; the
// subgroup-matrix form runs the same list on the GPU machine (`qtc-bench --checks`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { ShapeError } from '../../errors';
import { download, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { quantSpec } from './formats';
import { quantLinear } from './qmatmul';
import { planQtc, QTC_TILES, quantLinearTc, qtcChoice, qtcSplit, qtcTileProblem, qtcTuning, quantRowsOnTensorCores, type QtcTile, type QtcTileName } from './qmatmul-tc';
import { QTC_TOL, qtcCaseName, runQtcCase, type QtcCase } from './qmatmul-tc.cases';
import { quantize, releaseQuant } from './quantize';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const specs = [quantSpec('int8', 0), quantSpec('int8', 32), quantSpec('int4', 32), quantSpec('int4', 128), quantSpec('nf4', 64), quantSpec('nf4', 32, true)];
const cases: QtcCase[] = [
  ...specs.flatMap((w): QtcCase[] => [
    { w, M: 5, N: 70, K: 256 },
    { w, M: 17, N: 65, K: 203, bias: true },
    { w, M: 2, N: 33, K: 100, x: 'f16' },
  ]),
  { w: quantSpec('int4', 64), M: 3, N: 40, K: 96, x: 'bf16' },
  { w: quantSpec('int4', 64), M: 3, N: 40, K: 203, x: 'bf16' },
  { w: quantSpec('nf4', 64), M: 9, N: 40, K: 203, x: 'f16', bias: true },
  ...(Object.keys(QTC_TILES) as QtcTileName[]).map((tile): QtcCase => ({ w: quantSpec('int4', 64), M: 20, N: 150, K: 320, tile, bias: true })),
  { w: quantSpec('int4', 64), M: 6, N: 70, K: 650, tile: 'm1n64k64', split: 3, bias: true },
  { w: quantSpec('int8', 0), M: 3, N: 20, K: 510, tile: 'm1n64k64', split: 8 },
  // X beyond f16's range (f32 and bf16 X): rows scaled by powers of two in a second pass (the bf16 case's large
  // values arrive in a later step than its first)
  { w: quantSpec('int4', 64), M: 5, N: 70, K: 256, big: 1e6, tile: 'm1n64k64', bias: true },
  { w: quantSpec('nf4', 64), M: 20, N: 40, K: 403, big: 3e5, x: 'bf16', tile: 'm2n64k128' },
  { w: quantSpec('int8', 32), M: 6, N: 70, K: 650, big: 1e6, tile: 'm1n64k64', split: 3 },
  { w: quantSpec('int4', 32), M: 3, N: 40, K: 96, big: 1e30 },
  // f16's edge: its largest value (no second pass), the first value that rounds to infinity, and one near f32's top
  { w: quantSpec('int4', 32), M: 3, N: 40, K: 96, xSet: [[5, 65504], [96 + 7, -65520], [2 * 96 + 9, 1e37]] },
];

describe('dequant-matmul-tc (scalar reference)', () => {
  for (const c of cases)
    it(qtcCaseName(c), async () => {
      // a tile beyond this adapter's workgroup memory is refused with the reason, before anything runs
      const why = c.tile && qtcTileProblem(QTC_TILES[c.tile], { SM: 16, SN: 16, SK: 16, SG: 32 }, ctx.info.limits, true);
      if (why) return void (await expect(runQtcCase(ctx, c, true)).rejects.toThrow(/bytes of workgroup memory exceed/));
      const { err, kernel } = await runQtcCase(ctx, c, true);
      expect(kernel).toMatch(/^dequant-matmul-tc-scalar-/);
      expect(err).toBeLessThan(QTC_TOL);
    });
});

describe('dequant-matmul-tc (scalar reference): infinities and NaN in X', () => {
  it('reach the results of their row only; the other rows of the tile are as without them', async () => {
    const [M, N, K] = [4, 40, 96];
    const w = upload(ctx, randn(N * K, 1), [N, K]);
    const q = quantize(ctx, w, quantSpec('int4', 32));
    const xv = Float32Array.from(randn(M * K, 2));
    const run = async (v: Float32Array) => {
      const x = upload(ctx, v, [M, K]);
      const y = upload(ctx, new Float32Array(M * N).fill(Number.NaN), [M, N]);
      expect(quantLinearTc(ctx, x, q, undefined, y, M, { scalar: true })).toBe(true);
      const out = await download(ctx, y);
      release(ctx, x, y);
      return out;
    };
    const clean = await run(xv);
    const bad = xv.slice();
    bad[1 * K + 5] = Number.POSITIVE_INFINITY;
    bad[2 * K + 70] = Number.NaN;
    const got = await run(bad);
    for (let m = 0; m < M; m++) {
      const row = Array.from(got.subarray(m * N, (m + 1) * N));
      if (m === 1 || m === 2) expect(row.every((v) => !Number.isFinite(v))).toBe(true);
      else expect(row).toEqual(Array.from(clean.subarray(m * N, (m + 1) * N)));
    }
    release(ctx, w);
    releaseQuant(ctx, q);
  });
});

describe('dequant-matmul-tc planning', () => {
  it('refuses tiles that do not fit the fragment or the device, with the reason', () => {
    const f = { SM: 16, SN: 16, SK: 16, SG: 32 };
    const lim = { maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupStorageSize: 49152 };
    expect(qtcTileProblem(QTC_TILES.m1n64k128, f, lim)).toBeNull();
    expect(qtcTileProblem({ ...QTC_TILES.m1n64k128, nsg: 6 }, f, lim)).toMatch(/NSG 6 is not a multiple of NSN 4/);
    expect(qtcTileProblem({ ...QTC_TILES.m1n64k128, bk: 48 }, f, lim)).toMatch(/BK 48 is not a multiple of 32/);
    expect(qtcTileProblem({ mt: 1, nsn: 2, fns: 1, nsg: 8, bk: 32 }, f, lim)).toMatch(/K groups/);
    expect(qtcTileProblem({ ...QTC_TILES.m1n64k128, nsg: 16 }, f, lim)).toMatch(/512 threads/);
    expect(qtcTileProblem({ mt: 4, nsn: 4, fns: 4, nsg: 8, bk: 256 }, f, lim)).toMatch(/bytes of workgroup memory/);
  });

  it('splits K into whole steps, at most as many as asked', () => {
    const t = QTC_TILES.m1n64k128;
    expect(qtcSplit(t, 64, 4096, 1)).toEqual({ S: 1, kc: 4096 });
    expect(qtcSplit(t, 64, 4096, 5)).toEqual({ S: 5, kc: 896 });
    expect(qtcSplit(t, 64, 4000, 3)).toEqual({ S: 3, kc: 1408 });
    expect(qtcSplit(t, 64, 200, 8)).toEqual({ S: 2, kc: 128 });
    expect(qtcSplit(t, 64, 4096, undefined, 264)).toEqual({ S: 5, kc: 896 });
    expect(qtcSplit(t, 300, 4096, undefined, 264)).toEqual({ S: 1, kc: 4096 });
    expect(qtcSplit(t, 8, 512, undefined, 264)).toEqual({ S: 2, kc: 256 }); // at least two steps per split
  });

  it('auto takes the first matching rule; tile and splitTarget force one', () => {
    expect(qtcChoice(16, 14336, 4096)).toEqual({ tile: QTC_TILES.m1n64k64, target: 0 });
    expect(qtcChoice(5, 4096, 14336)).toEqual({ tile: QTC_TILES.m1n64k64, target: 792 });
    expect(qtcChoice(16, 4096, 4096)).toEqual({ tile: QTC_TILES.m1n32k256, target: 0 });
    expect(qtcChoice(17, 4096, 4096)).toEqual({ tile: QTC_TILES.m2n32k256g4, target: 0 });
    expect(qtcChoice(32, 2048, 5632)).toEqual({ tile: QTC_TILES.m1n64k64, target: 264 });
    expect(qtcChoice(33, 4096, 4096)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    expect(qtcChoice(64, 2048, 5632)).toEqual({ tile: QTC_TILES.m1n64k64, target: 264 });
    expect(qtcChoice(64, 2048, 2048)).toEqual({ tile: QTC_TILES.m2n32k256g4, target: 0 });
    expect(qtcChoice(48, 4096, 14336)).toEqual({ tile: QTC_TILES.m1n64k64, target: 264 });
    expect(qtcChoice(49, 4096, 14336)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    expect(qtcChoice(32, 14336, 4096)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    expect(qtcChoice(48, 14336, 4096)).toEqual({ tile: QTC_TILES.m1n64k64, target: 0 });
    expect(qtcChoice(49, 5632, 2048)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    expect(qtcChoice(65, 2048, 2048)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    expect(qtcChoice(32, 5632, 2048)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
    try {
      // a rule whose tile does not fit the device is passed over; none fitting: null
      expect(qtcChoice(17, 4096, 4096, (t) => t !== QTC_TILES.m2n32k256g4)).toEqual({ tile: QTC_TILES.m2n64k128, target: 0 });
      expect(qtcChoice(17, 4096, 4096, () => false)).toBeNull();
      qtcTuning.tile = 'm1n128k64';
      expect(qtcChoice(5, 4096, 14336)).toEqual({ tile: QTC_TILES.m1n128k64, target: 0 });
      qtcTuning.splitTarget = 100;
      expect(qtcChoice(5, 4096, 14336)).toEqual({ tile: QTC_TILES.m1n128k64, target: 100 });
    } finally {
      qtcTuning.tile = undefined;
      qtcTuning.splitTarget = undefined;
    }
  });

  it('quantLinear takes the tensor-core kernel for qtcTuning\'s rows where the adapter has f16 subgroup matrices', () => {
    const info = (over: object) => ({
      info: {
        isSoftware: false,
        features: { subgroupMatrix: true, shaderF16: true },
        subgroupMatrixConfigs: [{ M: 16, N: 16, K: 16, componentType: 'f16', resultComponentType: 'f32' }],
        subgroupSizes: { min: 32, max: 32 },
        wgslFeatures: [],
        ...over,
      },
    }) as unknown as Pick<Context, 'info'>;
    const gpu = info({});
    expect([4, 5, 16, 256, 257].map((M) => quantRowsOnTensorCores(gpu, M))).toEqual([false, true, true, true, false]);
    expect(quantRowsOnTensorCores(info({ isSoftware: true }), 16)).toBe(false);
    expect(quantRowsOnTensorCores(info({ subgroupMatrixConfigs: [] }), 16)).toBe(false);
    expect(quantRowsOnTensorCores(info({ subgroupSizes: { min: 16, max: 32 } }), 16)).toBe(false);
    expect(quantRowsOnTensorCores(ctx, 16)).toBe(!!ctx.info.features.subgroupMatrix && !ctx.info.isSoftware);
  });

  it("a tile auto chose that does not fit the device plans nothing (the other kernels run); one asked for throws", () => {
    const w = upload(ctx, randn(64 * 64, 1), [64, 64]);
    const q = quantize(ctx, w, quantSpec('int4', 64));
    const x = upload(ctx, randn(8 * 64, 2), [8, 64]);
    const y = upload(ctx, randn(8 * 64, 3), [8, 64]);
    const big = { mt: 4, nsn: 4, fns: 4, nsg: 8, bk: 256 }; // 2 * (64 + 256) * 264 bytes of staging
    const rules = qtcTuning.rules;
    expect(qtcTileProblem(big, { SM: 16, SN: 16, SK: 16, SG: 32 }, ctx.info.limits, true)).toMatch(/bytes of workgroup memory/);
    try {
      (QTC_TILES as Record<string, QtcTile>).tooBig = big;
      qtcTuning.tile = 'tooBig' as QtcTileName;
      expect(planQtc(ctx, x, q, undefined, y, 8, { scalar: true })).toBeNull();
      expect(() => planQtc(ctx, x, q, undefined, y, 8, { scalar: true, tile: big })).toThrow(ShapeError);
      qtcTuning.tile = undefined;
      expect(planQtc(ctx, x, q, undefined, y, 8, { scalar: true })).not.toBeNull();
      // a rule whose tile does not fit is passed over for the next matching one
      qtcTuning.rules = [{ tile: 'tooBig' as QtcTileName, target: 0 }, { tile: 'm1n64k64', target: 0 }];
      expect(planQtc(ctx, x, q, undefined, y, 8, { scalar: true })?.name).toMatch(/-m1n4x1g4k64$/);
      qtcTuning.rules = [{ tile: 'tooBig' as QtcTileName, target: 0 }];
      expect(planQtc(ctx, x, q, undefined, y, 8, { scalar: true })).toBeNull();
    } finally {
      qtcTuning.rules = rules;
      qtcTuning.tile = undefined;
      delete (QTC_TILES as Record<string, QtcTile>).tooBig;
    }
    release(ctx, w, x, y);
    releaseQuant(ctx, q);
  });

  it("variant 'tc' without f16 subgroup matrices is a ShapeError; auto runs another kernel", async () => {
    if (ctx.info.features.subgroupMatrix) return; // the GPU machine runs the tensor-core list instead
    const w = upload(ctx, randn(64 * 64, 1), [64, 64]);
    const q = quantize(ctx, w, quantSpec('int4', 64));
    const x = upload(ctx, randn(8 * 64, 2), [8, 64]);
    expect(() => quantLinear(ctx, x, q, { variant: 'tc' })).toThrow(ShapeError);
    expect(() => quantLinear(ctx, x, q, { variant: 'tc' })).toThrow(/no f16 tensor cores here/);
    const y = quantLinear(ctx, x, q);
    expect(y.shape).toEqual([8, 64]);
    release(ctx, w, x, y);
    releaseQuant(ctx, q);
  });
});
