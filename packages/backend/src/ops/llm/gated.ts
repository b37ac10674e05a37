/** Gated MLP activations `out = act(gate) * up` (SwiGLU, GELU-tanh gating): one fused forward and one fused
 *  backward kernel, specialised by the activation (shaders/act-*.wgsl). */
import gatedWgsl from '../../../../../shaders/gated-act.wgsl';
import gatedBwdWgsl from '../../../../../shaders/gated-act-backward.wgsl';
import unitLoopWgsl from '../../../../../shaders/unit-loop.wgsl';
import siluWgsl from '../../../../../shaders/act-silu.wgsl';
import geluTanhWgsl from '../../../../../shaders/act-gelu-tanh.wgsl';
import type { Context } from '../../context';
import { isFloat, type DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { wgslPacker } from '../../kernel';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { bindUnits, checkFloat, checkOut, elemBytes, fmt, grid, llmKernel, rowChunks, sameShape, vecFor, vecPrelude } from './common';

const WG = 256;
const UPT = 4;

/** Output options of the gated-activation ops (SwiGLU, GELU-tanh gate). */
export interface GatedOptions {
  /** Output tensor to write instead of allocating one (of `dtype`). */
  out?: DeviceTensor;
  /** Storage format of the output: f32 (default), or a 16-bit float format (rounded to nearest even from the
   *  f32 result, as `cast` rounds; the last dim must be even). */
  dtype?: DType;
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

/** The storage format a gated op writes (`dtype`, default f32); 16-bit formats need an even last dim `I`. */
function outFormat(op: string, dtype: DType | undefined, I: number): DType {
  const d = dtype ?? 'f32';
  if (!isFloat(d)) throw new ShapeError(`${op}: outputs are float, not ${d}`);
  if (d !== 'f32' && I % 2) throw new ShapeError(`${op}: ${d} outputs need an even last dim (whole words per thread), got ${I}`);
  return d;
}

/** The vector width and the storers of a gated kernel's outputs: f32 outputs through `vecPrelude`, 16-bit ones
 *  here (two elements a word, packed by the format table's `pack`: the rounding of `cast`; VEC is 2). */
function outputs(I: number, reads: readonly DType[], outs: readonly (readonly [string, DType])[]) {
  const half = outs.some(([, d]) => d !== 'f32');
  const vec: 1 | 2 = half ? 2 : vecFor(I, reads);
  const f32 = outs.filter(([, d]) => d === 'f32').map(([n]) => n);
  const code = outs
    .filter(([, d]) => d !== 'f32')
    .map(([n, d]) => `${wgslPacker(n, d)}fn st_${n}(e: u32, v: V) { ${n}[e >> 1u] = pack_${n}(array<f32, 2>(v.x, v.y)); }\n`)
    .join('');
  const bindings = outs.map(([name, d]) => ({ name, access: 'rw' as const, dtype: d === 'f32' ? ('f32' as const) : ('u32' as const) }));
  return { vec, f32, code, bindings, key: outs.map(([, d]) => d).join('') };
}

/** `act(gate) * up` elementwise over [..., I]: f32 arithmetic, output in `opts.dtype` (default f32). */
function gatedForward(ctx: Context, act: GateActivation, op: string, gate: DeviceTensor, up: DeviceTensor, opts: GatedOptions): DeviceTensor {
  checkPair(op, gate, up);
  const I = gate.shape[gate.shape.length - 1]!;
  const dtype = outFormat(op, opts.out?.dtype ?? opts.dtype, I);
  const out = opts.out ?? empty(ctx, gate.shape, dtype);
  if (opts.out) checkOut(opts.out, gate.shape, `${op}: out`, dtype);
  const n = numel(gate.shape);
  if (n === 0) return out;
  const plan = rowChunks(ctx, op, n / I, [
    [gate, I * elemBytes(gate), 'gate'],
    [up, I * elemBytes(up), 'up'],
    [out, I * elemBytes(out), 'out'],
  ]);
  const o = outputs(I, [gate.dtype, up.dtype], [['out', dtype]]);
  const vec = o.vec;
  const k = llmKernel(ctx, `gated:${act}:v${vec}:${gate.dtype}${up.dtype}:${o.key}`, () => ({
    code: vecPrelude({ WG, UPT }, vec, [['gate', gate.dtype], ['up', up.dtype]], o.f32) + o.code + ACTIVATIONS[act] + gatedWgsl + unitLoopWgsl,
    bindings: [{ name: 'gate', access: 'read', dtype: gate.dtype }, { name: 'up', access: 'read', dtype: up.dtype }, ...o.bindings],
    params: ['u32:units'],
  }));
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor) => bindUnits(plan, t, I * elemBytes(t), r0, r1);
    const units = ((r1 - r0) * I) / vec;
    ctx.dispatch(k, [b(gate), b(up), b(out)], grid(Math.ceil(units / (WG * UPT))), [units]);
  }
  return out;
}

/** Gradients of `act(gate) * up`: `dgate` and `dup` of gate's shape in `opts.dtype` (default f32; written into
 *  the given outputs). */
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
  const I = gate.shape[gate.shape.length - 1]!;
  const dtype = outFormat(op, opts.dtype, I);
  const dgate = opts.dgateOut ?? empty(ctx, gate.shape, dtype);
  if (opts.dgateOut) checkOut(opts.dgateOut, gate.shape, `${op}: dgateOut`, dtype);
  const dup = opts.dupOut ?? empty(ctx, gate.shape, dtype);
  if (opts.dupOut) checkOut(opts.dupOut, gate.shape, `${op}: dupOut`, dtype);
  const n = numel(gate.shape);
  if (n === 0) return { dgate, dup };
  const ins = [dout, gate, up] as const;
  const plan = rowChunks(ctx, op, n / I, [
    ...ins.map((t, i) => [t, I * elemBytes(t), ['dout', 'gate', 'up'][i]!] as const),
    [dgate, I * elemBytes(dgate), 'dgate'],
    [dup, I * elemBytes(dup), 'dup'],
  ]);
  const dts: DType[] = ins.map((t) => t.dtype);
  const o = outputs(I, dts, [['dgate', dtype], ['dup', dtype]]);
  const vec = o.vec;
  const k = llmKernel(ctx, `gated_bwd:${act}:v${vec}:${dts.join('')}:${o.key}`, () => ({
    code:
      vecPrelude({ WG, UPT }, vec, [['dout', dout.dtype], ['gate', gate.dtype], ['up', up.dtype]], o.f32) +
      o.code +
      ACTIVATIONS[act] +
      gatedBwdWgsl +
      unitLoopWgsl,
    bindings: [
      { name: 'dout', access: 'read', dtype: dout.dtype },
      { name: 'gate', access: 'read', dtype: gate.dtype },
      { name: 'up', access: 'read', dtype: up.dtype },
      ...o.bindings,
    ],
    params: ['u32:units'],
  }));
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor) => bindUnits(plan, t, I * elemBytes(t), r0, r1);
    const units = ((r1 - r0) * I) / vec;
    ctx.dispatch(k, [...ins.map(b), b(dgate), b(dup)], grid(Math.ceil(units / (WG * UPT))), [units]);
  }
  return { dgate, dup };
}

/** Output options of the gated-activation backward ops. */
export interface GatedBackwardOptions {
  dgateOut?: DeviceTensor;
  dupOut?: DeviceTensor;
  /** Storage format of dgate and dup: f32 (default), or a 16-bit float format (rounded to nearest even from the
   *  f32 values, as `cast` rounds; the last dim must be even): for a consumer that rounds them so anyway. */
  dtype?: DType;
}

/** Output options of the SwiGLU ops. */
export type SwigluOptions = GatedOptions;

/** A gated activation's forward: `act(gate) * up`, [..., I] in `opts.dtype` (default f32; into `opts.out` when given). */
export type GatedOp = (ctx: Context, gate: DeviceTensor, up: DeviceTensor, opts?: GatedOptions) => DeviceTensor;
/** A gated activation's backward in one pass: `dgate` and `dup` of gate's shape (f32 unless `opts.dtype`). */
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
 * f32/f16/bf16, output f32 (or `opts.dtype`). Tensors larger than one storage binding are processed in row chunks (all gated ops).
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
