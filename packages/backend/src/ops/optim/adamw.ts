import adamwWgsl from '../../../../../shaders/adamw.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { numel, type DeviceTensor } from '../../tensor';
import {
  assertBindable,
  assertDistinct,
  assertF32,
  assertFloat,
  checkControls,
  controlBuffers,
  dispatchOptim,
  fmtShape,
  optimKernel,
  type GpuStepControls,
  type OptimShader,
} from './common';
import { checkBeta } from './step';
import type { SegmentTable } from './table';

/** Hyper-parameters shared by the per-tensor and multi-tensor AdamW steps (PyTorch defaults). */
export interface AdamWHyper {
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  eps?: number;
}

/** Options of `adamwStep`. */
export interface AdamWOptions extends AdamWHyper, GpuStepControls {
  /** Learning rate (this step's value when a schedule changes it). */
  lr: number;
  /** Decoupled weight decay (`param *= 1 - lr * weightDecay` first). Default 0.01, as torch.optim.AdamW. */
  weightDecay?: number;
}

/** Options of `adamwStepMulti`: each segment's lr and weight decay come from the table. */
export interface AdamWMultiOptions extends AdamWHyper, GpuStepControls {
  /** Multiplies every segment's lr (a schedule factor that needs no table upload). Default 1. */
  lrScale?: number;
}

const PARAMS = [
  'u32:n',
  'u32:row',
  'f32:lr',
  'f32:wd',
  'f32:gmul',
  'f32:beta1',
  'f32:beta2',
  'f32:omb1',
  'f32:omb2',
  'f32:eps',
  'f32:inv_bc1',
  'f32:inv_sqrt_bc2',
  'u32:aux',
] as const;

function hyper(h: AdamWHyper, c: GpuStepControls, op: string): { b1: number; b2: number; eps: number; ib1: number; isb2: number } {
  const b1 = h.beta1 ?? 0.9;
  const b2 = h.beta2 ?? 0.999;
  const eps = h.eps ?? 1e-8;
  checkBeta(b1, 'beta1', op);
  checkBeta(b2, 'beta2', op);
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new ConfigError(`${op}: eps must be finite and >= 0, got ${eps}`);
  const t = c.step ?? 1;
  return { b1, b2, eps, ib1: 1 / (1 - b1 ** t), isb2: 1 / Math.sqrt(1 - b2 ** t) };
}

function checkTensors(
  ctx: Context,
  op: string,
  param: DeviceTensor,
  grad: DeviceTensor,
  m: DeviceTensor,
  v: DeviceTensor,
  c: GpuStepControls,
): void {
  assertF32(param, 'param', op);
  assertF32(m, 'm (exp_avg)', op);
  assertF32(v, 'v (exp_avg_sq)', op);
  assertFloat(grad, 'grad', op);
  for (const [n, t] of [['param', param], ['grad', grad], ['m', m], ['v', v]] as const) assertBindable(ctx, t, n, op);
  // writable buffers must be unique; the read-only inputs may share one buffer
  assertDistinct(op, [['param', param], ['m', m], ['v', v], ['grad', grad]]);
  for (const [n, t] of [['gradScale', c.gradScale], ['skip', c.skip], ['stepState', c.stepState]] as const)
    if (t) assertDistinct(op, [['param', param], ['m', m], ['v', v], [n, t]]);
}

function shader(): OptimShader {
  return { name: 'adamw', code: adamwWgsl, state: ['m', 'v'], params: PARAMS, consts: {} };
}

/**
 * One AdamW step on one tensor, in place, with torch.optim.AdamW semantics (amsgrad off): decoupled weight
 * decay first, then the moment updates and the bias-corrected step. `m` and `v` must start at zero. One
 * dispatch; `gradScale`, `skip` and `stepState` (see `GpuStepControls`) are read on the GPU, so clipping,
 * loss-scale unscaling and found-inf skipping need no read-back. `grad` may be f32, f16 or bf16; the rest f32,
 * all of one shape. Throws `ShapeError` for mismatched shapes or dtypes, `ConfigError` for bad hyper-parameters.
 */
export function adamwStep(
  ctx: Context,
  param: DeviceTensor,
  grad: DeviceTensor,
  m: DeviceTensor,
  v: DeviceTensor,
  opts: AdamWOptions,
): void {
  const op = 'adamwStep';
  checkTensors(ctx, op, param, grad, m, v, opts);
  const s = fmtShape(param.shape);
  for (const [n, t] of [['grad', grad], ['m', m], ['v', v]] as const)
    if (fmtShape(t.shape) !== s) throw new ShapeError(`${op}: ${n} has shape ${fmtShape(t.shape)}, param ${s}`);
  const gmul = checkControls(opts, op);
  const h = hyper(opts, opts, op);
  const wd = opts.weightDecay ?? 0.01;
  if (!Number.isFinite(opts.lr) || !Number.isFinite(wd))
    throw new ConfigError(`${op}: lr and weightDecay must be finite, got ${opts.lr} and ${wd}`);
  const k = optimKernel(ctx, shader(), grad.dtype, opts, false);
  const bufs = [param.buffer, m.buffer, v.buffer, grad.buffer, ...controlBuffers(opts)];
  dispatchOptim(ctx, k, bufs, numel(param.shape), opts.lr, wd, gmul, [h.b1, h.b2, 1 - h.b1, 1 - h.b2, h.eps, h.ib1, h.isb2]);
}

/**
 * One AdamW step over many tensors in one dispatch: `param`, `grad`, `m`, `v` are flat arenas (each tensor at
 * the same element offset in all four) and `table` (from `createSegmentTable`) lists each tensor's offset,
 * length, lr and weight decay. Elements outside every segment are left untouched. Same semantics and controls
 * as `adamwStep`; betas, eps and the step are shared by the whole table (one PyTorch param group's worth, with
 * per-tensor lr/weight decay on top).
 */
export function adamwStepMulti(
  ctx: Context,
  table: SegmentTable,
  param: DeviceTensor,
  grad: DeviceTensor,
  m: DeviceTensor,
  v: DeviceTensor,
  opts: AdamWMultiOptions,
): void {
  const op = 'adamwStepMulti';
  checkTensors(ctx, op, param, grad, m, v, opts);
  for (const [n, t] of [['param', param], ['grad', grad], ['m', m], ['v', v]] as const)
    if (numel(t.shape) < table.extent)
      throw new ShapeError(`${op}: ${n} ${fmtShape(t.shape)} has fewer than the table's ${table.extent} elements`);
  const gmul = checkControls(opts, op);
  const h = hyper(opts, opts, op);
  const lrScale = opts.lrScale ?? 1;
  if (!Number.isFinite(lrScale)) throw new ConfigError(`${op}: lrScale must be finite, got ${lrScale}`);
  const k = optimKernel(ctx, shader(), grad.dtype, opts, true);
  const bufs = [param.buffer, m.buffer, v.buffer, grad.buffer, ...controlBuffers(opts)];
  dispatchOptim(ctx, k, bufs, table, lrScale, 0, gmul, [h.b1, h.b2, 1 - h.b1, 1 - h.b2, h.eps, h.ib1, h.isb2]);
}
