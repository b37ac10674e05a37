import rowsWgsl from '../../../../../shaders/lowrank-rows.wgsl';
import finishWgsl from '../../../../../shaders/lowrank-outer-finish.wgsl';
import outerWgsl from '../../../../../shaders/lowrank-outer.wgsl';
import updateWgsl from '../../../../../shaders/lowrank-update.wgsl';
import { assertFloat, checkBindable, checkOut, fmtShape } from '../../checks';
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { grid1d, grid2d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import { empty, type DeviceTensor } from '../../tensor';

/** The largest rank the low-rank kernels take (R straight-line accumulators per thread: larger ranks compile
 *  slowly and run on matmul). */
export const LOWRANK_MAX_R = 32;

/** Tuning of the low-rank kernels (a benchmark may change it): `workgroups`, how many workgroups
 *  {@link lowRankOuter} aims for (the chunk count follows; 768 measured best in the 1.1B LoRA step on an H100,
 *  docs/PERFORMANCE.md); `tileRows`, the rows of Y it stages per step (64, or 32 where the adapter gives a
 *  workgroup less than {@link outerBytes}(64); unset: chosen so); `probe` (benchmarks only, results wrong): its sums
 *  or its loads of Y left out. */
export const lowRankTuning: { workgroups: number; tileRows?: 32 | 64; probe?: 'no-sum' | 'no-load' } = { workgroups: 768 };

/** Workgroup memory of lowrank-outer at the largest rank: the f32 Y tile [rows x 64] and Z [rows x 8 vec4]. */
const outerBytes = (rows: number) => rows * 64 * 4 + rows * 8 * 16;

function outerTileRows(ctx: Context): 32 | 64 {
  if (lowRankTuning.tileRows) return lowRankTuning.tileRows;
  return (ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384) >= outerBytes(64) ? 64 : 32;
}

/** Chunks of `tiles` tiles such that `blocks * chunks` is about `lowRankTuning.workgroups`. */
function chunking(tiles: number, blocks: number): { per: number; parts: number } {
  const want = Math.max(1, Math.min(tiles, Math.round(lowRankTuning.workgroups / blocks)));
  const per = Math.ceil(tiles / want);
  return { per, parts: Math.ceil(tiles / per) };
}

const probeCode = () => (lowRankTuning.probe === 'no-sum' ? 1 : lowRankTuning.probe === 'no-load' ? 2 : 0);

/** `pair_<name>(o) -> vec2f`: elements o and o + 1 (o even) of a read binding in one load where the storage packs
 *  them in one word (f16: `unpack2x16float`), else two reads. */
function pairReader(name: string, dtype: DType): string {
  if (dtype === 'f16') return `fn pair_${name}(o: u32) -> vec2f { return unpack2x16float(${name}[o >> 1u]); }\n`;
  return `fn pair_${name}(o: u32) -> vec2f { return vec2f(read_${name}(o), read_${name}(o + 1u)); }\n`;
}

const rowsOf = (t: DeviceTensor) => t.shape.slice(0, -1).reduce((a, d) => a * d, 1);
const last = (t: DeviceTensor) => t.shape[t.shape.length - 1]!;

/** Fill the //@ lines of lowrank-rows (straight-line accumulators for rank R; R itself comes in as `consts`). */
function unrolled(src: string, R: number, hooks: Record<string, (i: number) => string>, n: number, guard?: (i: number) => string | null): string {
  const body = src.replace(/^(\s*)\/\/@(\w+)$/gm, (_, ind: string, k: string) => {
    const make = hooks[k as keyof typeof hooks];
    if (!make) throw new Error(`lowrank: unknown hook //@${k}`);
    return Array.from({ length: n }, (_, i) => {
      const line = make(i);
      const g = k === 'decl' ? null : guard?.(i);
      return ind + (g ? `if (${g}) { ${line} }` : line);
    }).join('\n');
  });
  return body;
}

/** lowrank-rows for rank R: thread column group cg owns columns cg + 4 i. */
function rowsCode(R: number): string {
  const n = Math.ceil(R / 4);
  return unrolled(rowsWgsl, R, {
    decl: (i) => `var a_${i} = 0.0;`,
    fma: (i) => `a_${i} += xv * ws[(cg + ${4 * i}u) * (TK + 1u) + kk];`,
    store: (i) => `part[o + ${4 * i}u] = a_${i};`,
  }, n, (i) => (4 * i + 3 >= R ? `cg + ${4 * i}u < R` : null));
}

function checkR(r: number, what: string): void {
  if (!Number.isInteger(r) || r < 1 || r > LOWRANK_MAX_R) throw new ShapeError(`${what}: rank ${r} must be 1..${LOWRANK_MAX_R}`);
}

/** The rank R of a factor W (2-D: `[R, n]` when `rankFirst`, else `[n, R]`) whose long side must equal the size n of
 *  the operand named in `side` (`[tensor, name, n, dim]`). */
function factorRank(op: string, w: DeviceTensor, rankFirst: boolean, layout: string, side: [DeviceTensor, string, number, string]): number {
  const [a, aName, n, dim] = side;
  if (w.shape.length !== 2) throw new ShapeError(`${op}: W must be 2-D, got ${fmtShape(w.shape)}`);
  const [R, wn] = rankFirst ? [w.shape[0]!, w.shape[1]!] : [w.shape[1]!, w.shape[0]!];
  if (wn !== n) throw new ShapeError(`${op}: ${aName} ${fmtShape(a.shape)} and W ${fmtShape(w.shape)} (${layout}) differ in ${dim}`);
  checkR(R, op);
  return R;
}

/** Options of {@link lowRankProject}. */
export interface LowRankProjectOptions {
  /** `'rk'` (default): W is `[R, K]` (LoRA's A: `x A^T`); `'kr'`: W is `[K, R]` (LoRA's B: `dY B`). */
  wLayout?: 'rk' | 'kr';
  /** Multiplies the product (not the accumulated C). Default 1. */
  alpha?: number;
  /** Add into `out` instead of overwriting it; needs `out`. */
  accumulate?: boolean;
  /** Write into this f32 `[rows, R]` tensor. */
  out?: DeviceTensor;
}

/**
 * `C = alpha * X W^T` (W `[R, K]`) or `alpha * X W` (W `[K, R]`) for a small rank R (<= {@link LOWRANK_MAX_R}):
 * X is `[..., K]` (any float dtype, rows flattened), C is f32 `[rows, R]`. One pass over X in 64-row blocks and K
 * chunks that fill the GPU, then an in-order sum of the chunks (deterministic): the LoRA products `x A^T` and
 * `dY B`, which a tiled matmul runs on a handful of workgroups. Reference: `matmul`.
 */
export function lowRankProject(ctx: Context, x: DeviceTensor, w: DeviceTensor, opts: LowRankProjectOptions = {}): DeviceTensor {
  assertFloat(x, 'lowRankProject: X');
  assertFloat(w, 'lowRankProject: W');
  const layout = opts.wLayout ?? 'rk';
  const K = last(x);
  const T = rowsOf(x);
  const R = factorRank('lowRankProject', w, layout === 'rk', layout, [x, 'X', K, 'K']);
  if (opts.accumulate && !opts.out) throw new ShapeError('lowRankProject: accumulate needs out');
  if (opts.out) checkOut(opts.out, [T, R], 'lowRankProject: out', 'f32', [x, w]);
  checkBindable(ctx, 'lowRankProject', [x, 'X']);
  const nt = Math.ceil(T / 64);
  // K chunks (multiples of 32) so that ~512 workgroups share the work, each at least 32 wide
  const S = Math.max(1, Math.min(Math.ceil(K / 32), Math.ceil(512 / nt)));
  const kchunk = Math.ceil(K / S / 32) * 32;
  const parts = Math.ceil(K / kchunk);
  const part = empty(ctx, [parts, T, R]);
  const k = cachedKernel(ctx, `core:lowrank-rows:${R}:${x.dtype}:${w.dtype}`, () => ({
    name: 'lowrank-rows',
    code: rowsCode(R),
    consts: { R },
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'w', access: 'read', dtype: w.dtype },
      { name: 'part', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:T', 'u32:K', 'u32:wt', 'u32:kchunk', 'u32:nt', 'u32:row'],
  }));
  const wg = grid2d(nt * parts);
  ctx.dispatch(k, [x.buffer, w.buffer, part.buffer], wg, [T, K, layout === 'kr' ? 1 : 0, kchunk, nt, wg[0]]);
  const out = opts.out ?? empty(ctx, [T, R]);
  finish(ctx, part, out, T, R, parts, false, opts);
  return out;
}

/** `out = alpha * sum_s part[s] (+ out)`, stored `[Q, R]` or transposed `[R, Q]`; releases `part`. */
function finish(ctx: Context, part: DeviceTensor, out: DeviceTensor, Q: number, R: number, parts: number, transposed: boolean, opts: { alpha?: number; accumulate?: boolean }): void {
  const k = cachedKernel(ctx, `core:lowrank-outer-finish:${R}`, () => ({
    name: 'lowrank-finish',
    code: finishWgsl,
    consts: { R },
    bindings: [
      { name: 'part', access: 'read', dtype: 'f32' },
      { name: 'c', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:Q', 'u32:S', 'u32:ct', 'u32:acc', 'u32:row', 'f32:alpha'],
  }));
  const g = grid1d(Q * R, 256);
  ctx.dispatch(k, [part.buffer, out.buffer], g.wg, [Q, parts, transposed ? 1 : 0, opts.accumulate ? 1 : 0, g.row, opts.alpha ?? 1]);
  ctx.release(part.buffer);
}

/** Options of {@link lowRankOuter}. */
export interface LowRankOuterOptions {
  /** `'qr'` (default): C is `[Q, R]` (LoRA's dB = dY^T u); `'rq'`: C is `[R, Q]` (LoRA's dA = v^T x). */
  outLayout?: 'qr' | 'rq';
  /** Multiplies the sum (not the accumulated C). Default 1. */
  alpha?: number;
  /** Add into `out` instead of overwriting it; needs `out`. */
  accumulate?: boolean;
  /** Write into this f32 tensor (`[Q, R]` or `[R, Q]`). */
  out?: DeviceTensor;
}

/**
 * `C = alpha * Y^T Z` summed over the rows t of Y `[..., Q]` and Z `[..., R]` (rows flattened, same count; any
 * float dtypes), for a small R (<= {@link LOWRANK_MAX_R}): the LoRA weight gradients `dB = dY^T u` and
 * `dA = v^T x` (`outLayout: 'rq'`). One pass over Y split into row chunks that fill the GPU, then a pass that sums
 * the chunks in order (deterministic). Reference: `matmul` with `transA`.
 */
export function lowRankOuter(ctx: Context, y: DeviceTensor, z: DeviceTensor, opts: LowRankOuterOptions = {}): DeviceTensor {
  assertFloat(y, 'lowRankOuter: Y');
  assertFloat(z, 'lowRankOuter: Z');
  const T = rowsOf(y);
  const Q = last(y);
  const R = last(z);
  if (rowsOf(z) !== T) throw new ShapeError(`lowRankOuter: Y ${fmtShape(y.shape)} and Z ${fmtShape(z.shape)} differ in rows`);
  checkR(R, 'lowRankOuter');
  const layout = opts.outLayout ?? 'qr';
  const shape = layout === 'qr' ? [Q, R] : [R, Q];
  if (opts.accumulate && !opts.out) throw new ShapeError('lowRankOuter: accumulate needs out');
  if (opts.out) checkOut(opts.out, shape, 'lowRankOuter: out', 'f32', [y, z]);
  checkBindable(ctx, 'lowRankOuter', [y, 'Y']);
  const TT = outerTileRows(ctx);
  const nq = Math.ceil(Q / 64);
  const { per, parts } = chunking(Math.ceil(T / TT), nq);
  const part = empty(ctx, [parts, Q, R]);
  const probe = probeCode();
  const k = cachedKernel(ctx, `core:lowrank-outer:${R}:${TT}:${y.dtype}:${z.dtype}:${probe}`, () => ({
    name: 'lowrank-outer',
    code: pairReader('y', y.dtype) + outerWgsl,
    consts: { R, RV: Math.ceil(R / 4), TT, PROBE: probe },
    bindings: [
      { name: 'y', access: 'read', dtype: y.dtype },
      { name: 'z', access: 'read', dtype: z.dtype },
      { name: 'part', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:T', 'u32:Q', 'u32:tiles', 'u32:nq', 'u32:row'],
  }));
  const wg = grid2d(nq * parts);
  ctx.dispatch(k, [y.buffer, z.buffer, part.buffer], wg, [T, Q, per, nq, wg[0]]);
  const out = opts.out ?? empty(ctx, shape);
  finish(ctx, part, out, Q, R, parts, layout === 'rq', opts);
  return out;
}

/** Options of {@link lowRankUpdate}. */
export interface LowRankUpdateOptions {
  /** `'nr'` (default): W is `[N, R]` (LoRA's B: `y += s u B^T`); `'rn'`: W is `[R, N]` (LoRA's A: `dx += s v A`). */
  wLayout?: 'nr' | 'rn';
  /** Multiplies the product. Default 1. */
  alpha?: number;
}

/**
 * `Y += alpha * U W^T` (W `[N, R]`) or `Y += alpha * U W` (W `[R, N]`) in place, for a small rank R (<=
 * {@link LOWRANK_MAX_R}): Y is f32 `[..., N]` (rows flattened), U `[rows, R]` and W any float dtype. LoRA's update
 * added into the base product: one read and one write of Y. Reference: `matmul` with `accumulate`.
 */
export function lowRankUpdate(ctx: Context, y: DeviceTensor, u: DeviceTensor, w: DeviceTensor, opts: LowRankUpdateOptions = {}): DeviceTensor {
  assertFloat(u, 'lowRankUpdate: U');
  assertFloat(w, 'lowRankUpdate: W');
  if (y.dtype !== 'f32') throw new ShapeError(`lowRankUpdate: Y must be f32, got ${y.dtype}`);
  const layout = opts.wLayout ?? 'nr';
  const T = rowsOf(y);
  const N = last(y);
  const R = factorRank('lowRankUpdate', w, layout === 'rn', layout, [y, 'Y', N, 'N']);
  if (rowsOf(u) !== T || last(u) !== R) throw new ShapeError(`lowRankUpdate: U ${fmtShape(u.shape)} must be [${T}, ${R}] for Y ${fmtShape(y.shape)}`);
  checkBindable(ctx, 'lowRankUpdate', [y, 'Y']);
  const k = cachedKernel(ctx, `core:lowrank-update:${R}:${u.dtype}:${w.dtype}`, () => ({
    name: 'lowrank-update',
    code: updateWgsl,
    consts: { R, RV: Math.ceil(R / 4) },
    bindings: [
      { name: 'y', access: 'rw', dtype: 'f32' },
      { name: 'u', access: 'read', dtype: u.dtype },
      { name: 'w', access: 'read', dtype: w.dtype },
    ],
    params: ['u32:T', 'u32:N', 'u32:wt', 'u32:nb', 'u32:row', 'f32:alpha'],
  }));
  const nb = Math.ceil(N / 256);
  const wg = grid2d(nb * Math.ceil(T / 32));
  ctx.dispatch(k, [y.buffer, u.buffer, w.buffer], wg, [T, N, layout === 'rn' ? 1 : 0, nb, wg[0], opts.alpha ?? 1]);
  return y;
}
