import refWgsl from '../../../../../shaders/matmul-ref.wgsl';
import tiledWgsl from '../../../../../shaders/matmul.wgsl';
import type { Context } from '../../context';
import type { GpuBuffer } from '../../buffer-pool';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { formatOf } from '../../format';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { contextTcPlan, matmulTc, type MatmulLaunch, type TcTile, type TensorCorePlan } from './matmul-tc';
import { f16x3Tuning, f32MatmulPrecision, splitF16x3, type F32MatmulPrecision } from './matmul-f16x3';
import { f16ImageOf, f16ImageTuning, imageChunks, splitRows, sumPlanes, type F16Image } from './matmul-f16-images';
import { reduce } from './reduce';
import { assertFloat, broadcastShapes, cachedKernel, checkBinding, checkOut, fmtShape } from './util';

/** A register-tiled configuration: BM x BN workgroup tile, BK K-slice, TM x TN outputs per thread, and the
 *  warp's shape over the thread grid (`wtx` thread columns per warp, default min(16, BN / TN)). */
export interface MatmulTile {
  bm: number;
  bn: number;
  bk: number;
  tm: number;
  tn: number;
  wtx?: number;
  /** Workgroup order: bands of `gm` tile rows (0 or absent: row-major). */
  gm?: number;
  /** K groups per workgroup (sliced K; absent: 1): `ks` groups of (BM/TM)*(BN/TN) threads each sum every
   *  ks-th K-slice, then the partial tiles are added in workgroup memory. */
  ks?: number;
}

/**
 * The numbered matmul variants (llm.c style). `v0` is the plain reference (a thread per output); the others run
 * `shaders/matmul.wgsl` with the tile below. `auto` picks `MATMUL_DEFAULT`; where that tile leaves the GPU with
 * few workgroups, `MATMUL_SPLIT` + split-K for a long K, `MATMUL_SMALL` for tiny or narrow products (see
 * `autoVariant`; per-product timings from `src/bench/matmul-sweep.ts` in docs/PERFORMANCE.md); `MATMUL_SOFTWARE`
 * on software adapters. The defaults were picked
 * from `src/bench/bench.ts` runs on an H200 (f32, TFLOP/s at 4096^3 NN / NT / TN): v1 28.8 / 26.9 / 30.7,
 * v2 36.5 / 33.2 / 29.1, v3 32.1 / 29.7 / 37.9, v4 37.7 / 35.0 / 35.8, v5 25-28 / 25-28.5 / 43.3; tiles with
 * BK = 16 or 24 ran at about 22 and 128x256 / 256x128 tiles at 28-29 (see the package README).
 */
export const MATMUL_VARIANTS = {
  v0: null,
  v1: { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 },
  v2: { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 },
  v3: { bm: 128, bn: 64, bk: 8, tm: 8, tn: 8, wtx: 8 },
  v4: { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8, gm: 8 },
  v5: { bm: 128, bn: 64, bk: 8, tm: 8, tn: 8, wtx: 8, gm: 8 },
  /** Skinny N (LoRA's x A^T and dY B with N = r <= 16): 128 rows x 16 columns per workgroup. */
  v6: { bm: 128, bn: 16, bk: 16, tm: 8, tn: 4 },
  /** Skinny M (LoRA's dA = du^T x with M = r <= 16): 16 rows x 128 columns per workgroup. */
  v7: { bm: 16, bn: 128, bk: 16, tm: 4, tn: 8 },
  /** Split-K tile for long-K products with few output tiles (weight gradients `dY^T x` over 4096 tokens):
   *  128 x 64, BK 16, 8 x 4 per thread, 256 threads (the winner of `bench/matmul-sweep.ts` on an H200 for every
   *  weight-gradient product of the benchmark training step). */
  v8: { bm: 128, bn: 64, bk: 16, tm: 8, tn: 4 },
} as const satisfies Record<string, MatmulTile | null>;
export type MatmulVariant = keyof typeof MATMUL_VARIANTS;

/** The variants `auto` uses for large products per layout (NN, NT, TN), and the one for products with few
 *  output tiles. */
export const MATMUL_DEFAULT: Readonly<Record<'NN' | 'NT' | 'TN' | 'TT', MatmulVariant>> = { NN: 'v4', NT: 'v4', TN: 'v5', TT: 'v4' };
export const MATMUL_SMALL: MatmulVariant = 'v1';
/** The variant `auto` splits long-K products with few tiles over (below SPLIT_OWN_TILES tiles of the default, K
 *  at least SPLIT_MIN_K, no bias / accumulate / batch), and runs unsplit for NN products with few tiles of the
 *  default over a shorter K (twice the default's workgroups). */
export const MATMUL_SPLIT: MatmulVariant = 'v8';
/** The variant `auto` uses on software adapters (lavapipe): as fast there at test sizes, and its pipelines
 *  compile in tens of milliseconds instead of about a second each. */
export const MATMUL_SOFTWARE: MatmulVariant = 'v0';
/** Below this many workgroups of the default tile `auto` looks for more parallelism: split-K for a long K, the
 *  default tile otherwise (measured on an H200, `bench/matmul-sweep.ts`: a [4096 x 512] output over K = 512 ran
 *  76 us on v4's 128 tiles against 111 us on v1's 512; the training step's products together took 31 ms per step
 *  on the old choice, v1 below this count, against 24 ms on the sweep's winners). */
const MIN_TILES = 264;
/** Fewer tiles of the default than this: MATMUL_SMALL (a product too small to fill even a fraction of a GPU with
 *  large tiles; LoRA's TN products with r = 16 land here and keep v1 + split-K). */
const TINY_TILES = 32;
/** The shortest K `auto` splits over MATMUL_SPLIT (K = 1376 products ran no faster split on an H200). */
const SPLIT_MIN_K = 2048;
/** Long-K products with at least this many (but fewer than MIN_TILES) tiles of the default split the default
 *  tile itself (SPLIT_TARGET), not MATMUL_SPLIT's. Measured in two sweeps of the training step's products
 *  (`bench/matmul-sweep.ts`, H200 2026-11-24 and H100 2026-12-07): [1376 | 512] x [512 | 1376] over K = 4096 TN
 *  ran 190-193 us on v5 split 4 against 207-211 on v8 split 8; 4096 x 512 over K = 8192 NN 982-985 us on v4 split
 *  2 against 1207-1210 on v8 split 4; 512 x 512 over K = 4096 (32 tiles) stays fastest on v8 split 8-16. */
const SPLIT_OWN_TILES = 64;
/** `auto` keeps products with a K below this off the tensor cores: measured on an H200, LoRA's K = 16
 *  products took 28-31 us there against 16 us on the portable v1 kernel. */
const TC_MIN_K = 64;
/** `auto` takes the skinny tiles (v6, v7) when N (or M) is at most this. */
const SKINNY = 16;

/** Options of `matmul`. */
export interface MatmulOptions {
  /** A is stored `[..., K, M]` (use A^T). */
  transA?: boolean;
  /** B is stored `[..., N, K]` (use B^T): HF Linear weights `[out, in]` give `y = x W^T`. */
  transB?: boolean;
  /** Added to every row: `[N]`, any float dtype. */
  bias?: DeviceTensor;
  /** Multiplies the product (not the bias or the accumulated C). Default 1. */
  alpha?: number;
  /** Add into `out` (`C += ...`) instead of overwriting it; needs `out`. */
  accumulate?: boolean;
  /** Write into this f32 tensor of the result's shape. It must not be an input. */
  out?: DeviceTensor;
  /** Split K into this many chunks summed in a second pass (TN products only; `auto` chooses on GPUs when the
   *  output has few tiles and K is long). Must divide K. */
  splitK?: number;
  /** Kernel variant; default `auto`. */
  variant?: MatmulVariant | 'auto';
  /** Tuning: run this tile configuration instead of a numbered variant (see `checkTile` for the rules). */
  tile?: MatmulTile;
  /**
   * Tensor cores (subgroup matrices, f16 x f16 -> f32): by default used for f16 A and B where the adapter has
   * them (`tensorCorePlan`) and no `variant` or `tile` is asked for. `false` keeps the portable kernels; `true`
   * requires them (a ShapeError names what is missing).
   */
  tensorCores?: boolean;
  /** Tuning: the tensor-core tile to run (see `tcTileProblem` for the rules). */
  tcTile?: TcTile;
  /** Tuning: split the tensor-core product's tail (`tcTail`): true also with `tcTile`, false never; default where
   *  the tile is chosen automatically. */
  tcTail?: boolean;
  /** Tuning: run an x W^T product as the TN product of transposed copies (`tcViaTN`): true wherever the layout
   *  and dims allow, false never; default where the model says it pays. */
  tcViaTN?: boolean;
  /** f32 x f32 products: 'high' runs them on f16 tensor cores, three products per f32 product (about 22 bits; see
   *  ops/core/matmul-f16x3.ts), where the adapter has them; default: the context's `setF32MatmulPrecision`. At
   *  either precision an f32 A times a B with an f16 image (`prepareF16Images`: a frozen weight from a 16-bit
   *  checkpoint) or an f16 B (its own image) takes the tensor cores: exactly at 'highest', to 22 bits of A at
   *  'high' (ops/core/matmul-f16-images.ts). */
  precision?: F32MatmulPrecision;
}

/**
 * Batched matrix product `C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias) (+ C[b] if accumulate)` with f32
 * accumulation, returning a new f32 tensor `[...batch, M, N]` (or `opts.out`).
 *
 * A is `[...batchA, M, K]` (or `[..., K, M]` with `transA`), B is `[...batchB, K, N]` (or `[..., N, K]` with
 * `transB`); each may be f32, f16 or bf16 (16-bit is decoded in the kernel). The batch shapes broadcast
 * NumPy-style as long as each side either has the full batch or a batch of one element (then it is reused;
 * when B is unbatched and A is not transposed, the batch folds into M: one large product).
 */
export function matmul(ctx: Context, a: DeviceTensor, b: DeviceTensor, opts: MatmulOptions = {}): DeviceTensor {
  assertFloat(a, 'matmul', 'A');
  assertFloat(b, 'matmul', 'B');
  if (a.shape.length < 2 || b.shape.length < 2)
    throw new ShapeError(`matmul: A ${fmtShape(a.shape)} and B ${fmtShape(b.shape)} need at least 2 dims each`);
  const transA = !!opts.transA;
  const transB = !!opts.transB;
  const ra = a.shape.length;
  const rb = b.shape.length;
  const M = a.shape[transA ? ra - 1 : ra - 2]!;
  const K = a.shape[transA ? ra - 2 : ra - 1]!;
  const Kb = b.shape[transB ? rb - 1 : rb - 2]!;
  const N = b.shape[transB ? rb - 2 : rb - 1]!;
  const desc = () =>
    `A ${fmtShape(a.shape)}${transA ? '^T' : ''} @ B ${fmtShape(b.shape)}${transB ? '^T' : ''}`;
  if (K !== Kb) throw new ShapeError(`matmul: inner dims differ in ${desc()} (${K} vs ${Kb})`);
  const ba = a.shape.slice(0, -2);
  const bb = b.shape.slice(0, -2);
  let batchShape: number[];
  try {
    batchShape = broadcastShapes(ba, bb);
  } catch {
    throw new ShapeError(`matmul: batch dims of ${desc()} do not broadcast`);
  }
  const nA = numel(ba);
  const nB = numel(bb);
  let batch = numel(batchShape);
  if ((nA !== batch && nA !== 1) || (nB !== batch && nB !== 1))
    throw new ShapeError(`matmul: batch dims of ${desc()} must match or one side must have a single batch element`);
  const shape = [...batchShape, M, N];
  if (opts.accumulate && !opts.out) throw new ShapeError('matmul: accumulate needs an `out` tensor to add into');
  if (opts.bias) {
    assertFloat(opts.bias, 'matmul', 'bias');
    if (numel(opts.bias.shape) !== N) throw new ShapeError(`matmul: bias ${fmtShape(opts.bias.shape)} does not match N = ${N} of ${desc()}`);
  }
  if (opts.out) checkOut(opts.out, shape, 'matmul', 'f32', [a, b, ...(opts.bias ? [opts.bias] : [])]);
  checkBinding(ctx, a, 'matmul', 'A');
  checkBinding(ctx, b, 'matmul', 'B');
  checkBinding(ctx, opts.out ?? { buffer: a.buffer, dtype: 'f32', shape }, 'matmul', 'C');
  const c = opts.out ?? empty(ctx, shape);
  if (M * N * batch === 0) return c;
  let Mk = M;
  let sa = nA === 1 ? 0 : M * K;
  const sb = nB === 1 ? 0 : K * N;
  if (nB === 1 && !transA && batch > 1) {
    Mk = M * batch; // B is shared and A's rows are contiguous: one product of batch*M rows
    batch = 1;
    sa = 0;
  }
  const lda = transA ? Mk : K;
  const ldb = transB ? K : N;
  if (opts.precision !== undefined && opts.precision !== 'high' && opts.precision !== 'highest')
    throw new ConfigError(`matmul: precision must be 'highest' or 'high', got ${JSON.stringify(opts.precision)}`);
  const img = imagePlan(ctx, a, b, opts, Mk, N, K, batch, transA, nB);
  if (img) {
    // A's rows as f16 planes, one product of the stacked planes with B's exact f16 image, the planes summed
    // (over S chunks of K: the stacked planes' products per chunk as a batch, every part summed in one pass)
    const P = (opts.precision ?? f32MatmulPrecision(ctx)) === 'high' ? 2 : 3;
    const S = imageChunks(K);
    const kc = K / S;
    const rows = P * Mk;
    const { planes, rexp } = splitRows(ctx, a, Mk, K, P);
    const part = empty(ctx, [S, rows, N]);
    try {
      const inner = { tensorCores: opts.tensorCores };
      const path = matmulPath(ctx, 'f16', 'f16', inner, kc);
      const variant = path.tc ? 'auto' : autoVariant(ctx, rows, N, kc, S, false, transB, false);
      encode(ctx, planes, img.img, part, path, variant, inner, {
        M: rows, N, K: kc, batch: S, transA: false, transB, lda: K, ldb: transB ? K : N,
        sa: kc, sb: transB ? kc : kc * N, alpha: 1, accumulate: false, bias: undefined,
      });
      sumPlanes(ctx, part, rexp, c, Mk, N, S * P, img.e, { alpha: opts.alpha ?? 1, bias: opts.bias, accumulate: !!opts.accumulate });
    } finally {
      for (const x of [planes.buffer, rexp, part.buffer]) ctx.release(x);
    }
    return c;
  }
  const hp = highPrecisionPlan(ctx, a, b, opts, Mk, N, K, batch);
  if (hp) {
    // [hiA | hiA | loA] @ [hiB ; loB ; hiB] over K' = 3K, times 1 / (sA sB) in the epilogue
    const s = splitF16x3(ctx, a, b, transA, transB);
    const K3 = 3 * K;
    const done = matmulTc(ctx, hp, {
      M: Mk, N, K: K3, batch, sa: 3 * sa, sb: 3 * sb, lda: transA ? lda : K3, ldb: transB ? K3 : ldb, transA, transB,
      alpha: opts.alpha ?? 1, accumulate: !!opts.accumulate, biasDtype: opts.bias?.dtype ?? 'f16', hasBias: !!opts.bias,
      tile: opts.tcTile, gscale: true,
    }, [s.a3, s.b3, opts.bias?.buffer ?? s.a3, c.buffer, s.sc]);
    for (const x of [s.a3, s.b3, s.sc]) ctx.release(x);
    if (done) return c;
    if (opts.tensorCores) throw new ShapeError(`matmul: tensorCores: true, but the tensor-core kernel is not ready (await tensorCoresReady(ctx); failures: tcFailures(ctx))`);
    // the tensor-core kernel is still being checked (or failed its check): the portable f32 kernels run this time
  }
  const path = matmulPath(ctx, a.dtype, b.dtype, opts, K);
  let variant = opts.variant ?? 'auto';
  if (variant === 'auto' && !path.tc && !opts.tile) {
    const tuned = tunings.get(ctx)?.get(tuningKey(`${transA ? 'T' : 'N'}${transB ? 'T' : 'N'}`, Mk, N, K, batch));
    if (tuned) {
      const split = !opts.accumulate && !opts.bias && batch === 1 ? tuned.splitK : undefined;
      opts = { ...opts, variant: tuned.variant, tile: tuned.tile, splitK: opts.splitK ?? split ?? 1 };
      variant = tuned.variant ?? 'auto';
    }
  }
  const splittable = !opts.accumulate && !opts.bias;
  if (variant === 'auto' && !path.tc) variant = opts.tile ? 'v1' : autoVariant(ctx, Mk, N, K, batch, transA, transB, splittable);
  if (!path.tc && !Object.hasOwn(MATMUL_VARIANTS, variant)) throw new ShapeError(`matmul: unknown variant '${variant}'`);
  const tileOf = path.tc ? null : opts.tile ?? MATMUL_VARIANTS[variant as MatmulVariant];
  const splits = splitK(ctx, Mk, N, K, batch, variant, tileOf, opts);
  if (splits > 1) {
    // few output tiles and a long K: partial products over K chunks as a batch (chunk z starts z * kc along K;
    // the row strides stay those of the whole operands), then summed over the chunks in a fixed order
    const kc = K / splits;
    const part = empty(ctx, [splits, Mk, N]);
    encode(ctx, a, b, part, path, variant, opts, {
      M: Mk, N, K: kc, batch: splits, transA, transB, lda, ldb,
      sa: transA ? kc * lda : kc,
      sb: transB ? kc : kc * ldb,
      alpha: opts.alpha ?? 1, accumulate: false, bias: undefined,
    });
    reduce(ctx, 'sum', part, 0, { out: c });
    ctx.release(part.buffer);
    return c;
  }
  encode(ctx, a, b, c, path, variant, opts, {
    M: Mk, N, K, batch, sa, sb, lda, ldb, transA, transB, alpha: opts.alpha ?? 1, accumulate: !!opts.accumulate, bias: opts.bias,
  });
  return c;
}

/**
 * B's f16 image for an exact f32 product on tensor cores (ops/core/matmul-f16-images.ts), or null: f32 A not
 * transposed with rows folded into one product, an unbatched f32 B with an image (`prepareF16Images`) or an
 * unbatched f16 B (its own image), no portable variant, tile or split asked for, tensor cores not refused (and on
 * the adapter, unless `f16ImageTuning.anywhere`), K even and at least TC_MIN_K, M, N and K at least the tuning's
 * minima, K in chunks (`imageChunks`), and the planes and parts within one binding.
 */
function imagePlan(ctx: Context, a: DeviceTensor, b: DeviceTensor, opts: MatmulOptions, M: number, N: number, K: number, batch: number, transA: boolean, nB: number): F16Image | null {
  if (a.dtype !== 'f32' || (b.dtype !== 'f32' && b.dtype !== 'f16') || transA || batch !== 1 || nB !== 1 || K % 2 || K < TC_MIN_K) return null;
  if (opts.tensorCores === false || (opts.variant !== undefined && opts.variant !== 'auto') || opts.tile || (opts.splitK ?? 1) !== 1) return null;
  const b2 = b.shape.length === 2 ? b : { ...b, shape: b.shape.slice(-2) };
  // an f16 B is its own image
  const img = b.dtype === 'f16' ? { img: b2, e: 0 } : f16ImageOf(ctx, b2);
  if (!img || M < f16ImageTuning.minRows || N < f16ImageTuning.minCols || K < f16ImageTuning.minK) return null;
  const chunks = imageChunks(K);
  if (!chunks || chunks * 3 * M * N * 4 > ctx.maxBinding || 3 * M * K * 2 > ctx.maxBinding) return null;
  if (f16ImageTuning.anywhere) return img;
  return 'frag' in contextTcPlan(ctx) ? img : null;
}

/**
 * The tensor-core plan for an f32 x f32 product at 'high' precision (see ops/core/matmul-f16x3.ts), or null for the
 * usual path: f32 operands, precision 'high', no portable variant, tile or split asked for, tensor cores not
 * refused, K of at least TC_MIN_K, both output dims at least f16x3Tuning.minDim (LoRA's rank-r products and small
 * models stay portable), the f16
 * copies within one binding, and an adapter with a plan.
 */
function highPrecisionPlan(ctx: Context, a: DeviceTensor, b: DeviceTensor, opts: MatmulOptions, M: number, N: number, K: number, batch: number): TensorCorePlan | null {
  if (a.dtype !== 'f32' || b.dtype !== 'f32' || (opts.precision ?? f32MatmulPrecision(ctx)) !== 'high') return null;
  if (opts.tensorCores === false || (opts.variant !== undefined && opts.variant !== 'auto') || opts.tile || (opts.splitK ?? 1) !== 1) return null;
  // (tensorCores: true asks for them whatever the size)
  const minDim = opts.tensorCores ? SKINNY + 1 : Math.max(SKINNY + 1, f16x3Tuning.minDim);
  if (K < TC_MIN_K || Math.min(M, N) < minDim || batch > 65535) return null;
  if (Math.max(numel(a.shape), numel(b.shape)) * 6 > ctx.maxBinding) return null;
  const p = contextTcPlan(ctx);
  return 'frag' in p ? p : null;
}

/** A kernel choice for one product: a numbered variant or a tile, and split-K chunks (1: none). */
export interface MatmulChoice {
  variant?: MatmulVariant;
  tile?: MatmulTile;
  splitK?: number;
}

/** A tuning entry: the choice for products of this shape (M, N, K after batch folding; unbatched) and layout. */
export interface MatmulTuningEntry extends MatmulChoice {
  M: number;
  N: number;
  K: number;
  layout: 'NN' | 'NT' | 'TN' | 'TT';
}

const tunings = new WeakMap<Context, Map<string, MatmulChoice>>();
const tuningKey = (layout: string, M: number, N: number, K: number, batch: number) => `${layout}:${M}x${N}x${K}:${batch}`;

/**
 * Tuning: run these choices instead of `auto` for f32-path products of exactly these shapes on this context
 * (e.g. the winners of `bench/matmul-sweep.ts`); an explicit variant, tile or splitK in the call still wins, and
 * split-K is skipped where the call has a bias or accumulates. Tiles are checked (`checkTile`) here. An empty
 * list clears the table.
 */
export function setMatmulTuning(ctx: Context, entries: readonly MatmulTuningEntry[]): void {
  const m = new Map<string, MatmulChoice>();
  for (const e of entries) {
    if (e.variant !== undefined && !Object.hasOwn(MATMUL_VARIANTS, e.variant)) throw new ShapeError(`matmul tuning: unknown variant '${e.variant}'`);
    if (e.tile) checkTile(ctx, e.tile);
    if (e.splitK !== undefined && (!Number.isInteger(e.splitK) || e.splitK < 1 || e.K % e.splitK))
      throw new ShapeError(`matmul tuning: splitK ${e.splitK} must be a positive divisor of K = ${e.K}`);
    m.set(tuningKey(e.layout, e.M, e.N, e.K, 1), { variant: e.variant, tile: e.tile, splitK: e.splitK });
  }
  tunings.set(ctx, m);
}

/** One product as the kernels see it: sizes, batch and row strides in elements, epilogue. */
interface Launch extends MatmulLaunch {
  bias: DeviceTensor | undefined;
}

/** The variant `auto` picks: software adapters the reference; skinny NN / NT products (N or M at most SKINNY)
 *  the skinny tiles; products with at least MIN_TILES tiles of the layout's default tile that default; tiny ones
 *  (under TINY_TILES) the small tile; in between, long-K products that may be split (`splittable`) the default
 *  (at least SPLIT_OWN_TILES tiles) or the split-K tile, both split; NN products the split-K tile unsplit; the rest
 *  the default. */
function autoVariant(ctx: Context, M: number, N: number, K: number, batch: number, transA: boolean, transB: boolean, splittable: boolean): MatmulVariant {
  if (ctx.info.isSoftware) return MATMUL_SOFTWARE;
  // measured on an H200 (bench/matmul-tc-bench.ts, LoRA r = 16 at 2048 x 2048): NT / NN with N = 16 run
  // 103 us -> 43-46 us on v6 + split-K; TN products stay faster on v1 + split-K (34 us vs 39-41 on v6 / v7)
  if (!transA && N <= SKINNY && M > SKINNY) return 'v6';
  if (!transA && M <= SKINNY && N > SKINNY) return 'v7';
  const big = MATMUL_DEFAULT[`${transA ? 'T' : 'N'}${transB ? 'T' : 'N'}`];
  const t = MATMUL_VARIANTS[big] ?? MATMUL_VARIANTS.v2;
  const tiles = Math.ceil(M / t.bm) * Math.ceil(N / t.bn) * batch;
  if (tiles >= MIN_TILES) return big;
  // tiny products and products narrower than the big tile (mostly empty tiles) keep the small tile
  if (tiles < TINY_TILES || M < t.bm || N < t.bn) return MATMUL_SMALL;
  const st = MATMUL_VARIANTS[MATMUL_SPLIT]!;
  if (splittable && batch === 1 && K >= SPLIT_MIN_K) {
    if (tiles >= SPLIT_OWN_TILES) return big;
    return M >= st.bm && N >= st.bn ? MATMUL_SPLIT : MATMUL_SMALL;
  }
  // NN over a shorter K: MATMUL_SPLIT's tile unsplit (both sweeps: 4096 x 512 over K = 512 / 1376 in 102-130 / 186-197
  // us against v4's 115-138 / 209-216; in NT v4 stays faster)
  if (!transA && !transB && M >= st.bm && N >= st.bn) return MATMUL_SPLIT;
  return big;
}

/**
 * What `auto` runs on the portable f32 path for an unbatched-after-folding product of these sizes in this layout
 * (tuning tables aside): the variant and the split-K chunk count. For benchmarks and tests.
 */
export function autoChoice(
  ctx: Pick<Context, 'info'>,
  M: number,
  N: number,
  K: number,
  layout: 'NN' | 'NT' | 'TN' | 'TT',
  opts: Pick<MatmulOptions, 'bias' | 'accumulate'> & { batch?: number } = {},
): { variant: MatmulVariant; splitK: number } {
  const batch = opts.batch ?? 1;
  const [tA, tB] = [layout[0] === 'T', layout[1] === 'T'];
  const variant = autoVariant(ctx as Context, M, N, K, batch, tA, tB, !opts.accumulate && !opts.bias);
  return { variant, splitK: splitK(ctx as Context, M, N, K, batch, variant, MATMUL_VARIANTS[variant], opts) };
}

/** Encode one launch on the tensor cores (path.tc) or the portable kernel of `variant` / `opts.tile`. */
function encode(
  ctx: Context,
  a: DeviceTensor,
  b: DeviceTensor,
  c: DeviceTensor,
  path: { tc: TensorCorePlan | null },
  variantIn: MatmulVariant | 'auto',
  opts: MatmulOptions,
  L: Launch,
): void {
  let variant = variantIn;
  const { M: Mk, N, K, batch, sa, sb, lda, ldb, transA, transB } = L;
  if (Mk * N * batch === 0) return;
  const bias = L.bias?.buffer ?? a.buffer;
  if (path.tc) {
    const done = matmulTc(ctx, path.tc, { ...L, biasDtype: L.bias?.dtype ?? 'f16', hasBias: !!L.bias, tile: opts.tcTile, tail: opts.tcTail, viaTN: opts.tcViaTN }, [a.buffer, b.buffer, bias, c.buffer]);
    if (done) return;
    // the tensor-core kernel is still being checked (or failed its check): the portable kernel runs this time
    if (opts.tensorCores) throw new ShapeError(`matmul: tensorCores: true, but the tensor-core kernel is not ready (await tensorCoresReady(ctx); failures: tcFailures(ctx))`);
    variant = autoVariant(ctx, Mk, N, K, batch, transA, transB, false);
  }
  if (batch > 65535) throw new ShapeError(`matmul: a batch of ${batch} is more than one dispatch takes (65535)`);
  // without a bias the kernel never reads binding 3: A is bound there again (read-only bindings may alias)
  const biasDtype = L.bias?.dtype ?? a.dtype;
  const flags = {
    TRANS_A: +transA,
    TRANS_B: +transB,
    HAS_BIAS: +!!L.bias,
    ACCUM: +L.accumulate,
  };
  const params = [Mk, N, K, sa, sb, L.alpha, 1, lda, ldb];
  const bindings = [
    { name: 'a', access: 'read', dtype: a.dtype },
    { name: 'b', access: 'read', dtype: b.dtype },
    { name: 'bias', access: 'read', dtype: biasDtype },
    { name: 'c', access: 'rw', dtype: 'f32' },
  ] as const;
  const PARAMS = ['u32:M', 'u32:N', 'u32:K', 'u32:sa', 'u32:sb', 'f32:alpha', 'u32:one', 'u32:lda', 'u32:ldb'] as const;
  if (variant === 'auto') throw new ShapeError('matmul: internal: no variant chosen');
  const tile = opts.tile ? checkTile(ctx, opts.tile) : MATMUL_VARIANTS[variant];
  const tname = opts.tile ? tileName(tile!) : variant;
  if (!tile) {
    const key = `mm:v0:${a.dtype}:${b.dtype}:${biasDtype}:${Object.values(flags).join('')}`;
    const k = cachedKernel(ctx, key, () => ({ name: 'matmul-v0', code: refWgsl, bindings, params: PARAMS, constants: flags }));
    grid(ctx, k, [a.buffer, b.buffer, bias, c.buffer], Math.ceil(N / 16), Math.ceil(Mk / 16), batch, params);
    return;
  }
  // 16-byte loads need the contiguous dim (and the batch stride) to be a multiple of the vector width
  const w = (dt: DType) => 4 * formatOf(dt).perWord;
  const vec = {
    VEC_A: +(lda % w(a.dtype) === 0 && sa % w(a.dtype) === 0),
    VEC_B: +(ldb % w(b.dtype) === 0 && sb % w(b.dtype) === 0),
    VEC_C: +(N % 4 === 0),
  };
  const constants = { DYN: +ctx.info.isSoftware, ...flags, ...vec };
  const key = `mm:${tname}:${a.dtype}:${b.dtype}:${biasDtype}:${Object.values(constants).join('')}`;
  const k = cachedKernel(ctx, key, () => ({
    name: `matmul-${tname}`,
    code: tileConsts(tile) + operandReader('a', a.dtype) + operandReader('b', b.dtype) + tiledWgsl,
    bindings,
    params: PARAMS,
    constants,
  }));
  grid(ctx, k, [a.buffer, b.buffer, bias, c.buffer], Math.ceil(N / tile.bn), Math.ceil(Mk / tile.bm), batch, params);
}

/**
 * Which kernel family a product runs on: tensor cores (`tc`: the plan) for f16 x f16 where the adapter has
 * them, unless the caller picked a portable `variant` / `tile` or `tensorCores: false`; the portable kernels
 * otherwise. `tensorCores: true` where they cannot run throws a ShapeError with the reason.
 */
export function matmulPath(
  ctx: Context,
  adt: DType,
  bdt: DType,
  opts: Pick<MatmulOptions, 'tensorCores' | 'variant' | 'tile'> = {},
  K?: number,
): { tc: TensorCorePlan | null; reason?: string } {
  if (opts.tensorCores === false) return { tc: null, reason: 'tensorCores: false' };
  const portable = (opts.variant !== undefined && opts.variant !== 'auto') || !!opts.tile;
  let reason: string | undefined;
  if (adt !== 'f16' || bdt !== 'f16') reason = `operands are ${adt} x ${bdt}, tensor cores take f16 x f16`;
  else if (portable) reason = 'a portable variant or tile was asked for';
  else if (K !== undefined && K < TC_MIN_K && opts.tensorCores === undefined)
    reason = `K = ${K} is below ${TC_MIN_K}: the portable kernels are faster there`;
  else {
    const p = contextTcPlan(ctx);
    if ('frag' in p) return { tc: p };
    reason = p.reason;
  }
  if (opts.tensorCores) throw new ShapeError(`matmul: tensorCores: true, but ${reason}`);
  return { tc: null, reason };
}

function grid(ctx: Context, k: ReturnType<typeof ctx.kernel>, bufs: GpuBuffer[], x: number, y: number, z: number, params: number[]): void {
  if (x > 65535 || y > 65535) throw new ShapeError(`matmul: ${y} x ${x} workgroup tiles are more than one dispatch takes`);
  ctx.dispatch(k, bufs, [x, y, z], params);
}

/**
 * WGSL readers of a matmul operand bound as `array<vec4u>` (`<x>4`), from the format table: `at_<x>(e)` (one
 * element as f32) and `vec8_<x>(e, lim)` (8 elements from e along the contiguous dim; 32-bit formats read the
 * second 16 bytes only when lim > 4). Formats of 1 or 2 elements per word.
 */
export function operandReader(x: 'a' | 'b', dtype: DType): string {
  const f = formatOf(dtype);
  const u = (w: string) => f.wgsl.unpack(w);
  if (f.perWord === 1)
    return (
      `fn at_${x}(e: u32) -> f32 { return ${u(`${x}4[e >> 2u][e & 3u]`)}; }\n` +
      `fn vec8_${x}(e: u32, lim: u32) -> array<vec4f, 2> {\n` +
      `  var r: array<vec4f, 2>;\n  var w = ${x}4[e >> 2u];\n` +
      `  r[0] = vec4f(${u('w.x')}, ${u('w.y')}, ${u('w.z')}, ${u('w.w')});\n` +
      `  if (lim > 4u) { w = ${x}4[(e >> 2u) + 1u]; r[1] = vec4f(${u('w.x')}, ${u('w.y')}, ${u('w.z')}, ${u('w.w')}); }\n` +
      `  return r;\n}\n`
    );
  if (f.perWord === 2)
    return (
      `fn at_${x}(e: u32) -> f32 { return ${u(`${x}4[e >> 3u][(e >> 1u) & 3u]`)}[e & 1u]; }\n` +
      `fn vec8_${x}(e: u32, lim: u32) -> array<vec4f, 2> {\n  let w = ${x}4[e >> 3u];\n` +
      `  return array<vec4f, 2>(vec4f(${u('w.x')}, ${u('w.y')}), vec4f(${u('w.z')}, ${u('w.w')}));\n}\n`
    );
  throw new ShapeError(`matmul: ${dtype} operands are not read by the tiled kernel`);
}

/** The WGSL constants of a tile (prepended to `shaders/matmul.wgsl`). */
export function tileConsts(t: MatmulTile): string {
  const wtx = t.wtx ?? Math.min(16, t.bn / t.tn);
  return (
    `const BM: u32 = ${t.bm}u;\nconst BN: u32 = ${t.bn}u;\nconst BK: u32 = ${t.bk}u;\n` +
    `const TM: u32 = ${t.tm}u;\nconst TN: u32 = ${t.tn}u;\nconst WTX: u32 = ${wtx}u;\nconst GM: u32 = ${t.gm ?? 0}u;\n` +
    `const KS: u32 = ${t.ks ?? 1}u;\n`
  );
}

/** Parse a tile's name (`BMxBNxBK-TMxTN[-wWTX][-gGM][-kKS]`, as `tileName` writes it); a ShapeError if malformed. */
export function parseTile(s: string): MatmulTile {
  const m = /^(\d+)x(\d+)x(\d+)-(\d+)x(\d+)(?:-w(\d+))?(?:-g(\d+))?(?:-k(\d+))?$/.exec(s);
  if (!m) throw new ShapeError(`matmul: cannot parse tile '${s}' (expected BMxBNxBK-TMxTN[-wWTX][-gGM][-kKS])`);
  const [bm, bn, bk, tm, tn, wtx, gm, ks] = m.slice(1).map((x) => (x === undefined ? undefined : Number(x)));
  return { bm: bm!, bn: bn!, bk: bk!, tm: tm!, tn: tn!, ...(wtx ? { wtx } : {}), ...(gm ? { gm } : {}), ...(ks && ks > 1 ? { ks } : {}) };
}

/** A tile's name, e.g. `128x128x8-8x8-w16` or `128x64x8-8x8-w8-k2`. */
export function tileName(t: MatmulTile): string {
  const ks = t.ks ?? 1;
  return `${t.bm}x${t.bn}x${t.bk}-${t.tm}x${t.tn}-w${t.wtx ?? Math.min(16, t.bn / t.tn)}${t.gm ? `-g${t.gm}` : ''}${ks > 1 ? `-k${ks}` : ''}`;
}

/** Workgroup memory of a tile in bytes: KS pairs of slices of A and B, As at least one group's partial tile
 *  when KS > 1 (the layout of `shaders/matmul.wgsl`). */
export function tileStorageBytes(t: MatmulTile): number {
  const ks = t.ks ?? 1;
  const as = Math.max(2 * ks * (t.bk * t.bm) / 4, ks > 1 ? (t.bm * t.bn) / 4 : 0);
  return 16 * (as + (2 * ks * t.bk * t.bn) / 4);
}

/**
 * Validate a tile: TM and TN multiples of 4 dividing BM and BN; BK, BM and BN multiples of 8; the thread count
 * (BM/TM)*(BN/TN) a multiple of 32 and, times KS (1 to 8), within the device limit; WTX dividing 32 and BN/TN;
 * the workgroup memory (`tileStorageBytes`) within the device limit.
 */
export function checkTile(ctx: Context, t: MatmulTile): MatmulTile {
  const tx = t.bn / t.tn;
  const ty = t.bm / t.tm;
  const ks = t.ks ?? 1;
  const wg = tx * ty;
  const wtx = t.wtx ?? Math.min(16, tx);
  const ok =
    t.tm % 4 === 0 &&
    t.tn % 4 === 0 &&
    Number.isInteger(tx) &&
    Number.isInteger(ty) &&
    t.bk % 8 === 0 &&
    t.bm % 8 === 0 &&
    t.bn % 8 === 0 &&
    wg % 32 === 0 &&
    Number.isInteger(ks) &&
    ks >= 1 &&
    ks <= 8 &&
    wg * ks <= (ctx.info.limits.maxComputeInvocationsPerWorkgroup ?? 256) &&
    32 % wtx === 0 &&
    tx % wtx === 0 &&
    tileStorageBytes(t) <= (ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384);
  if (!ok) throw new ShapeError(`matmul: tile ${JSON.stringify(t)} breaks the tile rules (see checkTile)`);
  return t;
}

/** Workgroups that split-K aims to fill the GPU with, per tile it splits (about 4 per SM of an H100 for the
 *  small and skinny tiles; MATMUL_SPLIT measured best at 512-1400 workgroups on an H200; the default tiles at
 *  256-352, within 1-2% of the best of 2 to 8 chunks in both sweeps of SPLIT_OWN_TILES). */
const SPLIT_TARGET: Partial<Record<MatmulVariant, number>> = { v1: 528, v6: 528, v7: 528, v8: 1024, v4: 320, v5: 320 };
/** The shortest K each split variant is split over (the default tiles and MATMUL_SPLIT from SPLIT_MIN_K). */
const SPLIT_FROM_K: Partial<Record<MatmulVariant, number>> = { v1: 1024, v6: 1024, v7: 1024, v8: SPLIT_MIN_K, v4: SPLIT_MIN_K, v5: SPLIT_MIN_K };

/** How many K chunks an unbatched product is split into (1: none): `opts.splitK`, or on GPUs for the variants in
 *  SPLIT_TARGET (chosen by `auto` or named without a tile; tensor-core products as v1) enough chunks of at least
 *  256 to give the product about that many workgroups when its tile leaves the GPU idle. */
function splitK(ctx: Context, M: number, N: number, K: number, batch: number, variant: string, tile: MatmulTile | null, opts: MatmulOptions): number {
  if (opts.splitK !== undefined) {
    if (!Number.isInteger(opts.splitK) || opts.splitK < 1 || K % opts.splitK)
      throw new ShapeError(`matmul: splitK ${opts.splitK} must be a positive divisor of K = ${K}`);
    if (opts.splitK > 1 && (batch !== 1 || opts.accumulate || opts.bias))
      throw new ShapeError('matmul: splitK is supported for unbatched products without bias or accumulate');
    return opts.splitK;
  }
  if (opts.tile || ctx.info.isSoftware) return 1;
  // no portable tile (tensor cores, v0): sized as for 64 x 64 tiles
  const t = tile ?? { bm: 64, bn: 64 };
  const target = tile ? SPLIT_TARGET[variant as MatmulVariant] : SPLIT_TARGET.v1;
  if (!target || batch !== 1 || opts.accumulate || opts.bias || K < (tile ? SPLIT_FROM_K[variant as MatmulVariant] ?? 1024 : 1024)) return 1;
  const tiles = Math.ceil(M / t.bm) * Math.ceil(N / t.bn);
  if (tiles >= MIN_TILES) return 1;
  let s = Math.min(16, Math.ceil(target / tiles), Math.floor(K / 256));
  while (s > 1 && K % s) s--;
  return s;
}
