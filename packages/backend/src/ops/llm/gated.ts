/** Gated MLP activations `out = act(gate) * up` (SwiGLU, GELU-tanh gating): one fused forward and one fused
 *  backward kernel, specialised by the activation (shaders/act-*.wgsl). */
import gatedWgsl from '../../../../../shaders/gated-act.wgsl';
import gatedBwdWgsl from '../../../../../shaders/gated-act-backward.wgsl';
import unitLoopWgsl from '../../../../../shaders/unit-loop.wgsl';
import siluWgsl from '../../../../../shaders/act-silu.wgsl';
import geluTanhWgsl from '../../../../../shaders/act-gelu-tanh.wgsl';
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { bindUnits, checkFloat, checkOut, elemBytes, fmt, grid, llmKernel, rowChunks, sameShape, vecFor, vecPrelude } from './common';

const WG = 256;
const UPT = 4;

/** Output options of the gated-activation ops (SwiGLU, GELU-tanh gate). */
export interface GatedOptions {
  /** f32 output tensor to write instead of allocating one. */
  out?: DeviceTensor;
}

/** The gate activations: name -> WGSL defining `act(g)` and `act_grad(g)` on the vector alias V. */
export const ACTIVATIONS = { silu: siluWgsl, gelu_tanh: geluTanhWgsl } as const;
export type GateActivation = keyof typeof ACTIVATIONS;

function checkPair(op: string, gate: DeviceTensor, up: DeviceTensor): void {
  checkFloat(gate, `${op}: gate`);
  checkFloat(up, `${op}: up`);
  if (gate.shape.length < 1) throw new ShapeError(`${op}: expected at least one dimension, got ${fmt(gate.shape)}`);
  if (!sameShape(gate.shape, up.shape)) throw new ShapeError(`${op}: gate ${fmt(gate.shape)} and up ${fmt(up.shape)} differ`);
}

/** `act(gate) * up` elementwise over [..., I]: f32 output. */
function gatedForward(ctx: Context, act: GateActivation, op: string, gate: DeviceTensor, up: DeviceTensor, opts: GatedOptions): DeviceTensor {
  checkPair(op, gate, up);
  const out = opts.out ?? empty(ctx, gate.shape);
  if (opts.out) checkOut(opts.out, gate.shape, `${op}: out`);
  const n = numel(gate.shape);
  if (n === 0) return out;
  const I = gate.shape[gate.shape.length - 1]!;
  const plan = rowChunks(ctx, op, n / I, [
    [gate, I * elemBytes(gate), 'gate'],
    [up, I * elemBytes(up), 'up'],
    [out, I * 4, 'out'],
  ]);
  const vec = vecFor(I, [gate.dtype, up.dtype]);
  const k = llmKernel(ctx, `gated:${act}:v${vec}:${gate.dtype}${up.dtype}`, () => ({
    code: vecPrelude({ WG, UPT }, vec, [['gate', gate.dtype], ['up', up.dtype]], ['out']) + ACTIVATIONS[act] + gatedWgsl + unitLoopWgsl,
    bindings: [
      { name: 'gate', access: 'read', dtype: gate.dtype },
      { name: 'up', access: 'read', dtype: up.dtype },
      { name: 'out', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:units'],
  }));
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    const units = ((r1 - r0) * I) / vec;
    ctx.dispatch(k, [b(gate, I * elemBytes(gate)), b(up, I * elemBytes(up)), b(out, I * 4)], grid(Math.ceil(units / (WG * UPT))), [units]);
  }
  return out;
}

/** Gradients of `act(gate) * up`: f32 `dgate` and `dup` of gate's shape (written into the given outputs). */
function gatedBackward(
  ctx: Context,
  act: GateActivation,
  op: string,
  dout: DeviceTensor,
  gate: DeviceTensor,
  up: DeviceTensor,
  opts: GatedBackwardOptions,
): { dgate: DeviceTensor; dup: DeviceTensor } {
  checkPair(op, gate, up);
  checkFloat(dout, `${op}: dout`);
  if (!sameShape(dout.shape, gate.shape)) throw new ShapeError(`${op}: dout ${fmt(dout.shape)} must be ${fmt(gate.shape)}`);
  const dgate = opts.dgateOut ?? empty(ctx, gate.shape);
  if (opts.dgateOut) checkOut(opts.dgateOut, gate.shape, `${op}: dgateOut`);
  const dup = opts.dupOut ?? empty(ctx, gate.shape);
  if (opts.dupOut) checkOut(opts.dupOut, gate.shape, `${op}: dupOut`);
  const n = numel(gate.shape);
  if (n === 0) return { dgate, dup };
  const I = gate.shape[gate.shape.length - 1]!;
  const ins = [dout, gate, up] as const;
  const plan = rowChunks(ctx, op, n / I, [
    ...ins.map((t, i) => [t, I * elemBytes(t), ['dout', 'gate', 'up'][i]!] as const),
    [dgate, I * 4, 'dgate'],
    [dup, I * 4, 'dup'],
  ]);
  const dts: DType[] = ins.map((t) => t.dtype);
  const vec = vecFor(I, dts);
  const k = llmKernel(ctx, `gated_bwd:${act}:v${vec}:${dts.join('')}`, () => ({
    code:
      vecPrelude({ WG, UPT }, vec, [['dout', dout.dtype], ['gate', gate.dtype], ['up', up.dtype]], ['dgate', 'dup']) +
      ACTIVATIONS[act] +
      gatedBwdWgsl +
      unitLoopWgsl,
    bindings: [
      { name: 'dout', access: 'read', dtype: dout.dtype },
      { name: 'gate', access: 'read', dtype: gate.dtype },
      { name: 'up', access: 'read', dtype: up.dtype },
      { name: 'dgate', access: 'rw', dtype: 'f32' },
      { name: 'dup', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:units'],
  }));
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    const units = ((r1 - r0) * I) / vec;
    const bufs = [...ins.map((t) => b(t, I * elemBytes(t))), b(dgate, I * 4), b(dup, I * 4)];
    ctx.dispatch(k, bufs, grid(Math.ceil(units / (WG * UPT))), [units]);
  }
  return { dgate, dup };
}

/** Output options of the gated-activation backward ops. */
export interface GatedBackwardOptions {
  dgateOut?: DeviceTensor;
  dupOut?: DeviceTensor;
}

/** Output options of the SwiGLU ops. */
export type SwigluOptions = GatedOptions;

/** A gated activation's forward: `act(gate) * up`, f32 [..., I] (into `opts.out` when given). */
export type GatedOp = (ctx: Context, gate: DeviceTensor, up: DeviceTensor, opts?: GatedOptions) => DeviceTensor;
/** A gated activation's backward in one pass: f32 `dgate` and `dup` of gate's shape. */
export type GatedBackwardOp = (
  ctx: Context,
  dout: DeviceTensor,
  gate: DeviceTensor,
  up: DeviceTensor,
  opts?: GatedBackwardOptions,
) => { dgate: DeviceTensor; dup: DeviceTensor };

const forwardOf =
  (act: GateActivation, op: string): GatedOp =>
  (ctx, gate, up, opts = {}) =>
    gatedForward(ctx, act, op, gate, up, opts);
const backwardOf =
  (act: GateActivation, op: string): GatedBackwardOp =>
  (ctx, dout, gate, up, opts = {}) =>
    gatedBackward(ctx, act, op, dout, gate, up, opts);

/**
 * SwiGLU in one pass: `out = silu(gate) * up` (silu(g) = g * sigmoid(g)), elementwise over [..., I]; inputs
 * f32/f16/bf16, output f32. Tensors larger than one storage binding are processed in row chunks (all gated ops).
 */
export const swiglu: GatedOp = forwardOf('silu', 'swiglu');

/** Backward of {@link swiglu}: `dgate = dout * up * s * (1 + gate * (1 - s))`, `dup = dout * silu(gate)` with
 *  s = sigmoid(gate). */
export const swigluBackward: GatedBackwardOp = backwardOf('silu', 'swigluBackward');

/**
 * GELU-tanh gating in one pass (Gemma's MLP, HF `gelu_pytorch_tanh`): `out = gelu_tanh(gate) * up` with
 * `gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch `gelu(approximate='tanh')`),
 * elementwise over [..., I]; inputs f32/f16/bf16, output f32. The kernel of {@link swiglu} with another
 * activation (shaders/act-gelu-tanh.wgsl).
 */
export const geluTanhGate: GatedOp = forwardOf('gelu_tanh', 'geluTanhGate');

/** Backward of {@link geluTanhGate}: `dgate = dout * up * gelu_tanh'(gate)`, `dup = dout * gelu_tanh(gate)`. */
export const geluTanhGateBackward: GatedBackwardOp = backwardOf('gelu_tanh', 'geluTanhGateBackward');
