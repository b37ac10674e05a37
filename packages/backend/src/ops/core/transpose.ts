import copyWgsl from '../../../../../shaders/transpose-copy.wgsl';
import tiledWgsl from '../../../../../shaders/transpose-tiled.wgsl';
import reg16Wgsl from '../../../../../shaders/transpose-reg16.wgsl';
import gatherWgsl from '../../../../../shaders/transpose.wgsl';
import type { Context } from '../../context';
import { floatNames, isFloat, isHalf, storageBytes, type DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { formatOf } from '../../format';
import { ioBindings, wgslPacker } from '../../kernel';
import { dispatch1d, grid1d } from '../../grid';
import { checkShape, empty, numel, type DeviceTensor } from '../../tensor';
import { assertFloat, cachedKernel, checkOut, coalesce, contiguousStrides, fmtShape, MAX_RANK, normAxis, padRank } from './util';

/** Options of the copies and transposes. */
export interface CopyOptions {
  /** Output storage dtype (f32, f16 or bf16); default: the input's. 16-bit outputs round to nearest even. */
  dtype?: DType;
  /** Write into this tensor (of the result's shape and dtype). It must not be the input. */
  out?: DeviceTensor;
}

const GATHER_PARAMS = [
  'u32:n',
  'u32:row',
  'u32:off',
  ...[0, 1, 2, 3, 4, 5].map((i) => `u32:d${i}` as const),
  ...[0, 1, 2, 3, 4, 5].map((i) => `u32:s${i}` as const),
] as const;

/**
 * Materialise a strided view of `x` contiguously: output element at coordinates `c` (row-major over `shape`) is
 * `x[offset + sum_k c[k] * strides[k]]` (strides and offset in elements of `x`). This is how permutations,
 * slices and broadcasts (stride 0) become contiguous tensors. Batched 2-D transposes of the last two axes with
 * an f32 output, or a 16-bit one from the same dtype with both dims multiples of 8, take a tiled kernel;
 * everything else a gather over at most 6 dims (after merging dims).
 */
export function stridedCopy(
  ctx: Context,
  x: DeviceTensor,
  shape: readonly number[],
  strides: readonly number[],
  offset = 0,
  opts: CopyOptions = {},
): DeviceTensor {
  assertFloat(x, 'stridedCopy');
  checkShape(shape);
  if (strides.length !== shape.length)
    throw new ShapeError(`stridedCopy: ${strides.length} strides for shape ${fmtShape(shape)}`);
  const dtype = opts.dtype ?? x.dtype;
  if (!isFloat(dtype)) throw new ShapeError(`stridedCopy: output dtype ${dtype} is not ${floatNames()}`);
  const y = opts.out ?? empty(ctx, shape, dtype);
  if (opts.out) checkOut(opts.out, shape, 'stridedCopy', dtype, [x]);
  const n = numel(shape);
  if (n === 0) return y;
  // the view must stay inside x
  let hi = offset;
  for (let i = 0; i < shape.length; i++) {
    if (strides[i]! < 0 || !Number.isInteger(strides[i]!)) throw new ShapeError(`stridedCopy: stride ${strides[i]} is not a non-negative integer`);
    hi += (shape[i]! - 1) * strides[i]!;
  }
  if (offset < 0 || hi >= numel(x.shape))
    throw new ShapeError(
      `stridedCopy: view ${fmtShape(shape)} strides ${fmtShape(strides)} offset ${offset} reads past the ${numel(x.shape)} elements of ${fmtShape(x.shape)}`,
    );
  const c = coalesce(shape, [strides]);
  const d = c.dims;
  const s = c.strides[0]!;
  // batched 2-D transpose of contiguous [B, R, C] -> [B, C, R]
  const half = isHalf(dtype) && dtype === x.dtype;
  if ((dtype === 'f32' || half) && offset === 0) {
    let t: [number, number, number] | null = null;
    if (d.length === 2 && s[0] === 1 && s[1] === d[0]) t = [1, d[1]!, d[0]!];
    if (d.length === 3 && s[1] === 1 && s[2] === d[1] && s[0] === d[1]! * d[2]!) t = [d[0]!, d[2]!, d[1]!];
    if (t && (dtype === 'f32' || (t[1] % 8 === 0 && t[2] % 8 === 0))) {
      tiledTranspose(ctx, x, y, ...t);
      return y;
    }
  }
  if (d.length > MAX_RANK)
    throw new ShapeError(`stridedCopy: view ${fmtShape(shape)} strides ${fmtShape(strides)} needs ${d.length} dims; at most ${MAX_RANK} are supported`);
  const pr = padRank(d, [s]);
  const k = cachedKernel(ctx, `gather:${d.length}:${dtype}:${x.dtype}`, () => ({
    name: 'transpose',
    code: wgslPacker('y', dtype) + gatherWgsl,
    bindings: ioBindings(x.dtype, 'u32'),
    params: GATHER_PARAMS,
    consts: { RANK: d.length },
  }));
  dispatch1d(ctx, k, [x.buffer, y.buffer], n, [offset, ...pr.dims, ...pr.strides[0]!], Math.ceil(n / formatOf(dtype).perWord));
  return y;
}

/** Tiled transposes: into f32 (shaders/transpose-tiled.wgsl: 32 x 32 tiles, any input dtype), or 16-bit into the
 *  same dtype with R and C multiples of 8 (shaders/transpose-reg16.wgsl: each thread an 8 x 8 block in registers,
 *  256 x 64 tiles. Two 4096 x 4096 f16 transposes in 62.6 us on an H100 (2026-12-07), against 63.5-68.3 for a kernel
 *  through workgroup memory with packed row pairs and 93.1 for one with an element per workgroup word: both deleted,
 *  docs/PERFORMANCE.md has the table). */
function tiledTranspose(ctx: Context, x: DeviceTensor, y: DeviceTensor, B: number, R: number, C: number): void {
  if (y.dtype !== 'f32') {
    const gx = Math.ceil(C / 64);
    const gy = Math.ceil(R / 256);
    if (gx > 65535 || gy > 65535) throw new ShapeError(`transpose: a ${R} x ${C} matrix is too large for one dispatch`);
    for (let z = 0; z < B; z += 65535) ctx.dispatch(reg16Kernel(ctx, false), [x.buffer, y.buffer], [gx, gy, Math.min(65535, B - z)], [R, C, z, 0, 0, gy]);
    return;
  }
  const k = cachedKernel(ctx, `transpose-tiled:${x.dtype}`, () => ({
    name: 'transpose-tiled',
    code: tiledWgsl,
    bindings: ioBindings(x.dtype),
    params: ['u32:R', 'u32:C', 'u32:zoff'],
  }));
  const gx = Math.ceil(C / 32);
  const gy = Math.ceil(R / 32);
  if (gx > 65535 || gy > 65535) throw new ShapeError(`transpose: a ${R} x ${C} matrix is too large for one dispatch`);
  for (let z = 0; z < B; z += 65535) ctx.dispatch(k, [x.buffer, y.buffer], [gx, gy, Math.min(65535, B - z)], [R, C, z]);
}

/** shaders/transpose-reg16.wgsl, single (x, y) or pair form (x, y, x2, y2). */
function reg16Kernel(ctx: Context, pair: boolean) {
  const names = pair ? ['x', 'y', 'x2', 'y2'] : ['x', 'y'];
  const view = (n: string, i: number) => `@group(0) @binding(${i + 1}) var<storage, ${i % 2 ? 'read_write' : 'read'}> ${n}4: array<vec4u>;\n`;
  const pick = (a: string, b: string) => (pair ? `if (m == 0u) { ${a} } else { ${b} }` : a);
  return cachedKernel(ctx, `transpose-reg16:${pair ? 2 : 1}`, () => ({
    name: 'transpose-reg16',
    code:
      names.map(view).join('') +
      `fn ld(m: u32, i: u32) -> vec4u { ${pick('return x4[i];', 'return x24[i];')} }\n` +
      `fn st(m: u32, i: u32, v: vec4u) { ${pick('y4[i] = v;', 'y24[i] = v;')} }\n` +
      reg16Wgsl,
    bindings: names.map((name, i) => ({ name, access: i % 2 ? ('rw' as const) : ('read' as const), dtype: 'u32' as DType })),
    params: ['u32:R', 'u32:C', 'u32:zoff', 'u32:R2', 'u32:C2', 'u32:gy1'],
  }));
}

/**
 * Two 16-bit 2-D transposes in one dispatch (x W^T through TN transposes both operands): new contiguous [C, R]
 * tensors of `a` and `b` ([R, C] each, R and C multiples of 8, f16 or bf16). Saves the second dispatch's ramp and
 * drain.
 */
export function transposePair16(ctx: Context, a: DeviceTensor, b: DeviceTensor): [DeviceTensor, DeviceTensor] {
  for (const x of [a, b]) {
    if (x.shape.length !== 2 || x.shape[0]! % 8 || x.shape[1]! % 8 || !isHalf(x.dtype))
      throw new ShapeError(`transposePair16: ${fmtShape(x.shape)} ${x.dtype} is not a 2-D f16 / bf16 matrix with dims multiples of 8`);
  }
  const [R, C] = a.shape as [number, number];
  const [R2, C2] = b.shape as [number, number];
  const ya = empty(ctx, [C, R], a.dtype);
  const yb = empty(ctx, [C2, R2], b.dtype);
  const gx = Math.ceil(Math.max(C, C2) / 64);
  const gy1 = Math.ceil(R / 256);
  const gy = gy1 + Math.ceil(R2 / 256);
  if (gx > 65535 || gy > 65535) throw new ShapeError(`transposePair16: ${fmtShape(a.shape)} and ${fmtShape(b.shape)} are too large for one dispatch`);
  if (R * C && R2 * C2) ctx.dispatch(reg16Kernel(ctx, true), [a.buffer, ya.buffer, b.buffer, yb.buffer], [gx, gy, 1], [R, C, 0, R2, C2, gy1]);
  else for (const [x, y] of [[a, ya], [b, yb]] as const) if (numel(x.shape)) tiledTranspose(ctx, x, y, 1, x.shape[0]!, x.shape[1]!);
  return [ya, yb];
}

/** Permute the axes of `x` into a new contiguous tensor: `y.shape[i] = x.shape[perm[i]]` (like `torch.permute`). */
export function permute(ctx: Context, x: DeviceTensor, perm: readonly number[], opts: CopyOptions = {}): DeviceTensor {
  const rank = x.shape.length;
  if (perm.length !== rank) throw new ShapeError(`permute: ${perm.length} axes given for ${fmtShape(x.shape)}`);
  const p = perm.map((a) => normAxis(a, rank, 'permute: axis'));
  if (new Set(p).size !== rank) throw new ShapeError(`permute: [${perm.join(', ')}] is not a permutation of ${rank} axes`);
  const st = contiguousStrides(x.shape);
  return stridedCopy(
    ctx,
    x,
    p.map((a) => x.shape[a]!),
    p.map((a) => st[a]!),
    0,
    opts,
  );
}

/** Swap two axes (default the last two) into a new contiguous tensor. */
export function transpose(ctx: Context, x: DeviceTensor, dim0 = -2, dim1 = -1, opts: CopyOptions = {}): DeviceTensor {
  const rank = x.shape.length;
  const p = [...Array(rank).keys()];
  const a = normAxis(dim0, rank, 'transpose: dim0');
  const b = normAxis(dim1, rank, 'transpose: dim1');
  [p[a], p[b]] = [p[b]!, p[a]!];
  return permute(ctx, x, p, opts);
}

/** vec4s each thread of `copy` moves (measured on an H200, see the package README). */
export const COPY_PER_THREAD = 2;

/** A contiguous copy of `x` with the same dtype and shape (a vec4 word-copy kernel, any dtype). `perThread`
 *  (vec4s per thread, default COPY_PER_THREAD) is a tuning knob for benchmarks. */
export function copy(ctx: Context, x: DeviceTensor, opts: { out?: DeviceTensor; perThread?: number } = {}): DeviceTensor {
  const y = opts.out ?? empty(ctx, x.shape, x.dtype);
  if (opts.out) checkOut(opts.out, x.shape, 'copy', x.dtype, [x]);
  const n4 = Math.ceil(storageBytes(x.dtype, numel(x.shape)) / 16);
  if (n4 === 0) return y;
  const per = opts.perThread ?? COPY_PER_THREAD;
  if (!(per >= 1 && per <= 8 && Number.isInteger(per))) throw new ShapeError(`copy: perThread ${per} is not an integer in 1..8`);
  const k = cachedKernel(ctx, `copy4:${per}`, () => ({
    name: 'transpose-copy',
    code: copyWgsl,
    bindings: ioBindings('u32', 'u32'),
    params: ['u32:n4', 'u32:row'],
    consts: { PER: per },
  }));
  const { wg, row } = grid1d(Math.ceil(n4 / per), 256);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [n4, row / 256]);
  return y;
}
