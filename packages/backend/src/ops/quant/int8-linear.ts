/**
 * The int8 x int8 inference path: `y = x W^T (+ bias)` with an int8 weight that has one scale per output row
 * (`quantSpec('int8', 0)`), the activations quantized per row on the fly (`quantizeRowsI8`: int8 codes + one f32
 * scale per row), the product summed exactly in i32, then `f32(sum) * sx[m] * sw[n]` in the epilogue.
 *
 * Where the adapter offers an i8 x i8 -> i32 subgroup-matrix configuration (NVIDIA through Vulkan: 16x16x32) the
 * product can run on tensor cores (`shaders/quant-i8-matmul-tc.wgsl`, fragment shape from the adapter's
 * configuration, never a constant): `path: 'tc'`, or `auto` (`i8Tuning.autoTensorCores`, on). Everywhere
 * else, and while that kernel's WGSL is being checked (`checkedKernel`), the portable
 * `shaders/quant-i8-matmul.wgsl` (dot4I8Packed) runs. Both compute the same numbers: exact integer sums, the
 * same epilogue.
 */
import rowsWgsl from '../../../../../shaders/quant-rows-i8.wgsl';
import mmWgsl from '../../../../../shaders/quant-i8-matmul.wgsl';
import tcWgsl from '../../../../../shaders/quant-i8-matmul-tc.wgsl';
import type { Context, ContextInfo, SubgroupMatrixConfig } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import type { KernelDef } from '../../kernel';
import { cachedKernel, checkedKernel, kernelFailures, kernelsReady } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { assertFloat, checkBinding, checkOut, fmtShape } from '../core/util';
import type { QuantTensor } from './formats';
import { describeQuant } from './quantize';

/** Largest K whose i32 sums cannot overflow (127 * 127 * K < 2^31). */
export const I8_MAX_K = 131072;

/** Activations quantized to int8, one scale per row. */
export interface RowsI8 {
  /** u32 [M, ceil(K / 4)]: four int8 codes per word (the int8 weight layout). */
  codes: DeviceTensor;
  /** f32 [M]: absmax / 127 of each row (0 for a zero row). */
  scales: DeviceTensor;
  M: number;
  K: number;
}

/** Quantize the rows of x [..., K] (any float dtype) to int8 with one f32 scale per row, on the GPU (into `out`'s
 *  tensors when given: u32 [M, ceil(K / 4)] and f32 [M]). */
export function quantizeRowsI8(ctx: Context, x: DeviceTensor, out?: { codes: DeviceTensor; scales: DeviceTensor }): RowsI8 {
  assertFloat(x, 'quantizeRowsI8', 'x');
  const K = x.shape[x.shape.length - 1] ?? 0;
  if (x.shape.length < 1 || K < 1) throw new ShapeError(`quantizeRowsI8: input ${fmtShape(x.shape)} needs a last dimension of at least 1`);
  const M = numel(x.shape) / K;
  const wpr = Math.ceil(K / 4);
  if (out) {
    checkOut(out.codes, [M, wpr], 'quantizeRowsI8', 'u32');
    checkOut(out.scales, [M], 'quantizeRowsI8', 'f32');
  }
  const codes = out?.codes ?? empty(ctx, [M, wpr], 'u32');
  const scales = out?.scales ?? empty(ctx, [M], 'f32');
  checkBinding(ctx, x, 'quantizeRowsI8', 'x');
  checkBinding(ctx, codes, 'quantizeRowsI8', 'codes');
  if (M === 0) return { codes, scales, M, K };
  const k = cachedKernel(ctx, `quant-rows-i8:${x.dtype}`, () => ({
    name: 'quant-rows-i8',
    code: rowsWgsl,
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'rw', dtype: 'u32' },
      { name: 's', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:M', 'u32:K', 'u32:wpr', 'u32:gx'],
  }));
  const gy = Math.ceil(M / 65535);
  const gx = Math.ceil(M / gy);
  ctx.dispatch(k, [x.buffer, codes.buffer, scales.buffer], [gx, gy, 1], [M, K, wpr, gx]);
  return { codes, scales, M, K };
}

/** A workgroup tile of the int8 tensor-core kernel: BM x BN of Y over SGM x SGN subgroups, BK int8 elements of K
 *  per step. */
export interface I8Tile {
  bm: number;
  bn: number;
  bk: number;
  sgm: number;
  sgn: number;
}

/** Tiles of the int8 tensor-core kernel (first: `auto`'s choice for big products; the last for small ones). */
export const I8_TILES = {
  t128x128k64: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 4 },
  t128x256k32: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4 },
  t64x64k64: { bm: 64, bn: 64, bk: 64, sgm: 2, sgn: 2 },
} as const satisfies Record<string, I8Tile>;
export type I8TileName = keyof typeof I8_TILES;

/** Tuning of `auto` (a benchmark may change it): the big and small tile, the tile count below which the small one
 *  runs, and `unit`: the bytes one unit of a fragment load's offset and stride counts. Dawn's subgroup-matrix
 *  document says int8 offsets count int8 elements (1), but its SPIR-V lowering passes them on as indices into the
 *  i32 array (4), and on an H200 (2026-11-24) byte offsets gave wrong products: 4 is the default, the GPU check list
 *  proved it (docs/PERFORMANCE.md). `autoTensorCores`: whether `auto` takes the tensor-core kernel, on since the GPU
 *  check list passed with `unit` 4 on an H100 (2026-11-24, `quant-gpu.sh`: 19 cases, 14 on tensor
 *  cores, every product equal to the portable kernel's; t128x256k32 326.6 TOPS, t128x128k64 309.1). */
export const i8Tuning: { big: I8TileName; small: I8TileName; minBigTiles: number; unit: 1 | 4; autoTensorCores: boolean } = {
  big: 't128x256k32',
  small: 't64x64k64',
  minBigTiles: 132,
  unit: 4,
  autoTensorCores: true,
};

/** The int8 tensor-core plan of an adapter: its i8 -> i32 fragment and fixed subgroup size, or why not. */
export function int8TcPlan(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes'>): { frag: SubgroupMatrixConfig; subgroupSize: number } | { reason: string } {
  if (!info.features.subgroupMatrix) return { reason: 'the adapter has no chromium-experimental-subgroup-matrix' };
  const cands = info.subgroupMatrixConfigs.filter((c) => c.componentType === 'i8' && c.resultComponentType === 'i32');
  if (!cands.length) return { reason: 'no i8 -> i32 subgroup-matrix configuration' };
  const { min, max } = info.subgroupSizes;
  if (!(min > 0 && min === max)) return { reason: `the subgroup size is not fixed (${min}..${max})` };
  const frag = [...cands].sort((x, y) => y.M * y.N - x.M * x.N || y.K - x.K)[0]!;
  return { frag, subgroupSize: max };
}
type I8Plan = { frag: SubgroupMatrixConfig; subgroupSize: number };

/** Why a tile does not fit this fragment and device, or null when it does. */
export function i8TileProblem(t: I8Tile, plan: I8Plan, limits: Record<string, number>): string | null {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const wm = t.bm / t.sgm;
  const wn = t.bn / t.sgn;
  if (!Number.isInteger(wm) || wm % SM) return `BM ${t.bm} / SGM ${t.sgm} is not a multiple of the fragment's M ${SM}`;
  if (!Number.isInteger(wn) || wn % SN) return `BN ${t.bn} / SGN ${t.sgn} is not a multiple of the fragment's N ${SN}`;
  if (t.bk % SK || t.bk % 16) return `BK ${t.bk} is not a multiple of the fragment's K ${SK} and of 16`;
  const threads = t.sgm * t.sgn * plan.subgroupSize;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = (t.bm + t.bn) * (t.bk + 16) + 4 * t.sgm * t.sgn * SM * SN;
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** The WGSL of the int8 tensor-core kernel for a fragment and tile: constants, aliases and the unrolled
 *  accumulators, fragment loads, multiply-accumulates and epilogue in `shaders/quant-i8-matmul-tc.wgsl`. */
export function i8TcSource(plan: I8Plan, t: I8Tile, vec: boolean, hasBias: boolean, unit: 1 | 4 = i8Tuning.unit): string {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  const pre =
    c('SM', SM) + c('SN', SN) + c('SK', SK) + c('SG', plan.subgroupSize) + c('SGM', t.sgm) + c('SGN', t.sgn) + c('FM', fm) + c('FN', fn) +
    c('BM', t.bm) + c('BN', t.bn) + c('BK', t.bk) + c('ST', t.bk + 16) + c('UNIT', unit) +
    `const HAS_BIAS: bool = ${hasBias};\n` +
    (vec ? '@group(0) @binding(1) var<storage, read> a4: array<vec4u>;\n@group(0) @binding(2) var<storage, read> b4: array<vec4u>;\n' : '') +
    ldCode('a', 'M', vec) +
    ldCode('b', 'N', vec) +
    // subgroup_matrix_left<T, K, M> is M x K; right<T, N, K> is K x N; result<T, N, M> is M x N
    `alias Lm = subgroup_matrix_left<i8, ${SK}, ${SM}>;\nalias Rm = subgroup_matrix_right<i8, ${SN}, ${SK}>;\nalias Acc = subgroup_matrix_result<i32, ${SN}, ${SM}>;\n`;
  const I = [...Array(fm).keys()];
  const J = [...Array(fn).keys()];
  const IJ = I.flatMap((i) => J.map((j) => [i, j] as const));
  const code: Record<string, string> = {
    acc: IJ.map(([i, j]) => `var acc_${i}_${j}: Acc;`).join('\n  '),
    mma: [
      ...I.map((i) => `let l_${i} = load_l(wm0 + ${i}u * SM, kk);`),
      ...J.map((j) => `let r_${j} = load_r(wn0 + ${j}u * SN, kk);`),
      ...IJ.map(([i, j]) => `acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l_${i}, r_${j}, acc_${i}_${j});`),
    ].join('\n      '),
    epilogue: IJ.map(
      ([i, j]) => `subgroupMatrixStore<row_major>(&Cs, cs, acc_${i}_${j}, SN);\n  workgroupBarrier();\n  copy_out(${i}u, ${j}u, cs, lane, m0, n0, wm0, wn0);\n  workgroupBarrier();`,
    ).join('\n  '),
  };
  // the portable kernel's a / b declarations stay unused where VEC re-declares them
  return pre + tcWgsl.replace(/^(\s*)\/\/@(acc|mma|epilogue)$/gm, (_, ind: string, k: string) => ind + code[k]);
}

/** `ld_<x>(r, w)`: 16 bytes of row r of x [rows, wpr] from word w, zeros past the row or the matrix (a and a4
 *  cannot both be used by one entry point, so only one form is emitted). */
function ldCode(x: 'a' | 'b', rows: 'M' | 'N', vec: boolean): string {
  const body = vec
    ? `return ${x}4[(r * p.wpr + w) >> 2u];`
    : `let o = r * p.wpr + w;\n  return vec4u(${x}[o], ${[1, 2, 3].map((i) => `select(0u, ${x}[o + ${i}u], w + ${i}u < p.wpr)`).join(', ')});`;
  return `fn ld_${x}(r: u32, w: u32) -> vec4u {\n  if (r >= p.${rows} || w >= p.wpr) { return vec4u(0u); }\n  ${body}\n}\n`;
}

/** WGSL extensions of the int8 tensor-core kernel. */
export const I8_TC_ENABLES = ['subgroups', 'chromium_experimental_subgroup_matrix'];

const BINDINGS = (biasDtype: DeviceTensor['dtype']): KernelDef['bindings'] => [
  { name: 'a', access: 'read', dtype: 'u32' },
  { name: 'b', access: 'read', dtype: 'u32' },
  { name: 'sa', access: 'read', dtype: 'f32' },
  { name: 'sb', access: 'read', dtype: 'f32' },
  { name: 'bias', access: 'read', dtype: biasDtype },
  { name: 'y', access: 'rw', dtype: 'f32' },
];

/** The kernel definition of the int8 tensor-core kernel (bindings, params, enables) around its WGSL. */
export function i8TcKernelDef(code: string, biasDtype: DeviceTensor['dtype'] = 'f32'): Omit<KernelDef, 'name'> {
  return { code, bindings: BINDINGS(biasDtype), params: ['u32:M', 'u32:N', 'u32:wpr'], enables: I8_TC_ENABLES };
}

/** Which kernel runs the int8 product: `auto` (tensor cores where the adapter has them, the kernel has been
 *  checked and `i8Tuning.autoTensorCores` is on, else portable), `tc` (tensor cores or a ShapeError), `portable`. */
export type I8Path = 'auto' | 'tc' | 'portable';

/** Options of {@link int8Matmul} and {@link int8Linear}. */
export interface Int8MatmulOptions {
  /** Added to every row: [N], any float dtype. */
  bias?: DeviceTensor;
  /** Write into this f32 tensor of the result's shape. */
  out?: DeviceTensor;
  path?: I8Path;
  /** Force a tensor-core tile (tests, benchmarks). */
  tile?: I8Tile;
}

const plans = new WeakMap<Context, ReturnType<typeof int8TcPlan>>();
/** The context's int8 tensor-core plan (memoised). */
export function contextI8Plan(ctx: Context): ReturnType<typeof int8TcPlan> {
  let p = plans.get(ctx);
  if (!p) plans.set(ctx, (p = int8TcPlan(ctx.info)));
  return p;
}

/** The kernel that ran (or would run) the last {@link int8Matmul} of a context: for tests and benchmarks. */
export const lastI8Kernel = new WeakMap<Context, string>();

/**
 * `y [M, N] = f32(A B^T) * sa[m] * sb[n] (+ bias)` for int8 rows A (`quantizeRowsI8`) and an int8 weight with
 * one scale per output row. Exact i32 sums; tensor cores where the adapter has them (see the module comment).
 */
export function int8Matmul(ctx: Context, a: RowsI8, w: QuantTensor, opts: Int8MatmulOptions = {}): DeviceTensor {
  const { N, K, wpr } = w.layout;
  if (w.spec.format !== 'int8' || w.spec.groupSize !== 0)
    throw new ConfigError(`int8Matmul: the weight must be int8 with one scale per row (groupSize 0), got ${describeQuant(w)}`);
  if (a.K !== K) throw new ShapeError(`int8Matmul: activations [${a.M}, ${a.K}] do not match in_features ${K} of ${describeQuant(w)}`);
  if (K > I8_MAX_K) throw new ShapeError(`int8Matmul: K ${K} exceeds ${I8_MAX_K} (i32 sums could overflow)`);
  const M = a.M;
  if (opts.out) checkOut(opts.out, [M, N], 'int8Matmul', 'f32');
  const y = opts.out ?? empty(ctx, [M, N]);
  checkBinding(ctx, w.data, 'int8Matmul', 'weight');
  checkBinding(ctx, y, 'int8Matmul', 'y');
  if (M === 0) return y;
  const bias = opts.bias ?? a.scales;
  const path = opts.path ?? 'auto';
  const plan = contextI8Plan(ctx);
  const bufs = [a.codes.buffer, w.data.buffer, a.scales.buffer, w.scales.buffer, bias.buffer, y.buffer];
  if ((path === 'tc' || (path === 'auto' && i8Tuning.autoTensorCores)) && 'frag' in plan) {
    let t: I8Tile = opts.tile ?? I8_TILES[i8Tuning.small];
    if (!opts.tile) {
      const big = I8_TILES[i8Tuning.big];
      if (Math.ceil(M / big.bm) * Math.ceil(N / big.bn) >= i8Tuning.minBigTiles && !i8TileProblem(big, plan, ctx.info.limits)) t = big;
    }
    const why = i8TileProblem(t, plan, ctx.info.limits);
    if (why) throw new ShapeError(`int8Matmul: tensor-core tile ${JSON.stringify(t)}: ${why}`);
    const vec = wpr % 4 === 0;
    const name = `quant-i8-matmul-tc-${t.bm}x${t.bn}x${t.bk}-${t.sgm}x${t.sgn}`;
    const key = `qi8tc:${name}:${+vec}:${+!!opts.bias}:${bias.dtype}:${i8Tuning.unit}`;
    const k = checkedKernel(ctx, key, () => ({ name, ...i8TcKernelDef(i8TcSource(plan, t, vec, !!opts.bias), bias.dtype) }));
    if (k) {
      const gx = Math.ceil(N / t.bn);
      const gy = Math.ceil(M / t.bm);
      if (gx > 65535 || gy > 65535) throw new ShapeError(`int8Matmul: ${gy} x ${gx} workgroup tiles are more than one dispatch takes`);
      ctx.dispatch(k, bufs, [gx, gy, 1], [M, N, wpr]);
      lastI8Kernel.set(ctx, name);
      return y;
    }
    if (path === 'tc') {
      const err = kernelFailures(ctx).get(key);
      throw new ShapeError(`int8Matmul: the tensor-core kernel is ${err ? `not usable (${err.message.split('\n')[0]})` : 'not ready (being checked: await i8TensorCoresReady(ctx))'}`);
    }
  } else if (path === 'tc') throw new ShapeError(`int8Matmul: no int8 tensor cores here: ${(plan as { reason: string }).reason}`);
  const k = cachedKernel(ctx, `quant-i8-matmul:${bias.dtype}:${+!!opts.bias}`, () => ({
    name: 'quant-i8-matmul',
    code: mmWgsl,
    bindings: BINDINGS(bias.dtype),
    params: ['u32:M', 'u32:N', 'u32:wpr'],
    constants: { HAS_BIAS: +!!opts.bias },
  }));
  const gx = Math.ceil(N / 64);
  const gy = Math.ceil(M / 64);
  if (gx > 65535 || gy > 65535) throw new ShapeError(`int8Matmul: ${M} x ${N} needs more workgroups than one dispatch takes`);
  ctx.dispatch(k, bufs, [gx, gy, 1], [M, N, wpr]);
  lastI8Kernel.set(ctx, 'quant-i8-matmul');
  return y;
}

/** Wait until every int8 tensor-core kernel requested so far has been checked (and built). */
export const i8TensorCoresReady = kernelsReady;

/** Int8 tensor-core kernels whose check failed on this context (cache key -> error). */
export function i8TcFailures(ctx: Context): Map<string, Error> {
  return new Map([...kernelFailures(ctx)].filter(([k]) => k.startsWith('qi8tc:')));
}

/**
 * `y = x W^T (+ bias)` through int8 x int8: x [..., K] (any float dtype) quantized per row on the fly, W an int8
 * weight with one scale per output row; a new f32 [..., N] (or `out`). Tensor cores where the adapter has them.
 */
export function int8Linear(ctx: Context, x: DeviceTensor, w: QuantTensor, opts: Int8MatmulOptions = {}): DeviceTensor {
  assertFloat(x, 'int8Linear', 'x');
  const { N, K } = w.layout;
  if (x.shape.length < 1 || x.shape[x.shape.length - 1] !== K)
    throw new ShapeError(`int8Linear: input ${fmtShape(x.shape)} does not end in in_features ${K} of ${describeQuant(w)}`);
  if (opts.bias) {
    assertFloat(opts.bias, 'int8Linear', 'bias');
    if (numel(opts.bias.shape) !== N) throw new ShapeError(`int8Linear: bias ${fmtShape(opts.bias.shape)} does not match out_features ${N}`);
  }
  const shape = [...x.shape.slice(0, -1), N];
  if (opts.out) checkOut(opts.out, shape, 'int8Linear', 'f32', [x]);
  const y = opts.out ?? empty(ctx, shape);
  const a = quantizeRowsI8(ctx, x);
  int8Matmul(ctx, a, w, { ...opts, out: { ...y, shape: [a.M, N] } });
  ctx.release(a.codes.buffer);
  ctx.release(a.scales.buffer);
  return y;
}
