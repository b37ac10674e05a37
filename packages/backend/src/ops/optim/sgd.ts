import multiWgsl from '../../../../../shaders/optim-multi.wgsl';
import sgdWgsl from '../../../../../shaders/sgd.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import type { BindingSpec } from '../../kernel';
import { numel, type DeviceTensor } from '../../tensor';
import {
  assertBindable,
  assertDistinct,
  assertF32,
  assertFloat,
  cachedKernel,
  checkControls,
  commonWgsl,
  controlBuffers,
  controlInputs,
  controlKey,
  fmtShape,
  optionalInputs,
  type GpuStepControls,
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

function kernelFor(ctx: Context, gradDtype: DeviceTensor['dtype'], c: GpuStepControls, hasMom: boolean, nesterov: boolean, multi: boolean) {
  const key = `sgd:${multi ? 'multi' : 'one'}:${gradDtype}:${controlKey(c)}:${hasMom}:${nesterov}`;
  return cachedKernel(ctx, key, () => {
    const opt = optionalInputs(controlInputs(c));
    const bindings: BindingSpec[] = [{ name: 'param', access: 'rw', dtype: 'f32' }];
    if (hasMom) bindings.push({ name: 'mom', access: 'rw', dtype: 'f32' });
    bindings.push({ name: 'g', access: 'read', dtype: gradDtype }, ...opt.bindings);
    if (multi) bindings.push({ name: 'table', access: 'read', dtype: 'u32' });
    const momDecl = hasMom ? '' : 'var<private> mom: array<f32, 1>;\n';
    return {
      name: `sgd-${multi ? 'multi' : 'one'}-${controlKey(c)}${hasMom ? '-mom' : ''}`,
      code: opt.prefix + momDecl + commonWgsl + sgdWgsl + (multi ? multiWgsl : ''),
      entryPoint: multi ? 'multi' : 'main',
      bindings,
      params: PARAMS,
      consts: { STEP_BUF: !!c.stepState, HAS_MOMENTUM: hasMom, NESTEROV: nesterov },
    };
  });
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
  const hasMom = h.mom > 0;
  const n = numel(param.shape);
  const k = kernelFor(ctx, grad.dtype, opts, hasMom, h.nesterov, false);
  const { wg, row } = grid1d(n, 256);
  const bufs: GpuBuffer[] = [param.buffer];
  if (hasMom) bufs.push(momentumBuffer!.buffer);
  bufs.push(grad.buffer, ...controlBuffers(opts));
  ctx.dispatch(k, bufs, n ? wg : 0, [n, row, opts.lr, wd, gmul, h.mom, 1 - h.damp, opts.step === 1 ? 1 : 0, 0]);
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
  const hasMom = h.mom > 0;
  const k = kernelFor(ctx, grad.dtype, opts, hasMom, h.nesterov, true);
  const { wg, row } = grid1d(table.chunks, 1);
  const bufs: GpuBuffer[] = [param.buffer];
  if (hasMom) bufs.push(momentumBuffer!.buffer);
  bufs.push(grad.buffer, ...controlBuffers(opts), table.buffer);
  ctx.dispatch(k, bufs, table.chunks ? wg : 0, [
    table.chunks,
    row,
    lrScale,
    0,
    gmul,
    h.mom,
    1 - h.damp,
    opts.step === 1 ? 1 : 0,
    2 * table.segments,
  ]);
}
