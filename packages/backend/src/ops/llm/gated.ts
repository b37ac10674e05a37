/** Gated MLP activations `out = act(gate) * up` (SwiGLU, GELU-tanh gating): one fused forward and one fused
 *  backward kernel, specialised by the activation (shaders/act-*.wgsl). Internal to `ops/llm`; the public ops
 *  are in swiglu.ts and gelu-gate.ts. */
import gatedWgsl from '../../../../../shaders/gated-act.wgsl';
import gatedBwdWgsl from '../../../../../shaders/gated-act-backward.wgsl';
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

interface Layout {
  fused: boolean;
  /** Logical [..., I] shape of gate, up and out. */
  shape: number[];
  inner: number;
}

function layoutOf(op: string, gate: DeviceTensor, up: DeviceTensor | null): Layout {
  checkFloat(gate, `${op}: ${up ? 'gate' : 'gateUp'}`);
  if (gate.shape.length < 1) throw new ShapeError(`${op}: expected at least one dimension, got ${fmt(gate.shape)}`);
  const last = gate.shape[gate.shape.length - 1]!;
  if (up) {
    checkFloat(up, `${op}: up`);
    if (!sameShape(gate.shape, up.shape)) throw new ShapeError(`${op}: gate ${fmt(gate.shape)} and up ${fmt(up.shape)} differ`);
    return { fused: false, shape: [...gate.shape], inner: last };
  }
  if (last % 2) throw new ShapeError(`${op}: gateUp ${fmt(gate.shape)} must have an even last dimension (gate and up halves)`);
  return { fused: true, shape: [...gate.shape.slice(0, -1), last / 2], inner: last / 2 };
}

/** WGSL loaders ld_gate/ld_up over the logical [n] index for either layout. */
function gateUpCode(fused: boolean): string {
  return fused
    ? 'fn gidx(e: u32) -> u32 { return e + (e / p.I) * p.I; }\n' +
        'fn ld_gate(e: u32) -> V { return ld_gu(gidx(e)); }\n' +
        'fn ld_up(e: u32) -> V { return ld_gu(gidx(e) + p.I); }\n'
    : 'fn ld_gate(e: u32) -> V { return ld_g(e); }\nfn ld_up(e: u32) -> V { return ld_u(e); }\n';
}

/** `act(gate) * up` of two tensors (`up` given) or of the halves of `gate` [..., 2I] (`up` null). */
export function gatedForward(
  ctx: Context,
  act: GateActivation,
  op: string,
  gate: DeviceTensor,
  up: DeviceTensor | null,
  opts: GatedOptions,
): DeviceTensor {
  const L = layoutOf(op, gate, up);
  const out = opts.out ?? empty(ctx, L.shape);
  if (opts.out) checkOut(opts.out, L.shape, `${op}: out`);
  const n = numel(L.shape);
  if (n === 0) return out;
  const I = L.inner;
  const gRow = (L.fused ? 2 * I : I) * elemBytes(gate);
  const plan = rowChunks(ctx, op, n / I, [
    [gate, gRow, up ? 'gate' : 'gateUp'],
    ...(up ? [[up, I * elemBytes(up), 'up'] as const] : []),
    [out, I * 4, 'out'],
  ]);
  const dts: DType[] = up ? [gate.dtype, up.dtype] : [gate.dtype];
  const vec = vecFor(L.inner, dts);
  const key = `gated:${act}:${L.fused ? 'fused' : 'split'}:v${vec}:${dts.join('')}`;
  const k = llmKernel(ctx, key, () => ({
    code:
      vecPrelude({ WG, UPT }, vec, up ? [['g', gate.dtype], ['u', up.dtype]] : [['gu', gate.dtype]], ['out']) +
      gateUpCode(L.fused) +
      ACTIVATIONS[act] +
      gatedWgsl,
    bindings: [
      ...(up
        ? [
            { name: 'g', access: 'read' as const, dtype: gate.dtype },
            { name: 'u', access: 'read' as const, dtype: up.dtype },
          ]
        : [{ name: 'gu', access: 'read' as const, dtype: gate.dtype }]),
      { name: 'out', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:units', 'u32:I'],
  }));
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    const units = ((r1 - r0) * I) / vec;
    const bufs = up ? [b(gate, gRow), b(up, I * elemBytes(up)), b(out, I * 4)] : [b(gate, gRow), b(out, I * 4)];
    ctx.dispatch(k, bufs, grid(Math.ceil(units / (WG * UPT))), [units, I]);
  }
  return out;
}

/** Gradients of `act(gate) * up` into `outs`: [dgate, dup] (two tensors) or [dgateUp] (the fused layout). */
export function gatedBackward(
  ctx: Context,
  act: GateActivation,
  op: string,
  dout: DeviceTensor,
  gate: DeviceTensor,
  up: DeviceTensor | null,
  outs: DeviceTensor[],
): void {
  const L = layoutOf(op, gate, up);
  checkFloat(dout, `${op}: dout`);
  if (!sameShape(dout.shape, L.shape)) throw new ShapeError(`${op}: dout ${fmt(dout.shape)} must be ${fmt(L.shape)}`);
  const n = numel(L.shape);
  if (n === 0) return;
  const I = L.inner;
  const gRow = (L.fused ? 2 * I : I) * elemBytes(gate);
  const oRow = (L.fused ? 2 * I : I) * 4;
  const plan = rowChunks(ctx, op, n / I, [
    [dout, I * elemBytes(dout), 'dout'],
    [gate, gRow, up ? 'gate' : 'gateUp'],
    ...(up ? [[up, I * elemBytes(up), 'up'] as const] : []),
    ...outs.map((o, i) => [o, oRow, up ? (i ? 'dup' : 'dgate') : 'dgateUp'] as const),
  ]);
  const dts: DType[] = up ? [dout.dtype, gate.dtype, up.dtype] : [dout.dtype, gate.dtype];
  const vec = vecFor(L.inner, dts);
  const key = `gated_bwd:${act}:${L.fused ? 'fused' : 'split'}:v${vec}:${dts.join('')}`;
  const k = llmKernel(ctx, key, () => {
    const reads: [string, DType][] = up ? [['dout', dout.dtype], ['g', gate.dtype], ['u', up.dtype]] : [['dout', dout.dtype], ['gu', gate.dtype]];
    const stores = up
      ? 'fn st_dgate(e: u32, v: V) { st_dg(e, v); }\nfn st_dup(e: u32, v: V) { st_du(e, v); }\n'
      : 'fn st_dgate(e: u32, v: V) { st_dgu(gidx(e), v); }\nfn st_dup(e: u32, v: V) { st_dgu(gidx(e) + p.I, v); }\n';
    return {
      code:
        vecPrelude({ WG, UPT }, vec, reads, up ? ['dg', 'du'] : ['dgu']) + gateUpCode(L.fused) + stores + ACTIVATIONS[act] + gatedBwdWgsl,
      bindings: [
        { name: 'dout', access: 'read', dtype: dout.dtype },
        ...(up
          ? [
              { name: 'g', access: 'read' as const, dtype: gate.dtype },
              { name: 'u', access: 'read' as const, dtype: up.dtype },
              { name: 'dg', access: 'rw' as const, dtype: 'f32' as const },
              { name: 'du', access: 'rw' as const, dtype: 'f32' as const },
            ]
          : [
              { name: 'gu', access: 'read' as const, dtype: gate.dtype },
              { name: 'dgu', access: 'rw' as const, dtype: 'f32' as const },
            ]),
      ],
      params: ['u32:units', 'u32:I'],
    };
  });
  for (const [r0, r1] of plan.ranges) {
    const b = (t: DeviceTensor, ub: number) => bindUnits(plan, t, ub, r0, r1);
    const units = ((r1 - r0) * I) / vec;
    const bufs = [b(dout, I * elemBytes(dout)), b(gate, gRow), ...(up ? [b(up, I * elemBytes(up))] : []), ...outs.map((o) => b(o, oRow))];
    ctx.dispatch(k, bufs, grid(Math.ceil(units / (WG * UPT))), [units, I]);
  }
}

/** Checks and output allocation of the two-tensor backward: returns [dgate, dup]. */
export function gatedBackwardOuts(
  ctx: Context,
  op: string,
  gate: DeviceTensor,
  up: DeviceTensor,
  opts: { dgateOut?: DeviceTensor; dupOut?: DeviceTensor },
): [DeviceTensor, DeviceTensor] {
  layoutOf(op, gate, up);
  const dgate = opts.dgateOut ?? empty(ctx, gate.shape);
  if (opts.dgateOut) checkOut(opts.dgateOut, gate.shape, `${op}: dgateOut`);
  const dup = opts.dupOut ?? empty(ctx, gate.shape);
  if (opts.dupOut) checkOut(opts.dupOut, gate.shape, `${op}: dupOut`);
  return [dgate, dup];
}

/** Checks and output allocation of the fused-layout backward: returns dgateUp. */
export function gatedFusedBackwardOut(ctx: Context, op: string, gateUp: DeviceTensor, opts: GatedOptions): DeviceTensor {
  layoutOf(op, gateUp, null);
  const d = opts.out ?? empty(ctx, gateUp.shape);
  if (opts.out) checkOut(opts.out, gateUp.shape, `${op}: out`);
  return d;
}
