import rmsnormWgsl from '../../../../../shaders/rmsnorm.wgsl';
import rmsnormBwdWgsl from '../../../../../shaders/rmsnorm-backward.wgsl';
import rmsnormDwWgsl from '../../../../../shaders/rmsnorm-dw.wgsl';
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import {
  bindUnits,
  checkBindable,
  checkFloat,
  checkOut,
  elemBytes,
  fmt,
  grid,
  llmKernel,
  maxWorkgroup,
  reduceCode,
  rowChunks,
  rowShape,
  sameShape,
  vecFor,
  vecPrelude,
} from './common';
import { LIMB_GROUP, limbWords, xLimbsAvailable, xLimbsWriteCode } from '../quant/x-limbs';

/** Options of {@link rmsNorm} and {@link addRmsNorm}. */
export interface RmsNormOptions {
  /** Added to the mean square before the reciprocal square root (HF `rms_norm_eps`). Default 1e-6. */
  eps?: number;
  /** Added to every weight in f32 before it scales: `y = x * rstd * (w + weightOffset)`. Default 0; Gemma's
   *  RMSNorm (`* (1.0 + weight.float())`) is 1. Pass the same value to the backward. */
  weightOffset?: number;
  /** f32 output tensor of x's shape to write instead of allocating one. */
  out?: DeviceTensor;
  /** f32 [rows] tensor for the saved reciprocal RMS. */
  rstdOut?: DeviceTensor;
  /** ({@link addRmsNorm}) f32 tensor of x's shape for the sum x + residual. */
  sumOut?: DeviceTensor;
  /** Also write y as int8 limbs (`limbs` of the result, u32 [rows, 7 D / 8]; layout in ops/quant/x-limbs.ts),
   *  the input of the integer int4 GEMV, in the same dispatch, on more threads per row (a one-row decoding step's
   *  norm: 4 values per thread, which measured faster on an H100 than the 16 of the plain norm, so y is the plain
   *  norm's to f32 rounding). D must be a multiple of 16 and the adapter must have `packed_4x8_integer_dot_product`
   *  and subgroups (`xLimbsAvailable`). */
  limbs?: boolean;
}

/** Output of {@link rmsNorm}: the normalised tensor and the per-row 1/rms saved for the backward. */
export interface RmsNormResult {
  /** f32, x's shape. */
  y: DeviceTensor;
  /** f32 [rows] (rows = numel(x) / D): 1 / sqrt(mean(x^2) + eps). */
  rstd: DeviceTensor;
  /** With {@link RmsNormOptions.limbs}: y as int8 limbs, u32 [rows, 7 D / 8]. */
  limbs?: DeviceTensor;
}

function rowsOf(op: string, x: DeviceTensor, w: DeviceTensor): { rows: number; d: number } {
  checkFloat(x, `${op}: x`);
  checkFloat(w, `${op}: weight`);
  if (x.shape.length < 1) throw new ShapeError(`${op}: x must have at least one dimension, got ${fmt(x.shape)}`);
  const d = x.shape[x.shape.length - 1]!;
  if (w.shape.length !== 1 || w.shape[0] !== d)
    throw new ShapeError(`${op}: weight ${fmt(w.shape)} does not match the last dimension of x ${fmt(x.shape)} (expected [${d}])`);
  if (d === 0) throw new ShapeError(`${op}: x ${fmt(x.shape)} has an empty last dimension`);
  return { rows: numel(x.shape) / d, d };
}

function weightOffset(op: string, v: number | undefined): number {
  if (v === undefined) return 0;
  if (!Number.isFinite(v)) throw new ConfigError(`${op}: weightOffset must be a finite number, got ${v}`);
  return v;
}

function forward(
  ctx: Context,
  x: DeviceTensor,
  r: DeviceTensor | null,
  w: DeviceTensor,
  opts: RmsNormOptions,
): RmsNormResult & { sum?: DeviceTensor } {
  const op = r ? 'addRmsNorm' : 'rmsNorm';
  const { rows, d } = rowsOf(op, x, w);
  const woff = weightOffset(op, opts.weightOffset);
  if (r) {
    checkFloat(r, `${op}: residual`);
    if (!sameShape(r.shape, x.shape)) throw new ShapeError(`${op}: residual ${fmt(r.shape)} does not match x ${fmt(x.shape)}`);
  }
  const y = opts.out ?? empty(ctx, x.shape);
  if (opts.out) checkOut(opts.out, x.shape, `${op}: out`);
  const rstd = opts.rstdOut ?? empty(ctx, [rows]);
  if (opts.rstdOut) checkOut(opts.rstdOut, [rows], `${op}: rstdOut`);
  let sum: DeviceTensor | undefined;
  if (r) {
    sum = opts.sumOut ?? empty(ctx, x.shape);
    if (opts.sumOut) checkOut(opts.sumOut, x.shape, `${op}: sumOut`);
  }
  let limbs: DeviceTensor | undefined;
  if (opts.limbs) {
    if (d % LIMB_GROUP) throw new ShapeError(`${op}: limbs need a last dimension that is a multiple of ${LIMB_GROUP}, got ${fmt(x.shape)}`);
    if (!xLimbsAvailable(ctx)) throw new ConfigError(`${op}: limbs need packed_4x8_integer_dot_product, which the adapter lacks`);
    limbs = empty(ctx, [...x.shape.slice(0, -1), limbWords(d)], 'u32');
  }
  checkBindable(ctx, op, [w, 'weight']);
  if (rows === 0) return { y, rstd, sum, ...(limbs ? { limbs } : {}) };
  const parts: [DeviceTensor, number, string][] = [[x, d * elemBytes(x), 'x'], [y, d * 4, 'out'], [rstd, 4, 'rstd']];
  if (r) parts.push([r, d * elemBytes(r), 'residual'], [sum!, d * 4, 'sum']);
  if (limbs) parts.push([limbs, limbWords(d) * 4, 'limbs']);
  const plan = rowChunks(ctx, op, rows, parts);
  const vec = vecFor(d, r ? [x.dtype, r.dtype, w.dtype] : [x.dtype, w.dtype]);
  const { wg, nv } = rowShape(ctx, d / vec, opts.limbs ? 'rmsnorm_limbs' : 'rmsnorm');
  const red = reduceCode(ctx);
  const key = `rmsnorm:${r ? 'add' : 'plain'}:wg${wg}:nv${nv}:v${vec}:${red.tag}:${x.dtype}${r ? r.dtype : ''}${w.dtype}${limbs ? ':limbs' : ''}`;
  // thread t turns units t, t + WG, ... of the row into limbs (read back from y; every thread in every round, for
  // the quad operations); where the row is held in registers (nv > 0) the rounds are a constant count, and all
  // their loads come before the first store
  const rounds = Math.ceil((Math.max(nv, 1) * vec) / 4);
  const limbsCode = !limbs
    ? ''
    : nv > 0
      ? `storageBarrier();\n  var lv: array<vec4f, ${rounds}>;\n` +
        `  for (var lr = 0u; lr < ${rounds}u; lr++) { let i = lr * WG + t; lv[lr] = load_limbs(base, i, i < p.D / 4u); }\n` +
        `  for (var lr = 0u; lr < ${rounds}u; lr++) { let i = lr * WG + t; store_limbs(lv[lr], row, i, p.D, i < p.D / 4u); }`
      : 'storageBarrier();\n  for (var u0 = 0u; u0 < p.D / 4u; u0 += WG) { write_limbs(base, row, u0 + t, p.D, u0 + t < p.D / 4u); }';
  const k = llmKernel(ctx, key, () => {
    const reads: [string, DType | 'rw'][] = [['x', x.dtype], ['w', w.dtype]];
    if (r) reads.push(['r', r.dtype], ['s', 'rw']);
    const helpers = r
      ? 'fn load_in(e: u32) -> V { return ld_x(e) + ld_r(e); }\n' +
        'fn keep_sum(e: u32, v: V) { st_s(e, v); }\n' +
        'fn load_again(e: u32) -> V { return ld_s(e); }\n'
      : 'fn load_in(e: u32) -> V { return ld_x(e); }\n' +
        'fn keep_sum(e: u32, v: V) { }\n' +
        'fn load_again(e: u32) -> V { return ld_x(e); }\n';
    return {
      code:
        vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1) }, vec, reads, r ? ['y', 's'] : ['y']) +
        red.code +
        helpers +
        rmsnormWgsl.replace('//@limbs', limbsCode) +
        (limbs ? 'fn limb_src(e: u32) -> f32 { return y[e]; }\n' + xLimbsWriteCode : ''),
      enables: limbs ? [...new Set([...red.enables, 'subgroups'])] : red.enables,
      bindings: [
        { name: 'x', access: 'read', dtype: x.dtype },
        ...(r ? [{ name: 'r', access: 'read' as const, dtype: r.dtype }] : []),
        { name: 'w', access: 'read', dtype: w.dtype },
        { name: 'y', access: 'rw', dtype: 'f32' },
        ...(r ? [{ name: 's', access: 'rw' as const, dtype: 'f32' as const }] : []),
        { name: 'rstd', access: 'rw', dtype: 'f32' },
        ...(limbs ? [{ name: 'xl', access: 'rw' as const, dtype: 'u32' as const }] : []),
      ],
      params: ['u32:rows', 'u32:D', 'f32:eps', 'f32:woff'],
    };
  });
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    const bx = b(x, d * elemBytes(x));
    const by = b(y, d * 4);
    const brs = b(rstd, 4);
    const bufs = r ? [bx, b(r, d * elemBytes(r)), w.buffer, by, b(sum!, d * 4), brs] : [bx, w.buffer, by, brs];
    if (limbs) bufs.push(b(limbs, limbWords(d) * 4));
    ctx.dispatch(k, bufs, grid(r1 - r0), [r1 - r0, d, opts.eps ?? 1e-6, woff]);
  }
  return { y, rstd, sum, ...(limbs ? { limbs } : {}) };
}

/**
 * RMSNorm over the last dimension, as HF's `LlamaRMSNorm` computes it in f32:
 * `y = x * rsqrt(mean(x^2, -1) + eps) * w` (with `weightOffset` 1: `* (1 + w)`, HF `Gemma3RMSNorm`). `x` [..., D] and `w` [D] may be f32, f16 or bf16; `y` is f32 (HF
 * rounds the normalised value to the input dtype before the weight; here it stays f32). Also returns
 * `rstd` [rows] for {@link rmsNormBackward}. One workgroup per row; rows up to 32 values per thread (D up to
 * 32768 f32 or 65536 16-bit) are read once and held in registers, longer rows are read twice. Tensors larger
 * than one storage binding are processed in row chunks (here and in the backward).
 */
export function rmsNorm(ctx: Context, x: DeviceTensor, w: DeviceTensor, opts: RmsNormOptions = {}): RmsNormResult {
  const { y, rstd, limbs } = forward(ctx, x, null, w, opts);
  return { y, rstd, ...(limbs ? { limbs } : {}) };
}

/**
 * Fused residual add and RMSNorm in one pass: `sum = x + residual` (f32, written) and `y = rmsNorm(sum, w)`.
 * The backward is {@link rmsNormBackward} on `sum` with `residualGrad` set to the gradient that reaches `sum`
 * from its other uses; its `dx` is then the gradient of both `x` and `residual`.
 */
export function addRmsNorm(
  ctx: Context,
  x: DeviceTensor,
  residual: DeviceTensor,
  w: DeviceTensor,
  opts: RmsNormOptions = {},
): RmsNormResult & { sum: DeviceTensor } {
  const { y, rstd, sum, limbs } = forward(ctx, x, residual, w, opts);
  return { y, rstd, sum: sum!, ...(limbs ? { limbs } : {}) };
}

/** Options of {@link rmsNormBackward}. */
export interface RmsNormBackwardOptions {
  /** Gradient reaching the normalised input from elsewhere (the fused residual form): added to dx. */
  residualGrad?: DeviceTensor;
  /** f32 output for dx (x's shape). */
  dxOut?: DeviceTensor;
  /** f32 [D] output for dw. */
  dwOut?: DeviceTensor;
  /** The forward's {@link RmsNormOptions.weightOffset} (default 0): dx uses `w + weightOffset`. */
  weightOffset?: number;
}

/**
 * Backward of {@link addRmsNorm}: `dy` is the gradient of `y`, `sumGrad` the gradient reaching `sum` from its
 * other uses (the residual stream), if any. Returns `dsum` (the gradient of both `x` and `residual`) and `dw`.
 */
export function addRmsNormBackward(
  ctx: Context,
  dy: DeviceTensor,
  sum: DeviceTensor,
  w: DeviceTensor,
  rstd: DeviceTensor,
  opts: { sumGrad?: DeviceTensor; dsumOut?: DeviceTensor; dwOut?: DeviceTensor; weightOffset?: number } = {},
): { dsum: DeviceTensor; dw: DeviceTensor } {
  const { dx, dw } = rmsNormBackward(ctx, dy, sum, w, rstd, {
    residualGrad: opts.sumGrad,
    dxOut: opts.dsumOut,
    dwOut: opts.dwOut,
    weightOffset: opts.weightOffset,
  });
  return { dsum: dx, dw };
}

/** Chunk rows for the dw partial sums: at most 512 chunks of at least 4 rows (fixed by `rows` alone, so the
 *  summation order, and the result, do not depend on the device). */
export function rmsNormChunks(rows: number): { rpc: number; chunks: number } {
  const rpc = Math.max(4, Math.ceil(rows / 512));
  return { rpc, chunks: Math.ceil(rows / rpc) };
}

/**
 * Backward of {@link rmsNorm}: given `dy` and the forward's `x`, `w` and `rstd`, returns
 * `dx = rstd * (dy*w' - x * rstd^2 * mean(dy*w'*x))` (+ `residualGrad`; `w' = w + weightOffset`) and
 * `dw = sum over rows of dy * x * rstd`, both f32. dw is summed deterministically: per-chunk partial sums (one workgroup per chunk of rows, rows in
 * order) and a second pass adding the chunks in a fixed order; no atomics.
 */
export function rmsNormBackward(
  ctx: Context,
  dy: DeviceTensor,
  x: DeviceTensor,
  w: DeviceTensor,
  rstd: DeviceTensor,
  opts: RmsNormBackwardOptions = {},
): { dx: DeviceTensor; dw: DeviceTensor } {
  const op = 'rmsNormBackward';
  const { rows, d } = rowsOf(op, x, w);
  const woff = weightOffset(op, opts.weightOffset);
  checkFloat(dy, `${op}: dy`);
  if (!sameShape(dy.shape, x.shape)) throw new ShapeError(`${op}: dy ${fmt(dy.shape)} does not match x ${fmt(x.shape)}`);
  if (rstd.dtype !== 'f32' || !sameShape(rstd.shape, [rows]))
    throw new ShapeError(`${op}: rstd must be f32[${rows}] for x ${fmt(x.shape)}, got ${rstd.dtype}${fmt(rstd.shape)}`);
  const res = opts.residualGrad;
  if (res) {
    checkFloat(res, `${op}: residualGrad`);
    if (!sameShape(res.shape, x.shape)) throw new ShapeError(`${op}: residualGrad ${fmt(res.shape)} does not match x ${fmt(x.shape)}`);
  }
  const dx = opts.dxOut ?? empty(ctx, x.shape);
  if (opts.dxOut) checkOut(opts.dxOut, x.shape, `${op}: dxOut`);
  const dw = opts.dwOut ?? empty(ctx, [d]);
  if (opts.dwOut) checkOut(opts.dwOut, [d], `${op}: dwOut`);
  const { rpc, chunks } = rmsNormChunks(Math.max(rows, 1));
  const dwp = empty(ctx, [chunks, d]);
  checkBindable(ctx, op, [w, 'weight'], [dwp, 'dw partial sums']);
  // chunks of whole dw-partial-sum chunks (rpc rows each), so every partial sum is taken in one dispatch
  const rowB = (t: DeviceTensor) => rpc * d * elemBytes(t);
  const parts: [DeviceTensor, number, string][] = [
    [dy, rowB(dy), 'dy'],
    [x, rowB(x), 'x'],
    [dx, rpc * d * 4, 'dx'],
    [rstd, rpc * 4, 'rstd'],
    [dwp, d * 4, 'dw partial sums'],
  ];
  if (res) parts.push([res, rowB(res), 'residualGrad']);
  const plan = rowChunks(ctx, op, chunks, parts, `${rpc}-row group`);
  const vec = vecFor(d, [dy.dtype, x.dtype, w.dtype, ...(res ? [res.dtype] : [])]);
  const { wg, nv } = rowShape(ctx, d / vec, 'rmsnorm_bwd');
  const red = reduceCode(ctx);
  const key = `rmsnorm_bwd:wg${wg}:nv${nv}:v${vec}:${red.tag}:${dy.dtype}${x.dtype}${w.dtype}${res ? res.dtype : '-'}`;
  const k = llmKernel(ctx, key, () => {
    const reads: [string, DType | 'rw'][] = [['dy', dy.dtype], ['x', x.dtype], ['w', w.dtype], ['dwp', 'rw']];
    if (res) reads.push(['dres', res.dtype]);
    return {
      code:
        vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1) }, vec, reads, ['dx', 'dwp']) +
        red.code +
        (res ? 'fn add_res(e: u32) -> V { return ld_dres(e); }\n' : 'fn add_res(e: u32) -> V { return V(0.0); }\n') +
        rmsnormBwdWgsl,
      enables: red.enables,
      bindings: [
        { name: 'dy', access: 'read', dtype: dy.dtype },
        { name: 'x', access: 'read', dtype: x.dtype },
        { name: 'w', access: 'read', dtype: w.dtype },
        { name: 'rstd', access: 'read', dtype: 'f32' },
        ...(res ? [{ name: 'dres', access: 'read' as const, dtype: res.dtype }] : []),
        { name: 'dx', access: 'rw', dtype: 'f32' },
        { name: 'dwp', access: 'rw', dtype: 'f32' },
      ],
      params: ['u32:rows', 'u32:D', 'u32:rpc', 'f32:woff'],
    };
  });
  if (rows > 0) {
    for (const [c0, c1] of plan.ranges) {
      const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, c0, c1);
      const bufs = [b(dy, rowB(dy)), b(x, rowB(x)), w.buffer, b(rstd, rpc * 4), ...(res ? [b(res, rowB(res))] : [])];
      bufs.push(b(dx, rpc * d * 4), b(dwp, d * 4));
      const nr = Math.min(c1 * rpc, rows) - c0 * rpc;
      ctx.dispatch(k, bufs, grid(c1 - c0), [nr, d, rpc, woff]);
    }
  }
  const dwg = Math.min(1024, maxWorkgroup(ctx));
  const kr = llmKernel(ctx, `rmsnorm_dw:wg${dwg}`, () => ({
    code: `const WG: u32 = ${dwg}u;\n` + rmsnormDwWgsl,
    bindings: [
      { name: 'dwp', access: 'read', dtype: 'f32' },
      { name: 'dw', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:chunks', 'u32:D'],
  }));
  ctx.dispatch(kr, [dwp.buffer, dw.buffer], Math.ceil(d / 32), [rows > 0 ? chunks : 0, d]);
  ctx.release(dwp.buffer);
  return { dx, dw };
}
