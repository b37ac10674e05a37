import scaleWgsl from '../../../../../shaders/loss-scale.wgsl';
import updateWgsl from '../../../../../shaders/loss-scale-update.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { dispatch1d } from '../../grid';
import { numel, upload, type DeviceTensor } from '../../tensor';
import { assertBindable, assertF32, assertWords, cachedKernel, fillWords, optionalInputs } from './common';

function scaleDispatch(
  ctx: Context,
  op: string,
  x: DeviceTensor,
  factor: number | DeviceTensor,
  invert: boolean,
  found: DeviceTensor | null,
): void {
  assertF32(x, 'x', op);
  assertBindable(ctx, x, 'x', op);
  const onGpu = typeof factor !== 'number';
  if (onGpu) {
    assertWords(factor, 1, 'scale', op, ['f32']);
    if (factor.buffer.id === x.buffer.id) throw new ShapeError(`${op}: the scale tensor must not be x itself`);
  } else if (!Number.isFinite(factor) || (invert && factor === 0))
    throw new ConfigError(`${op}: the scale must be finite${invert ? ' and non-zero' : ''}, got ${factor}`);
  if (found) {
    assertWords(found, 1, 'foundInf', op, ['u32', 'i32']);
    if (found.buffer.id === x.buffer.id || (onGpu && found.buffer.id === factor.buffer.id))
      throw new ShapeError(`${op}: foundInf must be a buffer of its own`);
  }
  const check = !!found;
  const k = cachedKernel(ctx, `loss-scale:${onGpu}:${invert}:${check}`, () => {
    const o = optionalInputs([{ name: 's', type: 'f32', present: onGpu, fallback: ['1.0'] }]);
    return {
      name: `loss-scale${onGpu ? '-gpu' : ''}${check ? '-check' : ''}`,
      code: o.prefix + (check ? '' : 'var<private> found: array<u32, 1>;\n') + scaleWgsl,
      bindings: [
        { name: 'x', access: 'rw', dtype: 'f32' },
        ...o.bindings,
        ...(check ? [{ name: 'found', access: 'rw' as const, dtype: 'u32' as const }] : []),
      ],
      params: ['u32:n', 'u32:row', 'f32:mul'],
      consts: { INVERT: onGpu && invert, CHECK: check },
    };
  });
  const n = numel(x.shape);
  const bufs: GpuBuffer[] = [x.buffer];
  if (onGpu) bufs.push(factor.buffer);
  if (found) bufs.push(found.buffer);
  const mul = onGpu ? 1 : invert ? 1 / factor : factor;
  dispatch1d(ctx, k, bufs, n, [mul], Math.ceil(n / 1024) * 256);
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
 * it, and stays on the GPU to be passed to the optimizer as `skip`.
 */
export function unscaleAndCheck(ctx: Context, grad: DeviceTensor, scale: number | DeviceTensor, foundInf: DeviceTensor): void {
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
