import stepWgsl from '../../../../../shaders/optim-step.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { upload, type DeviceTensor } from '../../tensor';
import { assertWords, cachedKernel, optionalInputs } from './common';

/**
 * A GPU step state for an optimizer: u32[4] = [t, 1 - beta1^t (f32 bits), 1 - beta2^t (f32 bits), 0], all zero
 * before the first step. Pass it as `stepState` to the optimizer steps and advance it with `advanceStep`.
 */
export function createStepState(ctx: Context): DeviceTensor {
  return upload(ctx, [0, 0, 0, 0], [4], 'u32');
}

/** Options of `advanceStep`. */
export interface AdvanceStepOptions {
  /** AdamW's betas (the bias corrections are kept for them); SGD may leave them out. Defaults 0.9, 0.999. */
  beta1?: number;
  beta2?: number;
  /** Found-inf flag: when its element 0 is non-zero the step count does not advance. */
  skip?: DeviceTensor;
}

/**
 * Advance a GPU step state by one step unless `skip` is set (one 1-thread dispatch). Call it once per optimizer
 * step, before that step's optimizer dispatches; the bias corrections follow c_t = beta*c_{t-1} + (1 - beta),
 * which equals 1 - beta^t without the cancellation of computing beta^t in f32.
 */
export function advanceStep(ctx: Context, state: DeviceTensor, opts: AdvanceStepOptions = {}): void {
  const op = 'advanceStep';
  assertWords(state, 3, 'state', op, ['u32']);
  if (opts.skip) {
    assertWords(opts.skip, 1, 'skip', op, ['u32', 'i32']);
    if (opts.skip.buffer.id === state.buffer.id) throw new ShapeError(`${op}: skip and state are the same buffer`);
  }
  const b1 = opts.beta1 ?? 0.9;
  const b2 = opts.beta2 ?? 0.999;
  checkBeta(b1, 'beta1', op);
  checkBeta(b2, 'beta2', op);
  const hasSkip = !!opts.skip;
  const k = cachedKernel(ctx, `optim-step:${hasSkip}`, () => {
    const o = optionalInputs([{ name: 'skip', type: 'u32', present: hasSkip, fallback: ['0u'] }]);
    return {
      name: `optim-step${hasSkip ? '-skip' : ''}`,
      code: o.prefix + stepWgsl,
      bindings: [{ name: 'stepst', access: 'rw', dtype: 'u32' }, ...o.bindings],
      params: ['f32:beta1', 'f32:beta2', 'f32:omb1', 'f32:omb2'],
    };
  });
  ctx.dispatch(k, opts.skip ? [state.buffer, opts.skip.buffer] : [state.buffer], 1, [b1, b2, 1 - b1, 1 - b2]);
}

/** Throw unless `b` is a valid beta/momentum coefficient in [0, 1). */
export function checkBeta(b: number, what: string, op: string): void {
  if (!(b >= 0 && b < 1)) throw new ConfigError(`${op}: ${what} must be in [0, 1), got ${b}`);
}
