/**
 * Tensor-core matmul: f16 x f16 products accumulated in f32 on subgroup matrices
 * (`chromium-experimental-subgroup-matrix`), kernel `shaders/matmul-tc.wgsl`. `matmul` takes this path by itself
 * for f16 operands where the adapter offers an f16 -> f32 subgroup-matrix configuration (see `tensorCorePlan`);
 * everywhere else (lavapipe, SwiftShader, most laptops) the portable kernels run.
 *
 * The fragment shape (SM x SN x SK) comes from the configurations the adapter reports, never a constant; the
 * workgroup tile (BM x BN x BK and its SGM x SGN subgroup grid) is a plan in elements that is checked against
 * the fragment and the device limits, so one tile list serves 16x16x16, 16x8x16 and 8x8x8 hardware.
 */
import { computeUnits } from '../../compute-units';
import type { GpuBuffer } from '../../buffer-pool';
import type { BufferBinding, Context, ContextInfo, SubgroupMatrixConfig } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import type { DeviceTensor } from '../../tensor';
import type { KernelDef, ParamSpec } from '../../kernel';
import { checkedKernel, kernelFailed, kernelFailures, kernelsReady } from '../../kernel-cache';
import { tcSlice, tcSharedBytes, tcSource, type TcFlags } from './matmul-tc-codegen';
import { encodeTail } from './matmul-tc-tail';
import { TC_TILES, tcTuning, type TcTile, type TcTileName } from './matmul-tc-tiles';
import { transpose, transposePair16 } from './transpose';

export { tcTailSum } from './matmul-tc-tail';
export { TC_TILES, tcTuning, type TcTile, type TcTileName } from './matmul-tc-tiles';

export { tcMatrixCode, tcPrelude, tcSharedBytes, tcSource, type TcFlags, type TcHook } from './matmul-tc-codegen';

/** What the adapter offers the tensor-core kernel: the fragment shape and the (fixed) subgroup size. */
export interface TensorCorePlan {
  frag: SubgroupMatrixConfig;
  subgroupSize: number;
  /** WGSL's `buffer_view` language extension is there (tiles with `bv`). */
  bufferView?: boolean;
}

/**
 * The tensor-core plan of an adapter, or null with the reason: it needs `shader-f16`, an f16 -> f32
 * subgroup-matrix configuration and a fixed subgroup size (the kernel maps subgroups onto tiles by
 * `local_invocation_index / subgroup size`). Among several configurations the one with the largest M x N
 * (then K) wins: fewer fragment loads per multiply-accumulate.
 */
export function tensorCorePlan(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes' | 'wgslFeatures'>): TensorCorePlan | { reason: string } {
  if (!info.features.subgroupMatrix) return { reason: 'the adapter has no chromium-experimental-subgroup-matrix' };
  if (!info.features.shaderF16) return { reason: 'the adapter has no shader-f16' };
  const cands = info.subgroupMatrixConfigs.filter((c) => c.componentType === 'f16' && c.resultComponentType === 'f32');
  if (!cands.length) return { reason: 'no f16 -> f32 subgroup-matrix configuration' };
  const { min, max } = info.subgroupSizes;
  if (!(min > 0 && min === max)) return { reason: `the subgroup size is not fixed (${min}..${max})` };
  const frag = [...cands].sort((x, y) => y.M * y.N - x.M * x.N || y.K - x.K)[0]!;
  return { frag, subgroupSize: max, bufferView: !!info.wgslFeatures?.includes('buffer_view') };
}

/** Why a tile does not fit this fragment and device, or null when it does. */
export function tcTileProblem(t: TcTile, plan: TensorCorePlan, limits: Record<string, number>, transA = false, transB = false): string | null {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const wm = t.bm / t.sgm;
  const wn = t.bn / t.sgn;
  if (!Number.isInteger(wm) || wm % SM) return `BM ${t.bm} / SGM ${t.sgm} is not a multiple of the fragment's M ${SM}`;
  if (!Number.isInteger(wn) || wn % SN) return `BN ${t.bn} / SGN ${t.sgn} is not a multiple of the fragment's N ${SN}`;
  if (t.bk % SK || t.bk % 8) return `BK ${t.bk} is not a multiple of the fragment's K ${SK} and of 8`;
  if (t.bm % 8 || t.bn % 8) return `BM and BN must be multiples of 8`;
  if (t.cs !== undefined && (!Number.isInteger(t.cs) || t.cs < 1 || (t.sgm * t.sgn) % t.cs)) return `cs ${t.cs} does not divide the ${t.sgm * t.sgn} subgroups`;
  if (t.pf !== undefined && t.pf !== 1 && t.pf !== 2) return `pf ${t.pf} is not 1 or 2`;
  if (t.pf === 2 && t.cm) return 'a two-deep prefetch (pf 2) needs the unit staging, not cm';
  if (t.bv && t.cm) return 'buffer views (bv) need the unit staging, not cm';
  if (t.bv && !plan.bufferView) return 'the adapter\'s WGSL has no buffer_view language extension (bv)';
  if (t.sd && !t.bv) return 'stores through workgroup memory (sd) need buffer views (bv)';
  if (t.sde && !t.sd) return 'the band epilogue (sde) needs the band stores (sd)';
  if (t.cm) {
    // the stored slices are copied in SM x SK blocks
    for (const [rows, cols] of [tcSlice(t, 'a', transA).dims, tcSlice(t, 'b', transB).dims])
      if (rows % SM || cols % SK) return `a staged slice of ${rows} x ${cols} is not made of ${SM} x ${SK} blocks`;
  }
  const threads = t.sgm * t.sgn * plan.subgroupSize;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = tcSharedBytes(t, plan, transA, transB);
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** One product as the matmul kernels see it (`matmul` prepared it: batch folded, strides in elements). */
export interface MatmulLaunch {
  M: number;
  N: number;
  K: number;
  batch: number;
  /** Batch strides of A and B (elements; 0 broadcasts). */
  sa: number;
  sb: number;
  /** Row strides of A and B as stored (elements). */
  lda: number;
  ldb: number;
  transA: boolean;
  transB: boolean;
  alpha: number;
  accumulate: boolean;
}

/** A tensor-core launch: a {@link MatmulLaunch} with its bias dtype and an optional forced tile. */
export interface TcLaunch extends MatmulLaunch {
  biasDtype: DType;
  hasBias: boolean;
  /** Force a tile (tests and benchmarks); default: `tcTuning`. */
  tile?: TcTile;
  /** Multiply the product by the factors in a fifth binding (see `TcFlags.GSCALE`). */
  gscale?: boolean;
  /** Split the tail (`tcTail`, where the compute units are known and there is no bias, accumulate or gscale):
   *  default where `auto` chose the tile; true also with a forced tile; false never. */
  tail?: boolean;
  /** Run x W^T through TN (`tcViaTN`) where `auto` chooses the tile: where the model says it pays (default),
   *  wherever the layout and dims allow (true), never (false). */
  viaTN?: boolean;
}

/** A tile's identity in kernel names and cache keys, e.g. `128x256x32-2x4-v2-b1-cm`. */
export function tcTileKey(t: TcTile): string {
  return `${t.bm}x${t.bn}x${t.bk}-${t.sgm}x${t.sgn}-v${t.vw ?? 8}-b${t.nbuf ?? 2}${t.cm ? '-cm' : ''}${t.hoist ? '-h' : ''}${t.derive ? 'd' : ''}${t.ilv ? '-i' : ''}${t.gm ? `-g${t.gm}` : ''}${t.cs ? `-c${t.cs}` : ''}${t.pf === 2 ? '-p2' : ''}${t.bv ? '-bv' : ''}${t.sd ? '-sd' : ''}${t.sde ? 'e' : ''}${t.ablate ? `-${t.ablate}` : ''}`;
}

/** The tile `auto` runs for a product: the big one (TN's own for that layout; for NT, where `wave` (tiles at once)
 *  is known, the 64-deep one if its waves are worth it) when the product has enough of them, else the small one,
 *  each only if it fits the device (else 128x64, else 64x64). */
export function chooseTcTile(plan: TensorCorePlan, limits: Record<string, number>, l: Pick<TcLaunch, 'M' | 'N' | 'batch' | 'transA' | 'transB'> & Partial<Pick<TcLaunch, 'K'>>, wave?: number | null): TcTile {
  const big = TC_TILES[tcTuning.big];
  const tiles = tcTileCount(big, l);
  const bigs: TcTileName[] = l.transA && !l.transB ? [tcTuning.bigTN, tcTuning.big, tcTuning.bigAlt] : [tcTuning.big, tcTuning.bigAlt];
  // NT with known compute units: the 64-deep tile where its waves take less time than the big tile's
  const nt = TC_TILES[tcTuning.bigNT];
  if (wave && !l.transA && l.transB && tiles >= tcTuning.minBigTiles && !tcTileProblem(nt, plan, limits, false, true))
    if (tcWaveTime(nt, l, wave) * tcTuning.bigNTWave < tcWaveTime(big, l, wave) * (1 - tcTuning.bigNTMargin)) bigs.unshift(tcTuning.bigNT);
  const order: TcTileName[] = tiles >= tcTuning.minBigTiles ? [...bigs, tcTuning.small, 't128x64', 't64x64'] : [tcTuning.small, 't128x64', 't64x64'];
  for (const n of order) if (!tcTileProblem(TC_TILES[n], plan, limits, l.transA, l.transB)) return TC_TILES[n];
  throw new ShapeError(`matmul: no tensor-core tile fits this device (fragment ${plan.frag.M}x${plan.frag.N}x${plan.frag.K})`);
}

/** Waves of `wave` tiles (the tiles that run at once) that a product takes on tile t: its tiles over the wave,
 *  rounded up (a last wave of a few tiles takes about a whole wave's time). */
export function tcWaves(t: Pick<TcTile, 'bm' | 'bn'>, l: Pick<TcLaunch, 'M' | 'N' | 'batch'>, wave: number): number {
  return Math.ceil(tcTileCount(t, l) / wave);
}

/** The workgroup tiles of a product on tile t, over its batch. */
export function tcTileCount(t: Pick<TcTile, 'bm' | 'bn'>, l: Pick<TcLaunch, 'M' | 'N' | 'batch'>): number {
  return Math.ceil(l.M / t.bm) * Math.ceil(l.N / t.bn) * l.batch;
}

/** The time of a product on tile t in waves of `wave` tiles: whole waves (`tcWaves`), or where K is given and
 *  `tcTail` splits the tail, the whole waves before it plus its chunks' share of a tile's K and `tcTuning.tailCost`. */
export function tcWaveTime(t: Pick<TcTile, 'bm' | 'bn' | 'bk' | 'gm'>, l: Pick<TcLaunch, 'M' | 'N' | 'batch'> & Partial<Pick<TcLaunch, 'K'>>, wave: number): number {
  const tail = l.K !== undefined ? tcTail(t, { ...l, K: l.K }, wave) : null;
  if (!tail) return tcWaves(t, l, wave);
  return tail.full / wave + tail.slices / Math.ceil(l.K! / t.bk) + tcTuning.tailCost;
}

/**
 * A split tail, or null: where a product's last wave on tile t would hold `tiles` tiles, at most half of `wave`
 * (and it has whole waves before it), those tiles run as `chunks` partial products each over consecutive K chunks
 * of `slices` BK-slices (at least `tcTuning.tailMinSlices`), so that the last wave is all chunks, a fraction of a
 * tile's time long: stream-K's idea within one dispatch (matmul-tc.wgsl with TAIL), the chunks summed in order by
 * a second kernel (matmul-tc-tail.wgsl). `full` is the number of whole tiles before the tail.
 */
export function tcTail(t: Pick<TcTile, 'bm' | 'bn' | 'bk' | 'gm'>, l: Pick<TcLaunch, 'M' | 'N' | 'K' | 'batch'>, wave: number): TcTail | null {
  if (!tcTuning.tail || t.gm || !(wave >= 2)) return null;
  const all = tcTileCount(t, l);
  const full = Math.floor(all / wave) * wave;
  const tiles = all - full;
  if (!full || !tiles) return null;
  const nsl = Math.ceil(l.K / t.bk);
  const most = Math.min(Math.floor(wave / tiles), Math.floor(nsl / tcTuning.tailMinSlices));
  if (most < 2) return null;
  const slices = Math.ceil(nsl / most);
  const chunks = Math.ceil(nsl / slices);
  return chunks < 2 ? null : { full, tiles, chunks, slices };
}

/** A split tail (see {@link tcTail}). */
export interface TcTail {
  full: number;
  tiles: number;
  chunks: number;
  slices: number;
}

/** Whether `auto` runs an x W^T (NT) product as the TN product of both operands transposed (`tcTuning.viaTN`):
 *  unbatched, contiguous, every dim a multiple of 8 (the 16-bit transpose), and (unless `l.viaTN` asks for it)
 *  compute units known and the model's time of the copies and the TN product at least `margin` below the NT
 *  product's on `ntTile`, the tile `auto` takes for it. The model counts waves as `chooseTcTile` does
 *  (`tcWaveTime`, split tails included), each wave taking its tile's measured us per unit of K (`nt` for the NT
 *  tiles; an NT tile without a rate is never replaced), and the copies `copyUs` (and `secondUs` without `viaPair`)
 *  plus 4 (M + N) K bytes at `bw`. */
export function tcViaTN(l: Pick<TcLaunch, 'M' | 'N' | 'K' | 'batch' | 'transA' | 'transB' | 'lda' | 'ldb' | 'viaTN'>, wave: number | null, ntTile?: TcTile): boolean {
  const v = tcTuning.viaTN;
  if (l.viaTN === false || l.transA || !l.transB || l.batch !== 1 || l.lda !== l.K || l.ldb !== l.K) return false;
  if (l.M % 8 || l.N % 8 || l.K % 8) return false;
  if (l.viaTN) return true;
  if (!v || !wave || !ntTile) return false;
  // only the tiles with a rate can be ntTile's name (a lookup over the model's few entries, not the whole table)
  const name = (Object.keys(v.nt) as TcTileName[]).find((n) => TC_TILES[n] === ntTile);
  const rate = name && v.nt[name];
  if (!rate) return false;
  const nt = tcWaveTime(ntTile, l, wave) * rate * l.K;
  const tn = tcWaveTime(TC_TILES[tcTuning.bigTN], l, wave) * v.tn * l.K;
  const copies = v.copyUs + (tcTuning.viaPair ? 0 : v.secondUs) + ((4 * (l.M + l.N) * l.K) / v.bw) * 1e6;
  return tn + copies < (1 - v.margin) * nt;
}

/** The wave (tiles at once) that `auto` plans with on this context, or null where the adapter's compute units
 *  are not known (`computeUnits`; `tcTuning.units` overrides). */
export function tcWave(ctx: Context): number | null {
  let u = tcTuning.units;
  if (u === undefined) {
    // once per context (every tensor-core product asks)
    u = units.get(ctx);
    if (u === undefined) units.set(ctx, (u = computeUnits(ctx.info)));
  }
  return u ? u * tcTuning.tilesPerUnit : null;
}

const units = new WeakMap<Context, number | null>();

/** WGSL extensions of the tensor-core kernel (`subgroups` for the subgroup_id / subgroup_invocation_id builtins). */
export const TC_ENABLES = ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'];

const PARAMS: readonly ParamSpec[] = ['u32:M', 'u32:N', 'u32:K', 'u32:sa', 'u32:sb', 'f32:alpha', 'u32:one', 'u32:lda', 'u32:ldb'];
const TAIL_PARAMS: readonly ParamSpec[] = [...PARAMS, 'u32:full', 'u32:tiles', 'u32:chunks', 'u32:slices'];

/** The kernel definition (bindings, params, enables) around tensor-core WGSL `code` (the prelude and
 *  `shaders/matmul-tc.wgsl`, or a variant of them in tests); `tail`: the split tail's params and `part` binding. */
export function tcKernelDef(code: string, biasDtype: DType = 'f16', gscale = false, tail = false): Omit<KernelDef, 'name'> {
  return {
    ...(/\bbufferView</.test(code) ? { requires: ['buffer_view'] } : {}),
    code,
    bindings: [
      { name: 'a', access: 'read', dtype: 'f16' },
      { name: 'b', access: 'read', dtype: 'f16' },
      { name: 'bias', access: 'read', dtype: biasDtype },
      { name: 'c', access: 'rw', dtype: 'f32' },
      ...(gscale ? [{ name: 'gs', access: 'read' as const, dtype: 'u32' as DType }] : []),
      ...(tail ? [{ name: 'part', access: 'rw' as const, dtype: 'f32' as DType }] : []),
    ],
    params: tail ? TAIL_PARAMS : PARAMS,
    enables: TC_ENABLES,
  };
}

/** Tensor-core kernels whose check failed on this context (cache key -> error): the portable path runs. */
export function tcFailures(ctx: Context): Map<string, Error> {
  return new Map([...kernelFailures(ctx)].filter(([k]) => k.startsWith('mmtc:')));
}

/** Wait until every tensor-core kernel requested so far on this context has been checked (and built). */
export const tensorCoresReady = kernelsReady;

/**
 * Encode one tensor-core matmul (operands already checked by `matmul`: f16 A and B, f32 C). Returns false,
 * encoding nothing, while the kernel is still being checked or if it failed its check (the caller runs the
 * portable kernel then).
 */
export function matmulTc(ctx: Context, plan: TensorCorePlan, l: TcLaunch, bufs: BufferBinding[]): boolean {
  if (bufs.length !== (l.gscale ? 5 : 4)) throw new ShapeError(`matmul: internal: ${bufs.length} bindings for a tensor-core launch`);
  // x W^T as the TN product of transposed copies where that pays (once the TN kernel is ready; if it failed its
  // check, the NT product)
  const r = tcKernelPlan(ctx, plan, l);
  if (!l.tile && tcViaTN(l, tcWave(ctx), r.tile) && !('offset' in bufs[0]!) && !('offset' in bufs[1]!)) {
    const { M, N, K } = l;
    const tn: TcLaunch = { ...l, transA: true, transB: false, lda: M, ldb: N, sa: 0, sb: 0 };
    const rt = tcKernelPlan(ctx, plan, tn);
    if (checkedKernel(ctx, rt.key, rt.make)) {
      const a: DeviceTensor = { buffer: bufs[0] as GpuBuffer, dtype: 'f16', shape: [M, K] };
      const b: DeviceTensor = { buffer: bufs[1] as GpuBuffer, dtype: 'f16', shape: [N, K] };
      const [at, bt] = tcTuning.viaPair ? transposePair16(ctx, a, b) : [transpose(ctx, a), transpose(ctx, b)];
      try {
        return matmulTc(ctx, plan, { ...tn, viaTN: false }, [at.buffer, bt.buffer, ...bufs.slice(2)]);
      } finally {
        ctx.release(at.buffer);
        ctx.release(bt.buffer);
      }
    }
    if (!kernelFailed(ctx, rt.key)) return false;
  }
  // subgroup-matrix pipelines are built only once their WGSL checked out (see kernel-cache.ts: under Dawn's
  // skip_validation a shader breaking a subgroup-matrix rule aborted the process at pipeline creation)
  const k = checkedKernel(ctx, r.key, r.make);
  const t = r.tile;
  if (!k) {
    // a buffer-view tile that this WGSL implementation refused (buffer_view is new, and its rules with subgroup
    // matrices may differ between versions): the tiles without buffer views, not the portable kernels
    if (!l.tile && t.bv && kernelFailed(ctx, r.key)) return matmulTc(ctx, { ...plan, bufferView: false }, l, bufs);
    return false;
  }
  const params = [l.M, l.N, l.K, l.sa, l.sb, l.alpha, 1, l.lda, l.ldb];
  if (r.tail) {
    encodeTail(ctx, k, t, l, r.tail, bufs, params);
    return true;
  }
  const x = Math.ceil(l.N / t.bn);
  const y = Math.ceil(l.M / t.bm);
  if (x > 65535 || y > 65535) throw new ShapeError(`matmul: ${y} x ${x} workgroup tiles are more than one dispatch takes`);
  ctx.dispatch(k, bufs, [x, y, l.batch], params);
  return true;
}

/** What `matmulTc` runs for a launch: its tile, its split tail (or null), and its kernel's cache key and
 *  definition. */
function tcKernelPlan(ctx: Context, plan: TensorCorePlan, l: TcLaunch): { tile: TcTile; tail: TcTail | null; key: string; make: () => KernelDef } {
  const wave = tcWave(ctx);
  // a split tail needs the wave and a plain epilogue (alpha only); the tile choice counts on it only then
  const splittable = !!wave && !l.hasBias && !l.accumulate && !l.gscale && l.tail !== false;
  const t = l.tile ?? chooseTcTile(plan, ctx.info.limits, splittable ? l : { ...l, K: undefined }, wave);
  if (l.tile) {
    const why = tcTileProblem(t, plan, ctx.info.limits, l.transA, l.transB);
    if (why) throw new ShapeError(`matmul: tensor-core tile ${JSON.stringify(t)}: ${why}`);
  }
  const split = splittable && (l.tail ?? !l.tile) ? tcTail(t, l, wave) : null;
  const tail = split && split.tiles * split.chunks * t.bm * t.bn * 4 <= ctx.maxBinding ? split : null;
  const flags: TcFlags = {
    VEC_A: l.lda % 8 === 0 && l.sa % 8 === 0,
    VEC_B: l.ldb % 8 === 0 && l.sb % 8 === 0,
    HAS_BIAS: l.hasBias,
    ACCUM: l.accumulate,
    DIRECT: !l.hasBias && !l.accumulate && !l.gscale && tcTuning.direct,
    GSCALE: !!l.gscale,
    TAIL: !!tail,
  };
  const name = `matmul-tc-${tcTileKey(t)}${tcTuning.unroll ? '-u' : ''}`;
  const key = `mmtc:${name}:${+l.transA}${+l.transB}:${l.biasDtype}:${Object.values(flags).map(Number).join('')}`;
  return { tile: t, tail, key, make: () => ({ name, ...tcKernelDef(tcSource(plan, t, l.transA, l.transB, flags, tcTuning.unroll), l.biasDtype, l.gscale, !!tail) }) };
}

const plans = new WeakMap<Context, TensorCorePlan | { reason: string }>();

/** The context's tensor-core plan (memoised). */
export function contextTcPlan(ctx: Context): TensorCorePlan | { reason: string } {
  let p = plans.get(ctx);
  if (!p) plans.set(ctx, (p = tensorCorePlan(ctx.info)));
  return p;
}
