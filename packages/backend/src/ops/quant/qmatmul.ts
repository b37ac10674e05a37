import gemvWgsl from '../../../../../shaders/dequant-gemv.wgsl';
import matmulWgsl from '../../../../../shaders/dequant-matmul.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { cachedKernel } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { assertFloat, checkBinding, checkOut, fmtShape } from '../core/util';
import { FMT_ID, type QuantTensor } from './formats';
import { matmul } from '../core/matmul';
import { dequantize, describeQuant, quantPrelude, quantScales } from './quantize';
import { checkLimbs, gemvSubgroupsAvailable, gemvTakesLimbs, quantGemvSg } from './gemv';
import { qtcPlan, quantLinearTc, quantRowsOnTensorCores } from './qmatmul-tc';

/**
 * Which kernels run a quantized product: `tiled` (the fused kernel: W's tiles dequantized into workgroup
 * memory), `gemv` (decode, at most 16 rows), `dequant` (W dequantized to a temporary f16 matrix, then the
 * backend's `matmul`, tensor cores included where it has them: costs one layer's f16 weight in memory), `tc`
 * (the fused dequantize + tensor-core kernel of `qmatmul-tc.ts`: W's tiles dequantized into workgroup memory as
 * f16, X rounded to f16 (beyond +-65504 it becomes infinite, as under f16 autocast), products on subgroup
 * matrices with f32 accumulation; a ShapeError where the adapter has none, the other kernels while its WGSL is
 * being checked), or `auto` (`tc` for `qtcTuning`'s rows, 5-256, where the adapter has f16 subgroup matrices
 * and the kernel has been checked, else gemv for few rows, else {@link QUANT_MANY_ROWS}).
 */
export type QuantMatmulVariant = 'auto' | 'tiled' | 'gemv' | 'dequant' | 'tc';

/** Tuning knobs: `gemv` picks the decode kernel (`auto`: the subgroup GEMV of `gemv.ts` where the adapter has
 *  subgroups, else the portable `shaders/dequant-gemv.wgsl`; `portable`: always the latter); `manyRows` is what `auto` runs on GPUs for more than {@link QUANT_GEMV_MAX_ROWS} rows and for
 *  the backward (software adapters always take the fused `tiled` kernel). Chosen from quant-bench runs (see
 *  docs/PERFORMANCE.md). */
export const quantTuning: { manyRows: 'tiled' | 'dequant'; gemv: 'auto' | 'portable' } = { manyRows: 'dequant', gemv: 'auto' };

function quantManyRows(ctx: Context): 'tiled' | 'dequant' {
  return ctx.info.isSoftware ? 'tiled' : quantTuning.manyRows;
}

/** Rows at or below which `auto` picks the GEMV kernel. */
export const QUANT_GEMV_MAX_ROWS = 16;

/** Options of {@link quantLinear}. */
export interface QuantLinearOptions {
  /** Added to every row: [N], any float dtype. */
  bias?: DeviceTensor;
  /** Write into this f32 tensor of the result's shape. */
  out?: DeviceTensor;
  /** x as int8 limbs (`xLimbs`, or `rmsNorm`'s `limbs`): the subgroup GEMV multiplies on them where it takes
   *  them (`gemvTakesLimbs`: one row, int4), and reads x elsewhere. */
  xLimbs?: DeviceTensor;
  variant?: QuantMatmulVariant;
}

const rowsOf = (x: DeviceTensor) => numel(x.shape) / x.shape[x.shape.length - 1]!;
const flat = (x: DeviceTensor, M: number): DeviceTensor => ({ ...x, shape: [M, x.shape[x.shape.length - 1]!] });

/**
 * `y = x W^T (+ bias)` with a quantized weight W [N, K]: x is [..., K] (f32, f16 or bf16), the result a new f32
 * [..., N]. W's tiles are dequantized inside the kernel (workgroup memory for many rows; a bandwidth-bound GEMV
 * that reads each packed word once for 1-16 rows).
 */
export function quantLinear(ctx: Context, x: DeviceTensor, w: QuantTensor, opts: QuantLinearOptions = {}): DeviceTensor {
  assertFloat(x, 'quantLinear', 'x');
  const { N, K } = w.layout;
  if (x.shape.length < 1 || x.shape[x.shape.length - 1] !== K)
    throw new ShapeError(`quantLinear: input ${fmtShape(x.shape)} does not end in in_features ${K} of ${describeQuant(w)}`);
  if (opts.bias) {
    assertFloat(opts.bias, 'quantLinear', 'bias');
    if (numel(opts.bias.shape) !== N) throw new ShapeError(`quantLinear: bias ${fmtShape(opts.bias.shape)} does not match out_features ${N}`);
  }
  const M = rowsOf(x);
  const shape = [...x.shape.slice(0, -1), N];
  if (opts.out) checkOut(opts.out, shape, 'quantLinear', 'f32', [x]);
  const y = opts.out ?? empty(ctx, shape);
  checkBinding(ctx, x, 'quantLinear', 'x');
  checkBinding(ctx, y, 'quantLinear', 'y');
  if (M === 0) return y;
  let variant = opts.variant ?? 'auto';
  if (variant === 'tc' || (variant === 'auto' && quantRowsOnTensorCores(ctx, M))) {
    if (quantLinearTc(ctx, x, w, opts.bias, y, M)) return y;
    if (variant === 'tc') {
      const plan = qtcPlan(ctx);
      if (!('frag' in plan)) throw new ShapeError(`quantLinear: no f16 tensor cores here: ${plan.reason}`);
    }
    variant = 'auto'; // the kernel is being checked (or failed its check: qtcFailures): the other kernels meanwhile
  }
  if (variant === 'auto') variant = M <= QUANT_GEMV_MAX_ROWS ? 'gemv' : quantManyRows(ctx);
  if (variant === 'gemv' && M > QUANT_GEMV_MAX_ROWS)
    throw new ShapeError(`quantLinear: the gemv kernel takes at most ${QUANT_GEMV_MAX_ROWS} rows, got ${M}`);
  if (variant === 'dequant') {
    const wd = dequantize(ctx, w, 'f16');
    matmul(ctx, flat(x, M), wd, { transB: true, bias: opts.bias, out: { ...y, shape: [M, N] } });
    ctx.release(wd.buffer);
    return y;
  }
  if (variant === 'gemv' && quantTuning.gemv === 'auto' && gemvSubgroupsAvailable(ctx)) {
    const limbs = opts.xLimbs && gemvTakesLimbs(ctx, w, M) ? opts.xLimbs : undefined;
    if (limbs) checkLimbs(limbs, K, 'quantLinear');
    quantGemvSg(ctx, x, w, opts.bias, y, M, limbs); // double-quantized scales decoded in the kernel
    return y;
  }
  const { scales, owned } = quantScales(ctx, w);
  const bias = opts.bias ?? x;
  if (variant === 'gemv') gemv(ctx, x, w, scales, bias, !!opts.bias, y, M);
  else tiled(ctx, x, w, scales, bias, !!opts.bias, y, M, false);
  if (owned) ctx.release(scales.buffer);
  return y;
}

/**
 * The gradient of {@link quantLinear} with respect to its input: `dX [..., K] = dY [..., N] W`, through the same
 * fused dequantizing kernel (the frozen quantized weight needs no gradient). Returns a new f32 tensor.
 */
export function quantLinearBackward(ctx: Context, dy: DeviceTensor, w: QuantTensor, out?: DeviceTensor, variant: 'auto' | 'tiled' | 'dequant' = 'auto'): DeviceTensor {
  assertFloat(dy, 'quantLinearBackward', 'dy');
  const { N, K } = w.layout;
  if (dy.shape.length < 1 || dy.shape[dy.shape.length - 1] !== N)
    throw new ShapeError(`quantLinearBackward: gradient ${fmtShape(dy.shape)} does not end in out_features ${N} of ${describeQuant(w)}`);
  const shape = [...dy.shape.slice(0, -1), K];
  if (out) checkOut(out, shape, 'quantLinearBackward', 'f32', [dy]);
  const dx = out ?? empty(ctx, shape);
  checkBinding(ctx, dy, 'quantLinearBackward', 'dy');
  checkBinding(ctx, dx, 'quantLinearBackward', 'dx');
  const M = rowsOf(dy);
  if (M === 0) return dx;
  if ((variant === 'auto' ? quantManyRows(ctx) : variant) === 'dequant') {
    const wd = dequantize(ctx, w, 'f16');
    matmul(ctx, flat(dy, M), wd, { out: { ...dx, shape: [M, K] } });
    ctx.release(wd.buffer);
    return dx;
  }
  const { scales, owned } = quantScales(ctx, w);
  tiled(ctx, dy, w, scales, dy, false, dx, M, true);
  if (owned) ctx.release(scales.buffer);
  return dx;
}

function tiled(ctx: Context, x: DeviceTensor, w: QuantTensor, s: DeviceTensor, bias: DeviceTensor, hasBias: boolean, y: DeviceTensor, M: number, bwd: boolean): void {
  const { N, K, G, nb, wpr } = w.layout;
  const constants = { FMT: FMT_ID[w.spec.format], BWD: +bwd, HAS_BIAS: +hasBias, DYN: +ctx.info.isSoftware };
  const key = `dequant-matmul:${x.dtype}:${s.dtype}:${bias.dtype}:${Object.values(constants).join('')}`;
  const k = cachedKernel(ctx, key, () => ({
    name: 'dequant-matmul',
    code: quantPrelude() + matmulWgsl,
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: s.dtype },
      { name: 'bias', access: 'read', dtype: bias.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:M', 'u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:wpr', 'u32:one'],
    constants,
  }));
  const P = bwd ? K : N;
  const gx = Math.ceil(P / 64);
  const gy = Math.ceil(M / 64);
  if (gx > 65535 || gy > 65535) throw new ShapeError(`quantLinear: ${M} rows x ${P} outputs need more workgroups than one dispatch takes`);
  ctx.dispatch(k, [x.buffer, w.data.buffer, s.buffer, bias.buffer, y.buffer], [gx, gy, 1], [M, N, K, G, nb, wpr, 1]);
}

function gemv(ctx: Context, x: DeviceTensor, w: QuantTensor, s: DeviceTensor, bias: DeviceTensor, hasBias: boolean, y: DeviceTensor, M: number): void {
  const { N, K, G, nb, wpr } = w.layout;
  const vec = x.dtype === 'f32' && K % 4 === 0 && K === w.layout.Kp && wpr % 4 === 0;
  const constants = { FMT: FMT_ID[w.spec.format], HAS_BIAS: +hasBias, DYN: +ctx.info.isSoftware };
  const key = `dequant-gemv:${x.dtype}:${s.dtype}:${bias.dtype}:${Object.values(constants).join('')}:${+vec}:${M}`;
  const k = cachedKernel(ctx, key, () => ({
    name: 'dequant-gemv',
    code: `const MR: u32 = ${M}u;\n` + quantPrelude() + gemvWgsl,
    entryPoint: vec ? 'main_vec' : 'main',
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: s.dtype },
      { name: 'bias', access: 'read', dtype: bias.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:M', 'u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:wpr', 'u32:gx', 'u32:one'],
    constants,
  }));
  const gy = Math.ceil(N / 65535);
  const gx = Math.ceil(N / gy);
  ctx.dispatch(k, [x.buffer, w.data.buffer, s.buffer, bias.buffer, y.buffer], [gx, gy, 1], [M, N, K, G, nb, wpr, gx, 1]);
}
