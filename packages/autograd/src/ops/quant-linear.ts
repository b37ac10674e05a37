import {
  cast,
  dequantize,
  matmul as mm,
  numel,
  QUANT_GEMV_MAX_ROWS,
  quantLinear as quantLinearKernel,
  quantLinearBackward,
  reduce,
  ShapeError,
  type Context,
  type DeviceTensor,
  type QuantTensor,
} from '@rusty/backend';
import { defineOp } from '../op';
import { computeDtype, type ComputeDtype } from './autocast';
import type { Tensor } from '../tensor';
import { fmt } from './util';

interface QuantLinearAttrs {
  /** The frozen quantized weight [out, in] (not a tensor input: it has no gradient). */
  w: QuantTensor;
  hasBias: boolean;
}

const flat2 = (t: DeviceTensor): DeviceTensor => ({ ...t, shape: [numel(t.shape) / t.shape[t.shape.length - 1]!, t.shape[t.shape.length - 1]!] });

const quantLinearOp = defineOp<QuantLinearAttrs>({
  name: 'quantLinear',
  // nothing is saved: dX = dY W needs only the weight, which the attrs hold
  forward: (ctx, [x, b], { w, hasBias }) => ({ outputs: quantLinearKernel(ctx, x!, w, { bias: hasBias ? b : undefined }) }),
  backward: (ctx, [g], _saved, [mx, mb], { w }) => {
    const dx = mx!.requiresGrad ? quantLinearBackward(ctx, g!, w) : null;
    const db = mb?.requiresGrad ? reduce(ctx, 'sum', flat2(g!), 0) : null;
    return [dx, db];
  },
});

/** `t` in f16: itself when it is f16 already (`owned` false), else a new rounded copy (`owned` true). */
function asF16(ctx: Context, t: DeviceTensor): { h: DeviceTensor; owned: boolean } {
  return t.dtype === 'f16' ? { h: t, owned: false } : { h: cast(ctx, t, 'f16'), owned: true };
}

/** `h [M, k] @ W^T` (or `@ W` with `back`), h f16 and 2-D, with W dequantized into a transient f16 matrix that
 *  is released as soon as the product is encoded (the pool reuses it for the next layer's): nothing of W's size
 *  outlives the call. f32 output `[M, N]` (or `[M, K]`). */
export function dequantMatmul(ctx: Context, h: DeviceTensor, w: QuantTensor, back: boolean, bias?: DeviceTensor): DeviceTensor {
  const wd = dequantize(ctx, w, 'f16');
  const y = mm(ctx, h, wd, { transB: !back, bias });
  ctx.release(wd.buffer);
  return y;
}

/** {@link dequantMatmul} of `a` (any rank, cast to f16 for the product when it is not f16). */
function dequantProduct(ctx: Context, a: DeviceTensor, w: QuantTensor, back: boolean, bias?: DeviceTensor): DeviceTensor {
  const { h, owned } = asF16(ctx, flat2(a));
  const y = dequantMatmul(ctx, h, w, back, bias);
  if (owned) ctx.release(h.buffer);
  return { ...y, shape: [...a.shape.slice(0, -1), back ? w.layout.K : w.layout.N] };
}

/**
 * Mixed precision (QLoRA's compute dtype): many rows go through W dequantized to a transient f16 matrix and the
 * backend's f16 x f16 `matmul` (tensor cores where the adapter has subgroup matrices), forward and for the input
 * gradient; the f16 weight is made again in backward instead of being saved, so at most one projection's f16
 * copy exists at a time. Decode shapes (at most `QUANT_GEMV_MAX_ROWS` rows) keep the bandwidth-bound GEMV that
 * reads the packed codes once.
 */
const quantLinearF16Op = defineOp<QuantLinearAttrs>({
  name: 'quantLinear-f16',
  forward: (ctx, [x, b], { w, hasBias }) => {
    const bias = hasBias ? b : undefined;
    if (numel(x!.shape) / w.layout.K <= QUANT_GEMV_MAX_ROWS) return { outputs: quantLinearKernel(ctx, x!, w, { bias, variant: 'gemv' }) };
    return { outputs: dequantProduct(ctx, x!, w, false, bias) };
  },
  backward: (ctx, [g], _saved, [mx, mb], { w }) => {
    const dx = mx!.requiresGrad ? dequantProduct(ctx, g!, w, true) : null;
    const db = mb?.requiresGrad ? reduce(ctx, 'sum', flat2(g!), 0) : null;
    return [dx, db];
  },
});

/** Options of {@link quantLinear}. */
export interface QuantLinearOptions {
  /**
   * `'f16'`: products on f16 inputs with f32 accumulation (mixed precision, QLoRA's compute dtype): W is
   * dequantized to a transient f16 matrix per call (forward, and again for the input gradient) and multiplied on
   * tensor cores where the adapter has them. `'f32'`: the backend's fused dequantizing kernels on the input as
   * given. Default: `'f16'` when x is f16, else the enclosing {@link autocast} scope's compute dtype (`'f32'`
   * outside one).
   */
  compute?: ComputeDtype;
}

/**
 * `y = x W^T + b` with a frozen quantized weight `W [out, in]` (int8 / int4 / NF4, see `@rusty/backend`'s
 * quantized formats): the fused dequantizing kernels forward and backward (or, with `compute: 'f16'`, a
 * transient f16 weight and the f16 matmul); gradients flow to `x` (and `b` if it requires them), never to W.
 * Outputs and gradients are f32.
 */
export function quantLinear(x: Tensor, w: QuantTensor, bias?: Tensor | null, opts: QuantLinearOptions = {}): Tensor {
  if (x.shape[x.rank - 1] !== w.layout.K)
    throw new ShapeError(`quantLinear: input ${fmt(x.shape)} does not end in in_features ${w.layout.K} of the quantized weight [${w.layout.N}, ${w.layout.K}]`);
  const op = (opts.compute ?? (x.dtype === 'f16' ? 'f16' : computeDtype())) === 'f16' ? quantLinearF16Op : quantLinearOp;
  return bias ? op([x, bias], { w, hasBias: true }) : op([x], { w, hasBias: false });
}
