import sgdWgsl from '../../../../../shaders/sgd.wgsl';
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

/** Hyper-parameters shared by the per-tensor and multi-tensor SGD steps (PyTorch defaults). */
export interface SGDHyper {
  /** Default 0 (no momentum buffer needed). */
  momentum?: number;
  /** Default 0. */
  dampening?: number;
  /** Nesterov momentum (needs momentum > 0 and dampening 0, as PyTorch). Default false. */
  nesterov?: boolean;
}

/** Options of `sgdStep`. */
export interface SGDOptions extends SGDHyper, GpuStepControls {
  /** Learning rate (this step's value when a schedule changes it). */
  lr: number;
  /** L2 penalty added to the gradient (`d = g + weightDecay * param`). Default 0. */
  weightDecay?: number;
}

/** Options of `sgdStepMulti`: each segment's lr and weight decay come from the table. */
export interface SGDMultiOptions extends SGDHyper, GpuStepControls {
  /** Multiplies every segment's lr (a schedule factor that needs no table upload). Default 1. */
  lrScale?: number;
}

const PARAMS = [
  'u32:n',
  'u32:row',
  'f32:lr',
  'f32:wd',
  'f32:gmul',
  'f32:momentum',
  'f32:omd',
  'u32:first',
  'u32:aux',
] as const;

function hyper(h: SGDHyper, op: string, hasBuffer: boolean): { mom: number; damp: number; nesterov: boolean } {
  const mom = h.momentum ?? 0;
  const damp = h.dampening ?? 0;
  const nesterov = h.nesterov ?? false;
  checkBeta(mom, 'momentum', op);
  if (!Number.isFinite(damp)) throw new ConfigError(`${op}: dampening must be finite, got ${damp}`);
  if (nesterov && (mom <= 0 || damp !== 0))
    throw new ConfigError(`${op}: nesterov momentum requires momentum > 0 and dampening 0 (got ${mom}, ${damp})`);
  if (mom > 0 && !hasBuffer) throw new ShapeError(`${op}: momentum ${mom} needs a momentum buffer (got none)`);
  return { mom, damp, nesterov };
}

function checkTensors(
  ctx: Context,
  op: string,
  param: DeviceTensor,
  grad: DeviceTensor,
  buf: DeviceTensor | null,
  c: GpuStepControls,
): void {
  assertF32(param, 'param', op);
  if (buf) assertF32(buf, 'momentumBuffer', op);
  assertFloat(grad, 'grad', op);
  for (const [n, t] of [['param', param], ['grad', grad], ['momentumBuffer', buf]] as const) if (t) assertBindable(ctx, t, n, op);
  assertDistinct(op, [['param', param], ['momentumBuffer', buf ?? undefined], ['grad', grad]]);
  for (const [n, t] of [['gradScale', c.gradScale], ['skip', c.skip], ['stepState', c.stepState]] as const)
    if (t) assertDistinct(op, [['param', param], ['momentumBuffer', buf ?? undefined], [n, t]]);
}

function shader(hasMom: boolean, nesterov: boolean): OptimShader {
  return {
    name: 'sgd',
    code: sgdWgsl,
    state: hasMom ? ['mom'] : [],
    params: PARAMS,
    consts: { HAS_MOMENTUM: hasMom, NESTEROV: nesterov },
    prefix: hasMom ? '' : 'var<private> mom: array<f32, 1>;\n',
  };
}

/**
 * One SGD step on one tensor, in place, with torch.optim.SGD semantics: weight decay as an L2 term added to the
 * gradient, momentum with dampening (the buffer is set to the gradient on the first step, so it may start
 * uninitialised), optional Nesterov. `momentumBuffer` is required when momentum > 0 and may be null otherwise.
 * One dispatch; `gradScale`, `skip` and `stepState` (see `GpuStepControls`) are read on the GPU. `grad` may be
 * f32, f16 or bf16; the rest f32, all of one shape. Throws `ShapeError` / `ConfigError`.
 */
export function sgdStep(
  ctx: Context,
  param: DeviceTensor,
  grad: DeviceTensor,
  momentumBuffer: DeviceTensor | null,
  opts: SGDOptions,
): void {
  const op = 'sgdStep';
  checkTensors(ctx, op, param, grad, momentumBuffer, opts);
  const s = fmtShape(param.shape);
  for (const [n, t] of [['grad', grad], ['momentumBuffer', momentumBuffer]] as const)
    if (t && fmtShape(t.shape) !== s) throw new ShapeError(`${op}: ${n} has shape ${fmtShape(t.shape)}, param ${s}`);
  const gmul = checkControls(opts, op);
  const h = hyper(opts, op, !!momentumBuffer);
  const wd = opts.weightDecay ?? 0;
  if (!Number.isFinite(opts.lr) || !Number.isFinite(wd))
    throw new ConfigError(`${op}: lr and weightDecay must be finite, got ${opts.lr} and ${wd}`);
  const k = optimKernel(ctx, shader(h.mom > 0, h.nesterov), grad.dtype, opts, false);
  const bufs = [param.buffer, ...(h.mom > 0 ? [momentumBuffer!.buffer] : []), grad.buffer, ...controlBuffers(opts)];
  dispatchOptim(ctx, k, bufs, numel(param.shape), opts.lr, wd, gmul, [h.mom, 1 - h.damp, opts.step === 1 ? 1 : 0]);
}

/**
 * One SGD step over many tensors in one dispatch: `param`, `grad` and `momentumBuffer` are flat arenas and
 * `table` (from `createSegmentTable`) gives each tensor's offset, length, lr and weight decay. Same semantics
 * and controls as `sgdStep`; momentum, dampening, Nesterov and the step are shared by the whole table.
 */
export function sgdStepMulti(
  ctx: Context,
  table: SegmentTable,
  param: DeviceTensor,
  grad: DeviceTensor,
  momentumBuffer: DeviceTensor | null,
  opts: SGDMultiOptions,
): void {
  const op = 'sgdStepMulti';
  checkTensors(ctx, op, param, grad, momentumBuffer, opts);
  for (const [n, t] of [['param', param], ['grad', grad], ['momentumBuffer', momentumBuffer]] as const)
    if (t && numel(t.shape) < table.extent)
      throw new ShapeError(`${op}: ${n} ${fmtShape(t.shape)} has fewer than the table's ${table.extent} elements`);
  const gmul = checkControls(opts, op);
  const h = hyper(opts, op, !!momentumBuffer);
  const lrScale = opts.lrScale ?? 1;
  if (!Number.isFinite(lrScale)) throw new ConfigError(`${op}: lrScale must be finite, got ${lrScale}`);
  const k = optimKernel(ctx, shader(h.mom > 0, h.nesterov), grad.dtype, opts, true);
  const bufs = [param.buffer, ...(h.mom > 0 ? [momentumBuffer!.buffer] : []), grad.buffer, ...controlBuffers(opts)];
  dispatchOptim(ctx, k, bufs, table, lrScale, 0, gmul, [h.mom, 1 - h.damp, opts.step === 1 ? 1 : 0]);
}
