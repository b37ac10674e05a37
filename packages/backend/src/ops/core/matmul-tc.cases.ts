/**
 * The tensor-core matmul checks, shared by `matmul-tc.test.ts` (vitest, where the adapter has subgroup
 * matrices) and the GPU-machine entry `src/bench/matmul-tc-check.ts` (no vitest there): every layout, batched
 * and broadcast operands, sizes that are and are not tile multiples (odd ones included), the epilogues (alpha,
 * bias, accumulate), every tile of `TC_TILES`, each against a float64 reference of the f16-rounded inputs, into
 * NaN-poisoned outputs.
 */
import type { Context } from '../../context';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { matmulRef, roundTo } from './core.ref';
import { matmul } from './matmul';
import { f16ImageOf, f16ImageTuning, prepareF16Images, releaseF16Images } from './matmul-f16-images';
import { contextTcPlan, TC_TILES, tcFailures, tcTileProblem, tcTuning, tensorCoresReady, type TcTile, type TcTileName } from './matmul-tc';

export interface TcCase {
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  batchA?: number;
  batchB?: number;
  alpha?: number;
  bias?: boolean;
  accumulate?: boolean;
  tile?: TcTileName;
  /** f32 operands (not f16-rounded; A about 0.02, B about 300) at precision 'high' (ops/core/matmul-f16x3.ts),
   *  checked against float64 of the f32 inputs within TC_HIGH_TOL. */
  f32High?: boolean;
  /** f32 A (about 0.02) times a bf16-valued f32 B (about 300) with an f16 image (ops/core/matmul-f16-images.ts) at
   *  this precision, checked against float64 of the f32 inputs within TC_HIGH_TOL. */
  f32Image?: 'highest' | 'high';
  /** With f32Image: B stored as f16 (f16-valued, about 300), its own image (no `prepareF16Images`). */
  bF16?: boolean;
  /** Plan with waves of this many tiles and split the tail (`tcTail`; with `tile`, forced): the case fails unless
   *  the product ran as the split kernel and the summing kernel. */
  wave?: number;
  /** Run as the TN product of transposed copies (`tcViaTN`, forced): the case fails unless it ran as the
   *  transposes of both operands (two dispatches; 'pair': one, `tcTuning.viaPair` on for the case) and the product. */
  viaTN?: boolean | 'pair';
}

export interface TcResult {
  name: string;
  relErr: number;
  kernel?: string;
  /** The bound this case must stay under (TC_TOL unless said). */
  tol?: number;
}

/** Relative error the f32 products at precision 'high' must stay under: about 2^-21 of the sum of |a b| over
 *  K <= 400 random terms, a few times what the portable f32 kernels show. */
export const TC_HIGH_TOL = 2e-5;

/** Relative error (max |got - want| / max |want|) the tensor-core kernels must stay under. */
export const TC_TOL = 1e-3;

let seed = 7000;

/** Run one product on the tensor-core path and compare it with float64. */
export async function runTcCase(ctx: Context, c: TcCase): Promise<TcResult> {
  const { M, N, K } = c;
  const nA = c.batchA ?? 1;
  const nB = c.batchB ?? 1;
  const batch = Math.max(nA, nB);
  const f32 = !!c.f32High || !!c.f32Image;
  const dt = f32 ? 'f32' : 'f16';
  const av = roundTo(dt, randn(nA * M * K, seed++).map((x) => (f32 ? x * 0.02 : x)));
  const bv = roundTo(c.bF16 ? 'f16' : c.f32Image ? 'bf16' : dt, randn(nB * K * N, seed++).map((x) => (f32 ? x * 300 : x)));
  const aShape = [...(c.batchA ? [nA] : []), ...(c.transA ? [K, M] : [M, K])];
  const bShape = [...(c.batchB ? [nB] : []), ...(c.transB ? [N, K] : [K, N])];
  const A = upload(ctx, av, aShape, dt);
  const B = upload(ctx, bv, bShape, c.bF16 ? 'f16' : dt);
  const tuning = { ...f16ImageTuning };
  if (c.f32Image) Object.assign(f16ImageTuning, { minRows: 1, minCols: 1, minK: 1 });
  if (c.f32Image && !c.bF16) {
    await prepareF16Images(ctx, [B]);
    if (!f16ImageOf(ctx, B)) throw new Error('matmul-tc case: the bf16-valued B got no f16 image');
  }
  const biasV = c.bias ? roundTo('f32', randn(N, seed++)) : undefined;
  const bias = biasV ? upload(ctx, biasV, [N]) : undefined;
  const outShape = [...(c.batchA || c.batchB ? [batch] : []), M, N];
  const out = empty(ctx, outShape);
  const c0 = c.accumulate ? roundTo('f32', randn(batch * M * N, seed++)) : undefined;
  const reset = () => (c0 ? ctx.write(out.buffer, Float32Array.from(c0)) : poison(ctx, out));
  reset();
  const tile: TcTile | undefined = c.tile ? TC_TILES[c.tile] : undefined;
  const precision = c.f32High ? ('high' as const) : c.f32Image;
  const run = () => matmul(ctx, A, B, { transA: c.transA, transB: c.transB, alpha: c.alpha, bias, accumulate: c.accumulate, out, tensorCores: true, tcTile: tile, tcTail: c.wave ? true : undefined, tcViaTN: c.viaTN ? true : undefined, precision });
  const planning = { units: tcTuning.units, tilesPerUnit: tcTuning.tilesPerUnit, viaPair: tcTuning.viaPair };
  if (c.wave) Object.assign(tcTuning, { units: c.wave, tilesPerUnit: 1 });
  if (c.viaTN) tcTuning.viaPair = c.viaTN === 'pair';
  // a kernel's first use starts its asynchronous check (see matmul-tc.ts); wait for it, then run for real
  let dispatches = ctx.stats.dispatches;
  try {
    try {
      run();
    } catch (e) {
      if (!/not ready/.test((e as Error).message)) throw e;
      await tensorCoresReady(ctx);
      const failed = [...tcFailures(ctx)];
      if (failed.length) throw new Error(failed.map(([k, err]) => `${k}: ${err.message}`).join('\n'));
      reset();
      dispatches = ctx.stats.dispatches;
      run();
    }
    // a split tail is the product's kernel and the summing kernel, nothing else
    if (c.wave && ctx.stats.dispatches - dispatches !== 2) throw new Error(`matmul-tc case: wave ${c.wave} did not split the tail (${ctx.stats.dispatches - dispatches} dispatches)`);
    if (c.viaTN && ctx.stats.dispatches - dispatches !== (c.viaTN === 'pair' ? 2 : 3)) throw new Error(`matmul-tc case: not run through TN (${ctx.stats.dispatches - dispatches} dispatches)`);
  } finally {
    Object.assign(tcTuning, planning);
    if (c.f32Image) {
      Object.assign(f16ImageTuning, tuning);
      releaseF16Images(ctx);
    }
  }
  const got = await download(ctx, out);
  const want = matmulRef(av, bv, {
    M,
    N,
    K,
    batch,
    sa: nA === 1 ? 0 : M * K,
    sb: nB === 1 ? 0 : K * N,
    transA: c.transA,
    transB: c.transB,
    alpha: c.alpha,
    bias: biasV,
    c0,
  });
  release(ctx, A, B, out, ...(bias ? [bias] : []));
  const layout = `${c.transA ? 'T' : 'N'}${c.transB ? 'T' : 'N'}`;
  const extra = [
    c.batchA || c.batchB ? `batch ${nA}/${nB}` : '',
    c.alpha !== undefined ? `alpha ${c.alpha}` : '',
    c.bias ? 'bias' : '',
    c.accumulate ? 'accumulate' : '',
    c.tile ?? '',
    c.f32High ? 'f32 high' : '',
    c.f32Image ? `f32 image ${c.f32Image}${c.bF16 ? ' (B f16)' : ''}` : '',
    c.wave ? `tail wave ${c.wave}` : '',
    c.viaTN ? (c.viaTN === 'pair' ? 'via TN (one transposing dispatch)' : 'via TN') : '',
  ].filter(Boolean);
  const name = `${layout} ${M}x${N}x${K}${extra.length ? ' ' + extra.join(' ') : ''}`;
  return { name, relErr: relErr(got, want), ...(f32 ? { tol: TC_HIGH_TOL } : {}) };
}

/** The correctness cases: layouts x tile-multiple / odd sizes, batches, epilogues, and every tile that fits
 *  this context's device. */
export function tcCases(ctx: Context): TcCase[] {
  const plan = contextTcPlan(ctx);
  const cases: TcCase[] = [];
  const shapes: [number, number, number][] = [
    [128, 128, 128],
    [256, 192, 96],
    [1, 1, 1],
    [7, 9, 5],
    [65, 130, 33],
    [129, 67, 200],
    [333, 257, 129],
  ];
  for (const [M, N, K] of shapes)
    for (const [transA, transB] of [
      [false, false],
      [false, true],
      [true, false],
    ] as const)
      cases.push({ M, N, K, transA, transB });
  cases.push({ M: 64, N: 80, K: 48, batchA: 3, batchB: 3 });
  cases.push({ M: 33, N: 17, K: 40, batchA: 4, transB: true });
  cases.push({ M: 31, N: 40, K: 24, batchB: 2, transA: true });
  cases.push({ M: 100, N: 72, K: 64, transB: true, bias: true });
  cases.push({ M: 128, N: 128, K: 64, alpha: 0.25, accumulate: true });
  cases.push({ M: 77, N: 50, K: 90, transA: true, accumulate: true, alpha: -1.5 });
  // f32 at precision 'high': every layout, odd sizes, batches, the epilogues
  for (const [transA, transB] of [[false, false], [false, true], [true, false], [true, true]] as const) {
    cases.push({ M: 333, N: 257, K: 129, transA, transB, f32High: true });
    cases.push({ M: 65, N: 130, K: 400, transA, transB, f32High: true });
  }
  cases.push({ M: 64, N: 80, K: 72, batchA: 3, batchB: 3, f32High: true, bias: true });
  cases.push({ M: 33, N: 40, K: 100, batchA: 4, transB: true, f32High: true, alpha: 0.5, accumulate: true });
  cases.push({ M: 300, N: 100, K: 64, batchB: 2, transA: true, f32High: true });
  // enough tiles for auto's big tile (96 of 128 x 256), partial ones at both edges: the f16x3 factors with every
  // epilogue through its stores
  cases.push({ M: 2047, N: 1530, K: 70, f32High: true, alpha: 0.5, bias: true, accumulate: true });
  // f32 A times a bf16-valued B through its f16 image: NN / NT, odd sizes, a folded batch, the epilogues
  cases.push({ M: 333, N: 257, K: 130, transB: true, f32Image: 'highest' });
  cases.push({ M: 65, N: 130, K: 400, f32Image: 'highest' });
  cases.push({ M: 333, N: 257, K: 130, transB: true, f32Image: 'high' });
  cases.push({ M: 33, N: 40, K: 100, batchA: 4, transB: true, f32Image: 'highest', alpha: 0.5, bias: true, accumulate: true });
  cases.push({ M: 300, N: 100, K: 64, f32Image: 'high', bias: true });
  cases.push({ M: 260, N: 520, K: 5000, transB: true, f32Image: 'highest' }); // two K chunks of 2500
  cases.push({ M: 129, N: 264, K: 200, f32Image: 'highest', bF16: true, bias: true });
  for (const tile of Object.keys(TC_TILES) as TcTileName[]) {
    const fits = (tA: boolean, tB: boolean) => 'frag' in plan && !tcTileProblem(TC_TILES[tile], plan, ctx.info.limits, tA, tB);
    if (fits(false, true)) cases.push({ M: 256, N: 256, K: 256, transB: true, tile });
    if (fits(true, false)) cases.push({ M: 131, N: 69, K: 72, transA: true, tile });
    if (fits(false, false)) cases.push({ M: 200, N: 136, K: 40, tile });
  }
  // auto's big tiles (the sizes above are small enough for its small tile) with batches and the epilogues, K not
  // a multiple of their slice depth
  for (const tile of [tcTuning.big, tcTuning.bigTN, tcTuning.bigNT, tcTuning.bigAlt]) {
    const fits = (tA: boolean, tB: boolean) => 'frag' in plan && !tcTileProblem(TC_TILES[tile], plan, ctx.info.limits, tA, tB);
    if (fits(false, false)) cases.push({ M: 160, N: 300, K: 100, batchA: 2, batchB: 2, bias: true, tile });
    if (fits(true, false)) cases.push({ M: 130, N: 264, K: 200, transA: true, alpha: 0.5, accumulate: true, tile });
    if (fits(false, true)) cases.push({ M: 129, N: 257, K: 97, batchA: 3, transB: true, bias: true, accumulate: true, tile });
  }
  // split tails (tcTail) on waves small enough for these sizes: every layout, partial tiles in the tail, chunks of
  // unequal length, a batch across the tail, alpha; the tiles auto takes and the small one, and auto itself
  for (const tile of [tcTuning.bigNT, tcTuning.big, tcTuning.bigTN, 't64x64'] as const)
    for (const [transA, transB] of [[false, false], [false, true], [true, false]] as const) {
      if (!('frag' in plan) || tcTileProblem(TC_TILES[tile], plan, ctx.info.limits, transA, transB)) continue;
      const t = TC_TILES[tile];
      // 4 x 4 tiles (the last row and column partial), waves of 7: 14 whole, the last 2 in 2 chunks of 6 and 5
      // slices (the last one partial)
      cases.push({ M: 3 * t.bm + 5, N: 3 * t.bn + 8, K: 10 * t.bk + 11, transA, transB, alpha: 0.5, wave: 7, tile });
    }
  cases.push({ M: 100, N: 130, K: 600, batchA: 3, batchB: 3, wave: 8, tile: 't64x64' }); // tiles 16 and 17: batch 2
  cases.push({ M: 300, N: 200, K: 700, transB: true, wave: 6, tile: 't64x64' }); // 2 tail tiles in 3 chunks
  cases.push({ M: 1536, N: 1536, K: 520, transB: true, wave: 132 }); // auto: 576 tiles of 64 x 64, 48 split in 2
  // x W^T as the TN product of transposed copies (forced: the model takes it for large products only), with the
  // epilogues
  cases.push({ M: 264, N: 200, K: 328, transB: true, viaTN: true });
  cases.push({ M: 128, N: 72, K: 64, transB: true, alpha: 0.5, bias: true, accumulate: true, viaTN: true });
  cases.push({ M: 264, N: 200, K: 328, transB: true, viaTN: 'pair' }); // both transposes in one dispatch
  cases.push({ M: 128, N: 72, K: 64, transB: true, alpha: 0.5, bias: true, accumulate: true, viaTN: 'pair' });
  return cases;
}

/**
 * The pipeline-creation regression (DESIGN.md: creating a second subgroup-matrix pipeline after the first had
 * run and its result had been mapped once aborted a process): build each tile's pipeline only after the
 * previous one has run and its output has been read back (mapped), four times over, in one process.
 */
export async function pipelineSequence(ctx: Context): Promise<TcResult[]> {
  const out: TcResult[] = [];
  const plan = contextTcPlan(ctx);
  if (!('frag' in plan)) return out;
  for (const tile of Object.keys(TC_TILES) as TcTileName[]) {
    if (tcTileProblem(TC_TILES[tile], plan, ctx.info.limits)) continue;
    const r = await runTcCase(ctx, { M: 96, N: 112, K: 80, tile });
    out.push({ ...r, name: `pipeline after run+map: ${r.name}` });
  }
  return out;
}
