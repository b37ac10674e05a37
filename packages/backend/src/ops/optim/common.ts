import commonWgslSrc from '../../../../../shaders/optim-common.wgsl';
import { cachedKernel as sharedCachedKernel } from '../../kernel-cache';
import fillWgsl from '../../../../../shaders/optim-fill.wgsl';
import multiWgsl from '../../../../../shaders/optim-multi.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context, Kernel } from '../../context';
import * as checks from '../../checks';
import { fmtShape } from '../../checks';
import { ConfigError, ShapeError } from '../../errors';
import { dispatch1d, grid1d } from '../../grid';
import type { BindingSpec, KernelDef, ParamSpec } from '../../kernel';
import { numel, type DeviceTensor } from '../../tensor';
import type { SegmentTable } from './table';

/** Inputs that let a training loop clip, unscale and skip optimizer steps without reading anything back. */
export interface GpuStepControls {
  /**
   * An f32 tensor whose element 0 multiplies every gradient inside the step (the gradients in memory are not
   * changed): the clip coefficient from `gradNorm`, a loss-scale unscale factor, or both folded into one.
   */
  gradScale?: DeviceTensor;
  /** A 32-bit tensor (a found-inf flag from `unscaleAndCheck`): if its element 0 is non-zero the step does
   *  nothing at all (parameters and optimizer state stay bit-identical). */
  skip?: DeviceTensor;
  /**
   * The 1-based step count when the host knows it (PyTorch's `state['step']` after its increment). Give either
   * `step` or `stepState`.
   */
  step?: number;
  /**
   * A GPU step state from `createStepState`, advanced once per step by `advanceStep` *before* the optimizer
   * dispatches; a step skipped on the GPU then does not count, as in PyTorch with GradScaler. While the state
   * is still at t = 0 (never advanced) the step is a no-op.
   */
  stepState?: DeviceTensor;
  /** Host-side factor on every gradient (e.g. 1/accumulation steps); default 1. */
  gradMultiplier?: number;
  /** Maximise the objective instead (PyTorch's `maximize`: the gradient is negated). */
  maximize?: boolean;
}

/** A kernel compiled once per context and `key` (see `kernel-cache.ts`; keys live in the 'optim' namespace). */
export function cachedKernel(ctx: Context, key: string, make: () => KernelDef): Kernel {
  return sharedCachedKernel(ctx, `optim:${key}`, make);
}

/** An optional input: bound as storage when present, else a one-element private array with a default. */
export interface Optional {
  name: string;
  type: 'f32' | 'u32';
  present: boolean;
  /** WGSL literals of the private fallback array. */
  fallback: string[];
}

/** Bindings and WGSL prefix declarations for a list of optional inputs. */
export function optionalInputs(opts: readonly Optional[]): { bindings: BindingSpec[]; prefix: string } {
  const bindings: BindingSpec[] = [];
  let prefix = '';
  for (const o of opts) {
    if (o.present) bindings.push({ name: o.name, access: 'read', dtype: o.type });
    else
      prefix += `var<private> ${o.name}: array<${o.type}, ${o.fallback.length}> = array<${o.type}, ${o.fallback.length}>(${o.fallback.join(', ')});\n`;
  }
  return { bindings, prefix };
}

export { fmtShape } from '../../checks';

/** Throw unless `t` is an f32 tensor (what in-place optimizer state must be). */
export function assertF32(t: DeviceTensor, what: string, op: string): void {
  if (t.dtype !== 'f32') throw new ShapeError(`${op}: ${what} must be f32, got ${t.dtype}${fmtShape(t.shape)}`);
}

/** Throw unless `t` has a float dtype (f32, f16 or bf16: what gradients may be). */
export function assertFloat(t: DeviceTensor, what: string, op: string): void {
  checks.assertFloat(t, `${op}: ${what}`);
}

/** Throw unless `t` fits one storage binding of this device (the runtime binds whole buffers at offset 0). */
export function assertBindable(ctx: Context, t: DeviceTensor, what: string, op: string): void {
  checks.checkBindable(ctx, op, [t, what]);
}

/** Throw unless `t` is a 32-bit tensor with at least `min` elements (GPU scalars, flags, small states). */
export function assertWords(t: DeviceTensor, min: number, what: string, op: string, dtypes: readonly string[]): void {
  if (!dtypes.includes(t.dtype) || numel(t.shape) < min)
    throw new ShapeError(
      `${op}: ${what} must be a ${dtypes.join('/')} tensor of at least ${min} element${min > 1 ? 's' : ''}, ` +
        `got ${t.dtype}${fmtShape(t.shape)}`,
    );
}

/** Throw if the same buffer appears twice among tensors the kernel writes or reads (aliasing). */
export function assertDistinct(op: string, named: readonly [string, DeviceTensor | undefined][]): void {
  const seen = new Map<number, string>();
  for (const [name, t] of named) {
    if (!t) continue;
    const prev = seen.get(t.buffer.id);
    if (prev) throw new ShapeError(`${op}: ${name} and ${prev} are the same buffer; they must be distinct tensors`);
    seen.set(t.buffer.id, name);
  }
}

/** Validate the common controls; returns the gradient multiplier the kernels get as `gmul`. */
export function checkControls(o: GpuStepControls, op: string): number {
  if (o.gradScale) assertWords(o.gradScale, 1, 'gradScale', op, ['f32']);
  if (o.skip) assertWords(o.skip, 1, 'skip', op, ['u32', 'i32']);
  if (o.stepState) {
    assertWords(o.stepState, 3, 'stepState', op, ['u32']);
    if (o.step !== undefined) throw new ConfigError(`${op}: give either step or stepState, not both`);
  } else if (o.step === undefined || !Number.isInteger(o.step) || o.step < 1)
    throw new ConfigError(`${op}: step must be an integer >= 1 (the count including this step), got ${o.step}`);
  const gm = o.gradMultiplier ?? 1;
  if (!Number.isFinite(gm)) throw new ConfigError(`${op}: gradMultiplier must be finite, got ${gm}`);
  return o.maximize ? -gm : gm;
}

/** The optional inputs of the optimizer kernels, in binding order. */
export function controlInputs(o: GpuStepControls): Optional[] {
  return [
    { name: 'gscale', type: 'f32', present: !!o.gradScale, fallback: ['1.0'] },
    { name: 'skip', type: 'u32', present: !!o.skip, fallback: ['0u'] },
    { name: 'stepst', type: 'u32', present: !!o.stepState, fallback: ['0u', '0u', '0u', '0u'] },
  ];
}

/** Buffers of the present optional controls, in binding order. */
export function controlBuffers(o: GpuStepControls): GpuBuffer[] {
  const b: GpuBuffer[] = [];
  if (o.gradScale) b.push(o.gradScale.buffer);
  if (o.skip) b.push(o.skip.buffer);
  if (o.stepState) b.push(o.stepState.buffer);
  return b;
}

/** A key fragment naming which controls are present. */
export function controlKey(o: GpuStepControls): string {
  return `${o.gradScale ? 'S' : '-'}${o.skip ? 'K' : '-'}${o.stepState ? 'T' : '-'}`;
}

/** What sets an optimizer kernel apart: its shader (defining opt_info, opt_load, opt_apply), its state
 *  bindings (rw f32, after `param`), params (`n`, `row`, `lr`, `wd`, `gmul` first, `aux` last) and consts. */
export interface OptimShader {
  name: string;
  code: string;
  state: readonly string[];
  params: readonly ParamSpec[];
  consts: Readonly<Record<string, boolean>>;
  /** WGSL in front of everything (declarations the shader needs when a binding is absent). */
  prefix?: string;
}

/**
 * The kernel of an optimizer shader for one gradient dtype and set of controls: per tensor (entry point `main`
 * of optim-common.wgsl) or over segment-table arenas (`multi`, optim-multi.wgsl). Bindings: param, the state,
 * g, the present controls (see {@link controlInputs}), then the table (multi).
 */
export function optimKernel(ctx: Context, sh: OptimShader, gradDtype: DeviceTensor['dtype'], c: GpuStepControls, multi: boolean): Kernel {
  const mode = multi ? 'multi' : 'one';
  const key = `${sh.name}:${mode}:${gradDtype}:${controlKey(c)}:${JSON.stringify(sh.consts)}`;
  return cachedKernel(ctx, key, () => {
    const opt = optionalInputs(controlInputs(c));
    const bindings: BindingSpec[] = [
      { name: 'param', access: 'rw', dtype: 'f32' },
      ...sh.state.map((name) => ({ name, access: 'rw' as const, dtype: 'f32' as const })),
      { name: 'g', access: 'read', dtype: gradDtype },
      ...opt.bindings,
    ];
    if (multi) bindings.push({ name: 'table', access: 'read', dtype: 'u32' });
    return {
      name: `${sh.name}-${mode}-${controlKey(c)}`,
      code: opt.prefix + (sh.prefix ?? '') + commonWgslSrc + sh.code + (multi ? multiWgsl : ''),
      entryPoint: multi ? 'multi' : 'main',
      bindings,
      params: sh.params,
      consts: { STEP_BUF: !!c.stepState, ...sh.consts },
    };
  });
}

/**
 * Dispatch an optimizer kernel from {@link optimKernel} over `n` elements of one tensor (256 threads a group)
 * or over a segment table (one workgroup a chunk; `lr` is then the table's lr scale and the table is bound
 * last). `params` fill the kernel's params between `gmul` and `aux`.
 */
export function dispatchOptim(
  ctx: Context,
  k: Kernel,
  bufs: GpuBuffer[],
  over: number | SegmentTable,
  lr: number,
  wd: number,
  gmul: number,
  params: readonly number[],
): void {
  const table = typeof over === 'number' ? null : over;
  const n = table ? table.chunks : (over as number);
  const { wg, row } = grid1d(n, table ? 1 : 256);
  if (table) bufs.push(table.buffer);
  ctx.dispatch(k, bufs, n ? wg : 0, [n, row, lr, table ? 0 : wd, gmul, ...params, table ? 2 * table.segments : 0]);
}

/** Per-owner u32 tables of the last call, by tag, reused while their words stay the same (a training loop's). */
const tables = new WeakMap<GpuBuffer, Map<string, { key: string; buf: GpuBuffer }>>();

/**
 * A GPU buffer holding `words`, kept per `owner` buffer (an arena) and `tag` (the kernel family) and uploaded
 * again only when the words change: a loop that passes the same arena pieces every step uploads its table once.
 * The owner's tables are released with it (`ctx.onRelease`): pooled buffer objects are reused, so a table keyed
 * on one would otherwise stay live for good (about 512 bytes per `Trainer.fit` under mixed precision, until
 * 2026-11-24).
 */
export function cachedTable(ctx: Context, owner: GpuBuffer, tag: string, words: readonly number[]): GpuBuffer {
  const key = words.join(',');
  let m = tables.get(owner);
  if (!m) {
    const own: Map<string, { key: string; buf: GpuBuffer }> = (m = new Map());
    tables.set(owner, own);
    ctx.onRelease(owner, () => {
      tables.delete(owner);
      for (const t of own.values()) ctx.release(t.buf);
    });
  }
  const t = m.get(tag);
  if (t && t.key === key && !t.buf.released) return t.buf;
  if (t) ctx.release(t.buf);
  const buf = ctx.alloc(Math.max(4, words.length * 4));
  if (words.length) ctx.write(buf, Uint32Array.from(words));
  m.set(tag, { key, buf });
  return buf;
}

/** Fill `n` 32-bit words of a buffer with `value` (bits) on the GPU: ordered with other dispatches, no flush. */
export function fillWords(ctx: Context, buf: GpuBuffer, n: number, value: number): void {
  const k = cachedKernel(ctx, 'optim-fill', () => ({
    name: 'optim-fill',
    code: fillWgsl,
    bindings: [{ name: 'dst', access: 'rw', dtype: 'u32' }],
    params: ['u32:n', 'u32:row', 'u32:value'],
  }));
  dispatch1d(ctx, k, [buf], n, [value >>> 0]);
}
