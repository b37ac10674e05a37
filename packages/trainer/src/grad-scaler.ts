import {
  clearFlag,
  ConfigError,
  createFlag,
  createLossScaleState,
  empty,
  readLossScaleState,
  scaleInPlace,
  unscaleAndCheck,
  updateLossScale,
  type Context,
  type DeviceTensor,
} from '@rusty/backend';
import { gradPieces, mul, releaseRef, retain, Tensor, type Optimizer, type StepControls } from '@rusty/autograd';

/** Options of `GradScaler` (PyTorch's `torch.amp.GradScaler` defaults). */
export interface GradScalerOptions {
  /** Default 2^16. */
  initScale?: number;
  /** Default 2. */
  growthFactor?: number;
  /** Default 0.5. */
  backoffFactor?: number;
  /** Clean steps before the scale grows. Default 2000. */
  growthInterval?: number;
  /** `false` makes every method a pass-through (scale 1, nothing checked). Default true. */
  enabled?: boolean;
}

/** Serializable scaler state (for checkpoints). */
export interface GradScalerState {
  scale: number;
  growthTracker: number;
  growthFactor: number;
  backoffFactor: number;
  growthInterval: number;
  enabled: boolean;
}

/** An optimizer of `@rusty/autograd` (AdamW, SGD): parameter groups and `step(controls)`. */
export type SteppableOptimizer = Optimizer & { step(controls?: StepControls): void };

type ParamSource = Tensor[] | Optimizer | { paramGroups: { params: Tensor[] }[] };

function paramsOf(src: ParamSource): Tensor[] {
  return Array.isArray(src) ? src : src.paramGroups.flatMap((g) => g.params);
}

/**
 * Dynamic loss scaling with PyTorch's semantics, entirely on the GPU (nothing is read back per step):
 *
 * ```ts
 * scaler.scaleLoss(loss).backward();        // or loss.backward(scaler.lossGradient(loss))
 * scaler.unscaleAndCheck(optimizer);        // grads /= scale; found-inf flag set on inf/NaN
 * optimizer.step({ skip: scaler.skip });    // or scaler.step(optimizer): skipped on the GPU when the flag is set
 * scaler.update();                          // x0.5 after an overflow, x2 after 2000 clean steps; flag cleared
 * ```
 */
export class GradScaler {
  readonly enabled: boolean;
  readonly growthFactor: number;
  readonly backoffFactor: number;
  readonly growthInterval: number;
  /** f32[2] on the GPU: [scale, growth tracker (u32 bits)]. */
  readonly state: DeviceTensor;
  /** u32[1] found-inf flag, set by `unscaleAndCheck`, cleared by `update`. Pass it as `skip` to `optimizer.step`. */
  readonly foundInf: DeviceTensor;
  private unscaled = false;
  private scaleView: Tensor | null = null;

  constructor(
    readonly ctx: Context,
    opts: GradScalerOptions = {},
  ) {
    this.enabled = opts.enabled ?? true;
    this.growthFactor = opts.growthFactor ?? 2;
    this.backoffFactor = opts.backoffFactor ?? 0.5;
    this.growthInterval = opts.growthInterval ?? 2000;
    if (!(this.growthFactor > 1)) throw new ConfigError(`GradScaler: growthFactor must be > 1, got ${this.growthFactor}`);
    if (!(this.backoffFactor > 0 && this.backoffFactor < 1))
      throw new ConfigError(`GradScaler: backoffFactor must be in (0, 1), got ${this.backoffFactor}`);
    if (!Number.isInteger(this.growthInterval) || this.growthInterval < 1)
      throw new ConfigError(`GradScaler: growthInterval must be a positive integer, got ${this.growthInterval}`);
    this.state = createLossScaleState(ctx, this.enabled ? (opts.initScale ?? 2 ** 16) : 1);
    this.foundInf = createFlag(ctx);
  }

  /** The flag for `optimizer.step({ skip })` (undefined when disabled). */
  get skip(): DeviceTensor | undefined {
    return this.enabled ? this.foundInf : undefined;
  }

  /** The scale as a one-element tensor view of the GPU state (not to be disposed by the caller). */
  private scaleTensor(): Tensor {
    if (!this.scaleView) {
      retain(this.state.buffer);
      this.scaleView = new Tensor(this.ctx, { buffer: this.state.buffer, dtype: 'f32', shape: [1] }, false, null, 0, false);
    }
    return this.scaleView;
  }

  /**
   * `loss * scale` (differentiable), PyTorch's `scaler.scale(loss)`: call `.backward()` on the result. Disabled,
   * it returns `loss` itself.
   */
  scaleLoss(loss: Tensor): Tensor {
    if (!this.enabled) return loss;
    return mul(loss, this.scaleTensor());
  }

  /**
   * The output gradient that seeds `loss.backward(g)` with the scale (times `multiplier`, e.g. 1 / accumulation
   * steps) without a multiply in the graph: an f32 tensor of the loss's shape, filled on the GPU. Dispose it after
   * the backward.
   */
  lossGradient(loss: Tensor, multiplier = 1): Tensor {
    if (loss.size !== 1) throw new ConfigError(`GradScaler.lossGradient: the loss must have one element, got [${loss.shape.join(', ')}]`);
    if (!this.enabled) return Tensor.full(this.ctx, loss.shape, multiplier);
    const g = empty(this.ctx, loss.shape, 'f32');
    this.ctx.copy(this.state.buffer, g.buffer, 4);
    if (multiplier !== 1) scaleInPlace(this.ctx, g, multiplier);
    return new Tensor(this.ctx, g);
  }

  /**
   * Divide every gradient by the scale in place and set the found-inf flag when any is inf or NaN (checked on
   * the GPU). Once per step, before clipping; `step` calls it when it has not run.
   */
  unscaleAndCheck(params: ParamSource): void {
    if (!this.enabled || this.unscaled) return;
    // gradients a `foreach` optimizer keeps in arenas go as arena pieces: one dispatch per arena
    unscaleAndCheck(this.ctx, gradPieces(paramsOf(params)), this.state, this.foundInf);
    this.unscaled = true;
  }

  /** `optimizer.step` with `skip` set to the found-inf flag (unscaling first if needed). */
  step(optimizer: SteppableOptimizer, controls: StepControls = {}): void {
    this.unscaleAndCheck(optimizer);
    optimizer.step({ ...controls, skip: this.skip });
  }

  /** Adjust the scale for the next step (back off on overflow, grow after `growthInterval` clean steps) and
   *  clear the flag. After the optimizer step. */
  update(): void {
    this.unscaled = false;
    if (!this.enabled) return;
    updateLossScale(this.ctx, this.state, this.foundInf, {
      growthFactor: this.growthFactor,
      backoffFactor: this.backoffFactor,
      growthInterval: this.growthInterval,
    });
  }

  /** The current scale (reads it back: a sync point). */
  async getScale(): Promise<number> {
    return (await readLossScaleState(this.ctx, this.state)).scale;
  }

  async stateDict(): Promise<GradScalerState> {
    const s = await readLossScaleState(this.ctx, this.state);
    return {
      ...s,
      growthFactor: this.growthFactor,
      backoffFactor: this.backoffFactor,
      growthInterval: this.growthInterval,
      enabled: this.enabled,
    };
  }

  /** Restore scale and growth tracker (the hyper-parameters stay those given to the constructor). */
  loadStateDict(s: GradScalerState): void {
    const words = new ArrayBuffer(8);
    new Float32Array(words)[0] = s.scale;
    new Uint32Array(words)[1] = s.growthTracker >>> 0;
    this.ctx.write(this.state.buffer, new Uint8Array(words));
    clearFlag(this.ctx, this.foundInf);
    this.unscaled = false;
  }

  dispose(): void {
    this.scaleView?.dispose();
    this.scaleView = null;
    releaseRef(this.ctx, this.state.buffer);
    releaseRef(this.ctx, this.foundInf.buffer);
  }
}
