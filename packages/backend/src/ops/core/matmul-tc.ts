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
import tcWgsl from '../../../../../shaders/matmul-tc.wgsl';
import type { BufferBinding, Context, ContextInfo, SubgroupMatrixConfig } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import type { KernelDef, ParamSpec } from '../../kernel';
import { checkedKernel, kernelFailures, kernelsReady } from '../../kernel-cache';
import { operandReader } from './matmul';

/** A workgroup tile of the tensor-core kernel, in elements: BM x BN of C per workgroup over an SGM x SGN grid
 *  of subgroups, BK of K staged per step (a multiple of the fragment's K). */
export interface TcTile {
  bm: number;
  bn: number;
  bk: number;
  sgm: number;
  sgn: number;
}

/** The tiles `auto` chooses from (largest first). Measured on an H200 (src/bench/matmul-tc-bench.ts; see
 *  docs/PERFORMANCE.md): the big tile for products with at least `TC_MIN_BIG_TILES` of them, the small one
 *  below. */
export const TC_TILES = {
  t128x128: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4 },
  t128x128w4: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2 },
  t128x64: { bm: 128, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t64x64: { bm: 64, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t128x256k16: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4 },
  t64x64k64: { bm: 64, bn: 64, bk: 64, sgm: 2, sgn: 2 },
} as const satisfies Record<string, TcTile>;
export type TcTileName = keyof typeof TC_TILES;

/** Tuning of `auto` (a benchmark may change it): the big and small tile and the tile count below which the
 *  small one runs. */
export const tcTuning: { big: TcTileName; small: TcTileName; minBigTiles: number; direct: boolean; unroll: boolean } = {
  big: 't128x256k16',
  small: 't64x64',
  minBigTiles: 264,
  /** Store full tiles straight from the accumulators to C (else every tile goes through the scratch). */
  direct: true,
  /** Unroll the fragment loops into named accumulators (`tcMatrixCode`). Measured on an H200 (2026-11-24,
   *  docs/PERFORMANCE.md): the array form ran at 24-40 TFLOP/s for every tile (its matrices live in local
   *  memory); unrolled, the 128x256x16 tile runs 107-120 TFLOP/s on 4096^3 and both LLM shapes, every layout. */
  unroll: true,
};

/** What the adapter offers the tensor-core kernel: the fragment shape and the (fixed) subgroup size. */
export interface TensorCorePlan {
  frag: SubgroupMatrixConfig;
  subgroupSize: number;
}

/**
 * The tensor-core plan of an adapter, or null with the reason: it needs `shader-f16`, an f16 -> f32
 * subgroup-matrix configuration and a fixed subgroup size (the kernel maps subgroups onto tiles by
 * `local_invocation_index / subgroup size`). Among several configurations the one with the largest M x N
 * (then K) wins: fewer fragment loads per multiply-accumulate.
 */
export function tensorCorePlan(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes'>): TensorCorePlan | { reason: string } {
  if (!info.features.subgroupMatrix) return { reason: 'the adapter has no chromium-experimental-subgroup-matrix' };
  if (!info.features.shaderF16) return { reason: 'the adapter has no shader-f16' };
  const cands = info.subgroupMatrixConfigs.filter((c) => c.componentType === 'f16' && c.resultComponentType === 'f32');
  if (!cands.length) return { reason: 'no f16 -> f32 subgroup-matrix configuration' };
  const { min, max } = info.subgroupSizes;
  if (!(min > 0 && min === max)) return { reason: `the subgroup size is not fixed (${min}..${max})` };
  const frag = [...cands].sort((x, y) => y.M * y.N - x.M * x.N || y.K - x.K)[0]!;
  return { frag, subgroupSize: max };
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
  const threads = t.sgm * t.sgn * plan.subgroupSize;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = tcSharedBytes(t, plan, transA, transB);
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** Workgroup memory of a tile: two staged slices of A and B (rows padded by 8 halves) and the f32 scratch. */
export function tcSharedBytes(t: TcTile, plan: TensorCorePlan, transA: boolean, transB: boolean): number {
  const a = slice(t, 'a', transA);
  const b = slice(t, 'b', transB);
  return 2 * 2 * (a.size + b.size) + 4 * t.sgm * t.sgn * plan.frag.M * plan.frag.N;
}

function slice(t: TcTile, x: 'a' | 'b', trans: boolean): { stride: number; size: number } {
  // A is staged [BM, BK] (or [BK, BM] when transposed), B [BK, BN] (or [BN, BK])
  const [rows, cols] = x === 'a' ? (trans ? [t.bk, t.bm] : [t.bm, t.bk]) : trans ? [t.bn, t.bk] : [t.bk, t.bn];
  return { stride: cols + 8, size: rows * (cols + 8) };
}

/** The kernel's flags (WGSL consts in the prelude). */
export interface TcFlags {
  VEC_A: boolean;
  VEC_B: boolean;
  HAS_BIAS: boolean;
  ACCUM: boolean;
  DIRECT: boolean;
}

const NO_FLAGS: TcFlags = { VEC_A: false, VEC_B: false, HAS_BIAS: false, ACCUM: false, DIRECT: false };

/** The WGSL prepended to `shaders/matmul-tc.wgsl` for a fragment, tile, layout and flags. */
export function tcPrelude(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS): string {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const a = slice(t, 'a', transA);
  const b = slice(t, 'b', transB);
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  return (
    c('SM', SM) + c('SN', SN) + c('SK', SK) + c('SG', plan.subgroupSize) + c('SGM', t.sgm) + c('SGN', t.sgn) +
    c('FM', fm) + c('FN', fn) + c('BM', t.bm) + c('BN', t.bn) + c('BK', t.bk) +
    c('AS_STRIDE', a.stride) + c('AS_SIZE', a.size) + c('BS_STRIDE', b.stride) + c('BS_SIZE', b.size) +
    `const A_T: bool = ${transA};\nconst B_T: bool = ${transB};\n` +
    Object.entries(flags).map(([k, v]) => `const ${k}: bool = ${v};\n`).join('') +
    // subgroup_matrix_left<T, K, M> is M rows x K columns; right<T, N, K> is K x N; result<T, N, M> is M x N
    `alias Lm = subgroup_matrix_left<f16, ${SK}, ${SM}>;\n` +
    `alias Rm = subgroup_matrix_right<f16, ${SN}, ${SK}>;\n` +
    `alias Acc = subgroup_matrix_result<f32, ${SN}, ${SM}>;\n` +
    // a transposed operand is staged as stored, so op(A) = [M, K] reads it column-major (and op(B) likewise)
    `fn load_l(off: u32) -> Lm { return subgroupMatrixLoad<Lm, ${transA ? 'col_major' : 'row_major'}>(&As, off, AS_STRIDE); }\n` +
    `fn load_r(off: u32) -> Rm { return subgroupMatrixLoad<Rm, ${transB ? 'col_major' : 'row_major'}>(&Bs, off, BS_STRIDE); }\n` +
    // element reads of the (f16) operands for unaligned loads, from the format table as in the portable kernel
    operandReader('a', 'f16') +
    operandReader('b', 'f16')
  );
}

/**
 * The subgroup-matrix code of `shaders/matmul-tc.wgsl` at its `//@acc`, `//@mma`, `//@direct` and `//@scratch`
 * lines: the FM x FN accumulators as an array indexed in loops, or (`unroll`) as named variables acc_<i>_<j>
 * with every fragment load and multiply-accumulate written out.
 */
export function tcMatrixCode(t: TcTile, plan: TensorCorePlan, unroll: boolean): Record<'acc' | 'mma' | 'direct' | 'scratch', string> {
  if (!unroll)
    return {
      acc: 'var acc: array<Acc, FM * FN>;',
      mma: `var lf: array<Lm, FM>;
      var rf: array<Rm, FN>;
      for (var i = 0u; i < FM; i++) { lf[i] = load_l(ab + a_off(wm0 + i * SM, kk)); }
      for (var j = 0u; j < FN; j++) { rf[j] = load_r(bb + b_off(kk, wn0 + j * SN)); }
      for (var i = 0u; i < FM; i++) {
        for (var j = 0u; j < FN; j++) {
          acc[i * FN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf[j], acc[i * FN + j]);
        }
      }`,
      direct: `for (var i = 0u; i < FM; i++) {
      for (var j = 0u; j < FN; j++) {
        let o = cb + (m0 + wm0 + i * SM) * p.N + n0 + wn0 + j * SN;
        subgroupMatrixStore<row_major>(&c, o, acc[i * FN + j], p.N);
      }
    }`,
      scratch: `for (var i = 0u; i < FM; i++) {
    for (var j = 0u; j < FN; j++) {
      subgroupMatrixStore<row_major>(&Cs, cs, acc[i * FN + j], SN);
      workgroupBarrier();
      copy_out(i, j, cs, lane, m0, n0, wm0, wn0, cb);
      workgroupBarrier();
    }
  }`,
    };
  const fm = t.bm / t.sgm / plan.frag.M;
  const fn = t.bn / t.sgn / plan.frag.N;
  const I = [...Array(fm).keys()];
  const J = [...Array(fn).keys()];
  const IJ = I.flatMap((i) => J.map((j) => [i, j] as const));
  return {
    acc: IJ.map(([i, j]) => `var acc_${i}_${j}: Acc;`).join('\n  '),
    mma: [
      ...I.map((i) => `let l_${i} = load_l(ab + a_off(wm0 + ${i}u * SM, kk));`),
      ...J.map((j) => `let r_${j} = load_r(bb + b_off(kk, wn0 + ${j}u * SN));`),
      ...IJ.map(([i, j]) => `acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l_${i}, r_${j}, acc_${i}_${j});`),
    ].join('\n      '),
    direct: IJ.map(
      ([i, j]) => `subgroupMatrixStore<row_major>(&c, cb + (m0 + wm0 + ${i}u * SM) * p.N + n0 + wn0 + ${j}u * SN, acc_${i}_${j}, p.N);`,
    ).join('\n    '),
    scratch: IJ.map(
      ([i, j]) =>
        `subgroupMatrixStore<row_major>(&Cs, cs, acc_${i}_${j}, SN);\n  workgroupBarrier();\n` +
        `  copy_out(${i}u, ${j}u, cs, lane, m0, n0, wm0, wn0, cb);\n  workgroupBarrier();`,
    ).join('\n  '),
  };
}

/** The whole WGSL of a tensor-core kernel: the prelude and `shaders/matmul-tc.wgsl` with its matrix code. */
export function tcSource(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS, unroll = false): string {
  const m = tcMatrixCode(t, plan, unroll);
  const body = tcWgsl.replace(/^(\s*)\/\/@(acc|mma|direct|scratch)$/gm, (_, ind: string, k: 'acc' | 'mma' | 'direct' | 'scratch') => ind + m[k]);
  return tcPrelude(plan, t, transA, transB, flags) + body;
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
}

/** The tile `auto` runs for a product: the big one when the product has enough of them, else the small one,
 *  each only if it fits the device (else 128x64, else 64x64). */
export function chooseTcTile(plan: TensorCorePlan, limits: Record<string, number>, l: Pick<TcLaunch, 'M' | 'N' | 'batch' | 'transA' | 'transB'>): TcTile {
  const big = TC_TILES[tcTuning.big];
  const tiles = Math.ceil(l.M / big.bm) * Math.ceil(l.N / big.bn) * l.batch;
  const first = tiles >= tcTuning.minBigTiles ? tcTuning.big : tcTuning.small;
  const order: TcTileName[] = [first, tcTuning.small, 't128x64', 't64x64'];
  for (const n of order) if (!tcTileProblem(TC_TILES[n], plan, limits, l.transA, l.transB)) return TC_TILES[n];
  throw new ShapeError(`matmul: no tensor-core tile fits this device (fragment ${plan.frag.M}x${plan.frag.N}x${plan.frag.K})`);
}

/** WGSL extensions of the tensor-core kernel (`subgroups` for the subgroup_id / subgroup_invocation_id builtins). */
export const TC_ENABLES = ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'];

const PARAMS: readonly ParamSpec[] = ['u32:M', 'u32:N', 'u32:K', 'u32:sa', 'u32:sb', 'f32:alpha', 'u32:one', 'u32:lda', 'u32:ldb'];

/** The kernel definition (bindings, params, enables) around tensor-core WGSL `code` (the prelude and
 *  `shaders/matmul-tc.wgsl`, or a variant of them in tests). */
export function tcKernelDef(code: string, biasDtype: DType = 'f16'): Omit<KernelDef, 'name'> {
  return {
    code,
    bindings: [
      { name: 'a', access: 'read', dtype: 'f16' },
      { name: 'b', access: 'read', dtype: 'f16' },
      { name: 'bias', access: 'read', dtype: biasDtype },
      { name: 'c', access: 'rw', dtype: 'f32' },
    ],
    params: PARAMS,
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
export function matmulTc(ctx: Context, plan: TensorCorePlan, l: TcLaunch, bufs: [BufferBinding, BufferBinding, BufferBinding, BufferBinding]): boolean {
  const t = l.tile ?? chooseTcTile(plan, ctx.info.limits, l);
  if (l.tile) {
    const why = tcTileProblem(t, plan, ctx.info.limits, l.transA, l.transB);
    if (why) throw new ShapeError(`matmul: tensor-core tile ${JSON.stringify(t)}: ${why}`);
  }
  const flags: TcFlags = {
    VEC_A: l.lda % 8 === 0 && l.sa % 8 === 0,
    VEC_B: l.ldb % 8 === 0 && l.sb % 8 === 0,
    HAS_BIAS: l.hasBias,
    ACCUM: l.accumulate,
    DIRECT: !l.hasBias && !l.accumulate && tcTuning.direct,
  };
  const name = `matmul-tc-${t.bm}x${t.bn}x${t.bk}-${t.sgm}x${t.sgn}${tcTuning.unroll ? '-u' : ''}`;
  const key = `mmtc:${name}:${+l.transA}${+l.transB}:${l.biasDtype}:${Object.values(flags).map(Number).join('')}`;
  // subgroup-matrix pipelines are built only once their WGSL checked out (see kernel-cache.ts: under Dawn's
  // skip_validation a shader breaking a subgroup-matrix rule aborted the process at pipeline creation)
  const k = checkedKernel(ctx, key, () => ({ name, ...tcKernelDef(tcSource(plan, t, l.transA, l.transB, flags, tcTuning.unroll), l.biasDtype) }));
  if (!k) return false;
  const x = Math.ceil(l.N / t.bn);
  const y = Math.ceil(l.M / t.bm);
  if (x > 65535 || y > 65535) throw new ShapeError(`matmul: ${y} x ${x} workgroup tiles are more than one dispatch takes`);
  ctx.dispatch(k, bufs, [x, y, l.batch], [l.M, l.N, l.K, l.sa, l.sb, l.alpha, 1, l.lda, l.ldb]);
  return true;
}

const plans = new WeakMap<Context, TensorCorePlan | { reason: string }>();

/** The context's tensor-core plan (memoised). */
export function contextTcPlan(ctx: Context): TensorCorePlan | { reason: string } {
  let p = plans.get(ctx);
  if (!p) plans.set(ctx, (p = tensorCorePlan(ctx.info)));
  return p;
}
