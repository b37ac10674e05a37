/**
 * Exact f32 products on f16 tensor cores for frozen f32 matrices. A weight loaded from a bf16 or f16 checkpoint
 * holds, in f32, values that are f16 values times one power of two (bf16's 8 significant bits fit f16's 11; the
 * power of two brings its range into f16's). `prepareF16Images` checks that on the GPU, weight by weight, and keeps
 * the f16 image of each weight that passes (2 bytes per element). A product `op(A) @ op(B)` with such a B and an
 * f32 A not transposed (`matmul` looks the image up) then runs as:
 * 1. A split row by row into f16 planes (`shaders/matmul-rows-split.wgsl`): 3 planes hold every bit of each f32
 *    element near its row's maximum (precision 'highest'), 2 planes 22 bits (precision 'high');
 * 2. one f16 x f16 product of the stacked planes and the image (tensor cores where the adapter has them), over K
 *    in chunks of at most `maxChunkK` as a batch: every plane-times-image product is exact in f32 and sums in f32
 *    accumulators;
 * 3. the parts (chunks x planes) added and unscaled (`shaders/matmul-planes-sum.wgsl`), with alpha, bias and
 *    accumulate.
 * Nothing is rounded but the f32 sums: against float64 the error is 1-2x the portable FMA kernels' (the tensor
 * cores' accumulation is coarser; docs/PERFORMANCE.md, the GPU check list), at tensor-core speed. Weights that are
 * not exact (trained in f32) keep the portable kernels; an f16 B needs no image (it is its own, e = 0). An image
 * is dropped when its weight's buffer is written or released (`ctx.watchWrites`), so a stale image is never read.
 * The Trainer prepares the frozen f32 matrices of a run and releases the images at its end.
 */
import imageWgsl from '../../../../../shaders/matmul-f16-image.wgsl';
import rowsWgsl from '../../../../../shaders/matmul-rows-split.wgsl';
import sumWgsl from '../../../../../shaders/matmul-planes-sum.wgsl';
import round16Wgsl from '../../../../../shaders/round-f16.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { grid1d, grid2d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { abs } from './elementwise';
import { contextTcPlan } from './matmul-tc';
import { reduce } from './reduce';

/** The f16 image of a frozen f32 matrix: `img` holds f16(w * 2^e) for every element, exactly. */
export interface F16Image {
  /** f16 elements, the weight's shape and layout. */
  readonly img: DeviceTensor;
  /** The image is the weight times 2^e. */
  readonly e: number;
}

interface Entry extends F16Image {
  shape: readonly number[];
  unwatch: () => void;
}

const images = new WeakMap<Context, Map<GpuBuffer, Entry>>();

/**
 * Tuning of the image path (a benchmark or test may change it): products with fewer rows (M), columns (N) or
 * inner dim (K) than these keep the portable kernels (the k / v projections of a 1.1B Llama, N or K of 256,
 * measured faster there on an H100); sums over K longer than `maxChunkK` run in chunks (`imageChunks`); `anywhere`
 * also takes the path on adapters without tensor cores (tests: the plane product then runs on the portable f16
 * kernels, exact there too).
 */
export const f16ImageTuning = { minRows: 256, minCols: 512, minK: 512, maxChunkK: 4096, anywhere: false };

/**
 * The K chunks an image product of inner dim K is summed over: 1 up to `maxChunkK`, else the fewest (at most 64)
 * that divide K into chunks of at most `maxChunkK` (0: none, the product keeps the portable kernels). The tensor
 * cores' f32 accumulation adds error with the length of the sum (on an H100, 2026-11-24: about 2.5e-7 of
 * sum |a b| at K = 2048, 4e-7 at 5632 and 9.7e-7 at 32000, against 1-2.6e-7 for the portable FMA kernels); chunks
 * summed apart in f32 keep it at the short sums' level.
 */
export function imageChunks(K: number): number {
  const max = f16ImageTuning.maxChunkK;
  if (K <= max) return 1;
  for (let s = Math.ceil(K / max); s <= 64; s++) if (K % s === 0) return s;
  return 0;
}

/** The exponent e with 2^e max in [2^13, 2^14) (as `frexp`; 0 for 0, inf or NaN), clamped to +-126. */
export function imageExponent(max: number): number {
  if (!(max > 0) || !Number.isFinite(max)) return 0;
  const f = new Float32Array([max]);
  const bits = new Uint32Array(f.buffer)[0]!;
  let ex = ((bits >>> 23) & 255) - 126;
  if (ex === -126) ex = Math.floor(Math.log2(max)) + 1; // subnormal
  return Math.min(126, Math.max(-126, 14 - ex));
}

/**
 * Make and keep the f16 images of these f32 matrices (2-D, frozen: nothing should write them while the images are
 * in use; a write drops the image) where the values allow an exact one, and only where a product would take it (both
 * dims at least the smaller of `minCols` and `minK`). Two read-backs in all. Returns how many have an image now
 * (ones already prepared count); 0 at once on an adapter without tensor cores (unless `f16ImageTuning.anywhere`),
 * where no product would read them.
 */
export async function prepareF16Images(ctx: Context, weights: readonly DeviceTensor[]): Promise<number> {
  if (!f16ImageTuning.anywhere && !('frag' in contextTcPlan(ctx))) return 0;
  let reg = images.get(ctx);
  if (!reg) images.set(ctx, (reg = new Map()));
  const todo: DeviceTensor[] = [];
  let have = 0;
  // a product with B [N, K] or [K, N] takes an image only with N and K at least these: smaller weights never would
  const minDim = Math.min(f16ImageTuning.minCols, f16ImageTuning.minK);
  for (const w of weights) {
    if (w.dtype !== 'f32' || w.shape.length !== 2 || Math.min(...w.shape) < minDim || numel(w.shape) === 0 || w.buffer.released) continue;
    if (f16ImageOf(ctx, w)) have++;
    else if (numel(w.shape) * 4 <= ctx.maxBinding && !todo.some((t) => t.buffer === w.buffer)) todo.push(w);
  }
  if (!todo.length) return have;
  // watched from before the first read of each weight: a write while the images are made (across the awaits
  // below) marks the weight and its image is not kept
  const dirty = todo.map(() => false);
  const unwatch = todo.map((w, i) => ctx.watchWrites(w.buffer, () => {
    dirty[i] = true;
    drop(ctx, w.buffer);
  }));
  const maxima = empty(ctx, [todo.length]);
  todo.forEach((w, i) => {
    const a = abs(ctx, { ...w, shape: [numel(w.shape)] });
    const m = reduce(ctx, 'max', a, 0);
    ctx.copy(m.buffer, maxima.buffer, 4, 0, 4 * i);
    ctx.release(a.buffer);
    ctx.release(m.buffer);
  });
  const mx = new Float32Array(await ctx.read(maxima.buffer, 4 * todo.length));
  ctx.release(maxima.buffer);
  const k = cachedKernel(ctx, 'core:mm-f16-image', () => ({
    name: 'matmul_f16_image',
    code: round16Wgsl + imageWgsl,
    bindings: [
      { name: 'w', access: 'read', dtype: 'f32' },
      { name: 'img', access: 'rw', dtype: 'u32' },
      { name: 'bad', access: 'rw', dtype: 'u32', atomic: true },
    ],
    params: ['u32:n', 'u32:row', 'f32:s', 'f32:inv', 'u32:slot'],
  }));
  const bad = ctx.alloc(4 * todo.length);
  ctx.write(bad, new Uint32Array(todo.length));
  const made = todo.map((w, i) => {
    const n = numel(w.shape);
    const e = imageExponent(mx[i]!);
    const img = ctx.alloc(Math.ceil(n / 2) * 4);
    const { wg, row } = grid1d(Math.ceil(n / 2), 256);
    ctx.dispatch(k, [w.buffer, img, bad], wg, [n, row, 2 ** e, 2 ** -e, i]);
    return { img, e, ok: Number.isFinite(mx[i]!) };
  });
  const misses = new Uint32Array(await ctx.read(bad, 4 * todo.length));
  ctx.release(bad);
  todo.forEach((w, i) => {
    const m = made[i]!;
    if (!m.ok || misses[i] !== 0 || dirty[i] || w.buffer.released) {
      unwatch[i]!();
      return void ctx.release(m.img);
    }
    reg.set(w.buffer, { img: { buffer: m.img, dtype: 'f16', shape: [...w.shape] }, e: m.e, shape: [...w.shape], unwatch: unwatch[i]! });
    have++;
  });
  return have;
}

function drop(ctx: Context, buf: GpuBuffer): void {
  const reg = images.get(ctx);
  const e = reg?.get(buf);
  if (!e) return;
  reg!.delete(buf);
  e.unwatch();
  ctx.release(e.img.buffer);
}

/** Release every image of this context (the Trainer does at the end of a run). */
export function releaseF16Images(ctx: Context): void {
  const reg = images.get(ctx);
  if (!reg) return;
  for (const buf of [...reg.keys()]) drop(ctx, buf);
}

/** The image of `w` (same buffer and shape as prepared), if it has one. */
export function f16ImageOf(ctx: Context, w: DeviceTensor): F16Image | undefined {
  const e = images.get(ctx)?.get(w.buffer);
  if (!e || w.dtype !== 'f32' || e.shape.length !== w.shape.length || e.shape.some((d, i) => d !== w.shape[i])) return undefined;
  return e;
}

/** How many images this context holds, and their bytes. */
export function f16ImageStats(ctx: Context): { count: number; bytes: number } {
  let bytes = 0;
  const reg = images.get(ctx);
  for (const e of reg?.values() ?? []) bytes += e.img.buffer.size;
  return { count: reg?.size ?? 0, bytes };
}

/** Step 1: A [R, K] f32 (K even) as `P` f16 planes `[P * R, K]` and the row exponents (i32 [R]). */
export function splitRows(ctx: Context, a: DeviceTensor, R: number, K: number, P: 2 | 3): { planes: DeviceTensor; rexp: GpuBuffer } {
  const k = cachedKernel(ctx, 'core:mm-rows-split', () => ({
    name: 'matmul_rows_split',
    code: '@group(0) @binding(1) var<storage, read> x2: array<vec2f>;\n' + round16Wgsl + rowsWgsl,
    bindings: [
      { name: 'x', access: 'read', dtype: 'f32' },
      { name: 'planes', access: 'rw', dtype: 'u32' },
      { name: 'rexp', access: 'rw', dtype: 'i32' },
    ],
    params: ['u32:R', 'u32:K', 'u32:P'],
  }));
  const planes = ctx.alloc(P * R * K * 2);
  const rexp = ctx.alloc(4 * R);
  ctx.dispatch(k, [a.buffer, planes, rexp], grid2d(R), [R, K, P]);
  return { planes: { buffer: planes, dtype: 'f16', shape: [P * R, K] }, rexp };
}

/** Step 3: c = alpha * 2^-(e_r + eb) * (sum of the J parts [J, R, N] of `part`, in order) (+ bias) (+ c). */
export function sumPlanes(
  ctx: Context,
  part: DeviceTensor,
  rexp: GpuBuffer,
  c: DeviceTensor,
  R: number,
  N: number,
  J: number,
  eb: number,
  epi: { alpha: number; bias?: DeviceTensor; accumulate: boolean },
): void {
  const biasDtype: DType = epi.bias?.dtype ?? 'f32';
  const vec = N % 4 === 0;
  const k = cachedKernel(ctx, `core:mm-planes-sum:${biasDtype}:${+!!epi.bias}:${+epi.accumulate}:${+vec}`, () => ({
    name: 'matmul_planes_sum',
    code: '@group(0) @binding(1) var<storage, read> part4: array<vec4f>;\n@group(0) @binding(4) var<storage, read_write> c4: array<vec4f>;\n' + sumWgsl,
    entryPoint: vec ? 'main' : 'main1',
    bindings: [
      { name: 'part', access: 'read', dtype: 'f32' },
      { name: 'rexp', access: 'read', dtype: 'i32' },
      { name: 'bias', access: 'read', dtype: biasDtype },
      { name: 'c', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:n', 'u32:row', 'u32:N', 'u32:J', 'i32:eb', 'f32:alpha'],
    consts: { HAS_BIAS: !!epi.bias, ACCUM: epi.accumulate },
  }));
  const n = R * N;
  const { wg, row } = grid1d(vec ? n / 4 : n, 256);
  ctx.dispatch(k, [part.buffer, rexp, epi.bias?.buffer ?? part.buffer, c.buffer], wg, [n, row, N, J, eb, epi.alpha]);
}
