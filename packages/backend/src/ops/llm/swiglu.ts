import type { Context } from '../../context';
import type { DeviceTensor } from '../../tensor';
import { gatedBackward, gatedBackwardOuts, gatedForward, gatedFusedBackwardOut, type GatedOptions } from './gated';

/** Output options of the SwiGLU ops. */
export type SwigluOptions = GatedOptions;

/**
 * SwiGLU in one pass: `out = silu(gate) * up` (silu(g) = g * sigmoid(g)), elementwise over [..., I]; inputs
 * f32/f16/bf16, output f32. Tensors larger than one storage binding are processed in row chunks (all SwiGLU
 * ops).
 */
export function swiglu(ctx: Context, gate: DeviceTensor, up: DeviceTensor, opts: SwigluOptions = {}): DeviceTensor {
  return gatedForward(ctx, 'silu', 'swiglu', gate, up, opts);
}

/** SwiGLU of a fused projection `gateUp` [..., 2I] (gate in the first half of the last dim, up in the
 *  second): returns f32 [..., I]. */
export function swigluFused(ctx: Context, gateUp: DeviceTensor, opts: SwigluOptions = {}): DeviceTensor {
  return gatedForward(ctx, 'silu', 'swigluFused', gateUp, null, opts);
}

/**
 * Backward of {@link swiglu} in one pass: `dgate = dout * up * s * (1 + gate * (1 - s))` and
 * `dup = dout * silu(gate)` with s = sigmoid(gate); f32 outputs of gate's shape.
 */
export function swigluBackward(
  ctx: Context,
  dout: DeviceTensor,
  gate: DeviceTensor,
  up: DeviceTensor,
  opts: { dgateOut?: DeviceTensor; dupOut?: DeviceTensor } = {},
): { dgate: DeviceTensor; dup: DeviceTensor } {
  const [dgate, dup] = gatedBackwardOuts(ctx, 'swigluBackward', gate, up, opts);
  gatedBackward(ctx, 'silu', 'swigluBackward', dout, gate, up, [dgate, dup]);
  return { dgate, dup };
}

/** Backward of {@link swigluFused}: the gradient of `gateUp`, f32 [..., 2I] in the same halves layout. */
export function swigluFusedBackward(ctx: Context, dout: DeviceTensor, gateUp: DeviceTensor, opts: SwigluOptions = {}): DeviceTensor {
  const d = gatedFusedBackwardOut(ctx, 'swigluFusedBackward', gateUp, opts);
  gatedBackward(ctx, 'silu', 'swigluFusedBackward', dout, gateUp, null, [d]);
  return d;
}
