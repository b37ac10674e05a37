import scaleWgsl from '../../../../../shaders/loss-scale.wgsl';
import updateWgsl from '../../../../../shaders/loss-scale-update.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { dispatch1d, grid2d } from '../../grid';
import { numel, upload, type DeviceTensor } from '../../tensor';
import { assertBindable, assertF32, assertWords, cachedKernel, cachedTable, fillWords, optionalInputs } from './common';
import type { ArenaPiece } from './grad-norm';

function scaleKernel(ctx: Context, onGpu: boolean, invert: boolean, check: boolean, pieces: boolean) {
  return cachedKernel(ctx, `loss-scale:${onGpu}:${invert}:${check}:${pieces}`, () => {
    const o = optionalInputs([
      { name: 's', type: 'f32', present: onGpu, fallback: ['1.0'] },
      { name: 'found', type: 'u32', present: check, fallback: ['0u'] },
      { name: 'table', type: 'u32', present: pieces, fallback: ['0u', '0u'] },
    ]);
    return {
      name: `loss-scale${onGpu ? '-gpu' : ''}${check ? '-check' : ''}${pieces ? '-pieces' : ''}`,
      code: o.prefix + scaleWgsl,
      entryPoint: pieces ? 'pieces' : 'main',
      bindings: [{ name: 'x', access: 'rw', dtype: 'f32' }, ...o.bindings.map((b) => (b.name === 'found' ? { ...b, access: 'rw' as const } : b))],
      params: ['u32:n', 'u32:row', 'f32:mul'],
      consts: { INVERT: onGpu && invert, CHECK: check },
    };
  });
}

function scaleDispatch(
  ctx: Context,
  op: string,
  xs: DeviceTensor | readonly (DeviceTensor | ArenaPiece)[],
  factor: number | DeviceTensor,
  invert: boolean,
  found: DeviceTensor | null,
): void {
  const list = Array.isArray(xs) ? (xs as readonly (DeviceTensor | ArenaPiece)[]) : [xs as DeviceTensor];
  const onGpu = typeof factor !== 'number';
  if (!onGpu && (!Number.isFinite(factor) || (invert && factor === 0)))
    throw new ConfigError(`${op}: the scale must be finite${invert ? ' and non-zero' : ''}, got ${factor}`);
  if (onGpu) assertWords(factor, 1, 'scale', op, ['f32']);
  if (found) assertWords(found, 1, 'foundInf', op, ['u32', 'i32']);
  // the tensors alone, the pieces of each arena together: chunks of at most 1024 elements, one workgroup each
  const arenas = new Map<GpuBuffer, { x: DeviceTensor; words: number[] }>();
  const tensors: DeviceTensor[] = [];
  list.forEach((e, i) => {
    const x = 'arena' in e ? e.arena : e;
    const what = list.length > 1 || Array.isArray(xs) ? `x[${i}]` : 'x';
    assertF32(x, what, op);
    assertBindable(ctx, x, what, op);
    if (onGpu && factor.buffer.id === x.buffer.id) throw new ShapeError(`${op}: the scale tensor must not be ${what} itself`);
    if (found && (found.buffer.id === x.buffer.id || (onGpu && found.buffer.id === factor.buffer.id)))
      throw new ShapeError(`${op}: foundInf must be a buffer of its own`);
    if (!('arena' in e)) return void tensors.push(e);
    if (!(Number.isInteger(e.offset) && e.offset >= 0 && Number.isInteger(e.length) && e.length >= 0 && e.offset + e.length <= numel(x.shape)))
      throw new ShapeError(`${op}: ${what} covers [${e.offset}, ${e.offset + e.length}) of an arena of ${numel(x.shape)} elements`);
    let a = arenas.get(x.buffer);
    if (!a) arenas.set(x.buffer, (a = { x, words: [] }));
    for (let c = 0; c < e.length; c += 1024) a.words.push(e.offset + c, Math.min(1024, e.length - c));
  });
  const mul = onGpu ? 1 : invert ? 1 / factor : factor;
  const extra = [...(onGpu ? [factor.buffer] : []), ...(found ? [found.buffer] : [])];
  for (const x of tensors) {
    const n = numel(x.shape);
    dispatch1d(ctx, scaleKernel(ctx, onGpu, invert, !!found, false), [x.buffer, ...extra], n, [mul], Math.ceil(n / 1024) * 256);
  }
  for (const [buf, { words }] of arenas) {
    const count = words.length / 2;
    if (!count) continue;
    const table = cachedTable(ctx, buf, 'loss-scale', words);
    ctx.dispatch(scaleKernel(ctx, onGpu, invert, !!found, true), [buf, ...extra, table], grid2d(count), [count, 0, mul]);
  }
}

/**
 * `x *= s` in place (f32). `s` is a host number, or an f32 tensor whose element 0 is read on the GPU (e.g. the
 * clip coefficient from `gradNorm`, to clip gradients in place as clip_grad_norm_ does). One dispatch.
 */
export function scaleInPlace(ctx: Context, x: DeviceTensor, s: number | DeviceTensor): void {
  scaleDispatch(ctx, 'scaleInPlace', x, s, false, null);
}

/**
 * Unscale gradients in place, `grad *= 1 / scale`, and set `foundInf[0] = 1` if any element is inf or NaN (the
 * check is on the scaled value, as PyTorch's _amp_foreach_non_finite_check_and_unscale_). `scale` is a host
 * number or a tensor whose element 0 is the scale (the loss-scale state from `createLossScaleState` works as it
 * is). The flag is only ever set here: it accumulates over calls until `updateLossScale` or `clearFlag` resets
 * it, and stays on the GPU to be passed to the optimizer as `skip`. `grad` may be a list of gradients: tensors
 * take one dispatch each, the pieces of one arena (`ArenaPiece`, e.g. an optimizer's `foreach` gradients) one
 * dispatch together, with the same results.
 */
export function unscaleAndCheck(
  ctx: Context,
  grad: DeviceTensor | readonly (DeviceTensor | ArenaPiece)[],
  scale: number | DeviceTensor,
  foundInf: DeviceTensor,
): void {
  scaleDispatch(ctx, 'unscaleAndCheck', grad, scale, true, foundInf);
}

/** A zeroed u32[1] flag (found-inf) on the GPU. */
export function createFlag(ctx: Context): DeviceTensor {
  return upload(ctx, [0], [1], 'u32');
}

/** Reset a flag to 0 with a dispatch (ordered with the other work, no submit). */
export function clearFlag(ctx: Context, flag: DeviceTensor): void {
  assertWords(flag, 1, 'flag', 'clearFlag', ['u32', 'i32']);
  fillWords(ctx, flag.buffer, 1, 0);
}

/**
 * A GPU loss-scale state, f32[2]: element 0 the scale, element 1 the growth tracker (a u32 stored bitwise; read
 * it with `readLossScaleState`). PyTorch's GradScaler default initial scale is 2^16.
 */
export function createLossScaleState(ctx: Context, initScale = 2 ** 16): DeviceTensor {
  if (!(initScale > 0) || !Number.isFinite(initScale))
    throw new ConfigError(`createLossScaleState: initScale must be finite and > 0, got ${initScale}`);
  return upload(ctx, [initScale, 0], [2], 'f32');
}

/** Read a loss-scale state back (a sync point; for logging and checkpoints). */
export async function readLossScaleState(ctx: Context, state: DeviceTensor): Promise<{ scale: number; growthTracker: number }> {
  assertWords(state, 2, 'state', 'readLossScaleState', ['f32']);
  const b = await ctx.read(state.buffer, 8);
  return { scale: new Float32Array(b)[0]!, growthTracker: new Uint32Array(b)[1]! };
}

/** Options of `updateLossScale` (torch.cuda.amp.GradScaler's defaults). */
export interface LossScaleOptions {
  /** Default 2. */
  growthFactor?: number;
  /** Default 0.5. */
  backoffFactor?: number;
  /** Clean steps before the scale grows. Default 2000. */
  growthInterval?: number;
}

/**
 * GradScaler.update on the GPU (one 1-thread dispatch): on found-inf the scale is multiplied by `backoffFactor`
 * and the tracker reset; otherwise the tracker counts clean steps and after `growthInterval` of them the scale
 * grows by `growthFactor` (unless that would overflow f32). Then `foundInf` is reset to 0 for the next step.
 */
export function updateLossScale(ctx: Context, state: DeviceTensor, foundInf: DeviceTensor, opts: LossScaleOptions = {}): void {
  const op = 'updateLossScale';
  assertWords(state, 2, 'state', op, ['f32']);
  assertWords(foundInf, 1, 'foundInf', op, ['u32', 'i32']);
  if (state.buffer.id === foundInf.buffer.id) throw new ShapeError(`${op}: state and foundInf are the same buffer`);
  const growth = opts.growthFactor ?? 2;
  const backoff = opts.backoffFactor ?? 0.5;
  const interval = opts.growthInterval ?? 2000;
  if (!(growth > 1) || !Number.isFinite(growth)) throw new ConfigError(`${op}: growthFactor must be > 1, got ${growth}`);
  if (!(backoff > 0 && backoff < 1)) throw new ConfigError(`${op}: backoffFactor must be in (0, 1), got ${backoff}`);
  if (!Number.isInteger(interval) || interval < 1 || interval >= 2 ** 32)
    throw new ConfigError(`${op}: growthInterval must be a positive integer, got ${interval}`);
  const k = cachedKernel(ctx, 'loss-scale-update', () => ({
    name: 'loss-scale-update',
    code: updateWgsl,
    bindings: [
      { name: 'state', access: 'rw', dtype: 'u32' },
      { name: 'found', access: 'rw', dtype: 'u32' },
    ],
    params: ['f32:growth', 'f32:backoff', 'u32:interval'],
  }));
  ctx.dispatch(k, [state.buffer, foundInf.buffer], 1, [growth, backoff, interval]);
}
