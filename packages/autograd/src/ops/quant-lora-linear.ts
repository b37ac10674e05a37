import { cast, numel, QUANT_GEMV_MAX_ROWS, quantLinear as quantLinearKernel, reduce, ShapeError, type DeviceTensor, type QuantTensor } from '@rusty/backend';
import { defineOp } from '../op';
import type { Tensor } from '../tensor';
import { outer, project, update } from './lora-linear';
import { dequantMatmul } from './quant-linear';
import { fmt } from './util';

interface QuantLoraAttrs {
  /** The frozen quantized weight [out, in] (not a tensor input: it has no gradient). */
  w: QuantTensor;
  hasBias: boolean;
  scaling: number;
}

const flat2 = (t: DeviceTensor): DeviceTensor => ({ ...t, shape: [numel(t.shape) / t.shape[t.shape.length - 1]!, t.shape[t.shape.length - 1]!] });

/**
 * QLoRA's projection as one op, the quantized twin of `loraLinear` under f16 compute: `y = x W^T + b + s (x A^T)
 * B^T` with the frozen quantized W `[out, in]` (int8 / int4 / NF4), A `[r, in]`, B `[out, r]`. x is rounded to
 * f16 once; the base product multiplies it with W dequantized into a transient f16 matrix (released as soon as
 * the product is encoded, and made again for the input gradient: nothing of W's size is saved); the scaled
 * low-rank update is added into the base product in place (no separate `[tokens, out]` tensors for `(x A^T)
 * B^T`, its scaling and the sum, forward or backward, as the composition of ops had); A, B, u and v are read in
 * f32 by the low-rank kernels. Decode shapes (at most `QUANT_GEMV_MAX_ROWS` rows) take the GEMV that reads the
 * packed codes once for the base product. Saved for backward: x in f16, A, B and `u = x A^T` (f32
 * `[tokens, r]`). Backward: `v = dY B`, `dx = dY W + s v A`, `dA = s v^T x`, `dB = s dY^T u`.
 */
const quantLoraLinearOp = defineOp<QuantLoraAttrs>({
  name: 'quant-lora-linear',
  forward: (ctx, [x, a, b, bias], { w, hasBias, scaling }) => {
    const r = a!.shape[0]!;
    const x2 = flat2(x!);
    const xc = x2.dtype === 'f16' ? x2 : cast(ctx, x2, 'f16');
    const y =
      x2.shape[0]! <= QUANT_GEMV_MAX_ROWS
        ? quantLinearKernel(ctx, x2, w, { bias: hasBias ? bias : undefined, variant: 'gemv' })
        : dequantMatmul(ctx, xc, w, false, hasBias ? bias : undefined);
    const u = project(ctx, xc, a!, 'rk', r);
    update(ctx, y, u, b!, 'nr', scaling, r);
    return { outputs: { ...y, shape: [...x!.shape.slice(0, -1), w.layout.N] }, saved: [xc, a!, b!, u] };
  },
  backward: (ctx, [g], [xc, a, b, u], [mx, ma, mb, mbias], { w, scaling }) => {
    const r = a!.shape[0]!;
    const g2 = flat2(g!);
    const gc = g2.dtype === 'f16' ? g2 : cast(ctx, g2, 'f16');
    const v = mx!.requiresGrad || ma!.requiresGrad ? project(ctx, gc, b!, 'kr', r) : null;
    let dx: DeviceTensor | null = null;
    if (mx!.requiresGrad) {
      dx = dequantMatmul(ctx, gc, w, true);
      update(ctx, dx, v!, a!, 'rn', scaling, r);
      dx = { ...dx, shape: [...mx!.shape] };
    }
    const da = ma!.requiresGrad ? outer(ctx, xc!, v!, 'rq', scaling, r) : null;
    const db = mb!.requiresGrad ? outer(ctx, gc, u!, 'qr', scaling, r) : null;
    const dbias = mbias?.requiresGrad ? reduce(ctx, 'sum', g2, 0) : null;
    if (v) ctx.release(v.buffer);
    if (gc !== g2) ctx.release(gc.buffer);
    return [dx, da, db, dbias];
  },
});

/**
 * `y = x W^T + b + scaling * (x A^T) B^T` on a frozen quantized base weight W (`@rusty/backend`'s quantized
 * formats) as one differentiable op with f16 products and f32 accumulation (QLoRA's compute dtype); gradients
 * flow to x, A, B (and b if it requires them), never to W. Agrees with the composition `add(quantLinear(x, W, b,
 * { compute: 'f16' }), scale(linear(linear(x, A), B), scaling))` up to the f16 rounding of A, B and `x A^T`,
 * which this op reads in f32 (see quant-lora-linear.test.ts); it is `loraLinear` on the dequantized weight.
 */
export function quantLoraLinear(x: Tensor, w: QuantTensor, bias: Tensor | null | undefined, loraA: Tensor, loraB: Tensor, scaling: number): Tensor {
  const { N, K } = w.layout;
  if (x.shape[x.rank - 1] !== K) throw new ShapeError(`quantLoraLinear: input ${fmt(x.shape)} does not end in in_features ${K} of the quantized weight [${N}, ${K}]`);
  const r = loraA.shape[0]!;
  if (loraA.rank !== 2 || loraA.shape[1] !== K || loraB.rank !== 2 || loraB.shape[0] !== N || loraB.shape[1] !== r)
    throw new ShapeError(`quantLoraLinear: A ${fmt(loraA.shape)} and B ${fmt(loraB.shape)} do not fit the quantized weight [${N}, ${K}] (A [r, in], B [out, r])`);
  if (!Number.isFinite(scaling)) throw new ShapeError(`quantLoraLinear: scaling must be finite, got ${scaling}`);
  const attrs = { w, hasBias: !!bias, scaling };
  return quantLoraLinearOp(bias ? [x, loraA, loraB, bias] : [x, loraA, loraB], attrs);
}
