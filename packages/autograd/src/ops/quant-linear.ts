import {
  numel,
  quantLinear as quantLinearKernel,
  quantLinearBackward,
  reduce,
  ShapeError,
  type DeviceTensor,
  type QuantTensor,
} from '@rusty/backend';
import { defineOp } from '../op';
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

/**
 * `y = x W^T + b` with a frozen quantized weight `W [out, in]` (int8 / int4 / NF4, see `@rusty/backend`'s
 * quantized formats): the fused dequantizing kernels forward and backward; gradients flow to `x` (and `b` if it
 * requires them), never to W.
 */
export function quantLinear(x: Tensor, w: QuantTensor, bias?: Tensor | null): Tensor {
  if (x.shape[x.rank - 1] !== w.layout.K)
    throw new ShapeError(`quantLinear: input ${fmt(x.shape)} does not end in in_features ${w.layout.K} of the quantized weight [${w.layout.N}, ${w.layout.K}]`);
  return bias ? quantLinearOp([x, bias], { w, hasBias: true }) : quantLinearOp([x], { w, hasBias: false });
}
