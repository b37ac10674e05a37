import type { Context } from '../../context';
import type { DeviceTensor } from '../../tensor';
import { gatedBackward, gatedBackwardOuts, gatedForward, gatedFusedBackwardOut, type GatedOptions } from './gated';

/**
 * GELU-tanh gating in one pass (Gemma's MLP, HF `gelu_pytorch_tanh`): `out = gelu_tanh(gate) * up` with
 * `gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch `gelu(approximate='tanh')`),
 * elementwise over [..., I]; inputs f32/f16/bf16, output f32. The same fused kernel as {@link swiglu} with
 * another activation (shaders/act-gelu-tanh.wgsl); tensors larger than one storage binding are processed in
 * row chunks.
 */
export function geluTanhGate(ctx: Context, gate: DeviceTensor, up: DeviceTensor, opts: GatedOptions = {}): DeviceTensor {
  return gatedForward(ctx, 'gelu_tanh', 'geluTanhGate', gate, up, opts);
}

/** {@link geluTanhGate} of a fused projection `gateUp` [..., 2I] (gate first, then up): f32 [..., I]. */
export function geluTanhGateFused(ctx: Context, gateUp: DeviceTensor, opts: GatedOptions = {}): DeviceTensor {
  return gatedForward(ctx, 'gelu_tanh', 'geluTanhGateFused', gateUp, null, opts);
}

/** Backward of {@link geluTanhGate} in one pass: `dgate = dout * up * gelu_tanh'(gate)`,
 *  `dup = dout * gelu_tanh(gate)`; f32 outputs of gate's shape. */
export function geluTanhGateBackward(
  ctx: Context,
  dout: DeviceTensor,
  gate: DeviceTensor,
  up: DeviceTensor,
  opts: { dgateOut?: DeviceTensor; dupOut?: DeviceTensor } = {},
): { dgate: DeviceTensor; dup: DeviceTensor } {
  const [dgate, dup] = gatedBackwardOuts(ctx, 'geluTanhGateBackward', gate, up, opts);
  gatedBackward(ctx, 'gelu_tanh', 'geluTanhGateBackward', dout, gate, up, [dgate, dup]);
  return { dgate, dup };
}

/** Backward of {@link geluTanhGateFused}: the gradient of `gateUp`, f32 [..., 2I] in the same layout. */
export function geluTanhGateFusedBackward(ctx: Context, dout: DeviceTensor, gateUp: DeviceTensor, opts: GatedOptions = {}): DeviceTensor {
  const d = gatedFusedBackwardOut(ctx, 'geluTanhGateFusedBackward', gateUp, opts);
  gatedBackward(ctx, 'gelu_tanh', 'geluTanhGateFusedBackward', dout, gateUp, null, [d]);
  return d;
}
