import {
  advanceStep,
  ConfigError,
  createStepState,
  download,
  fill,
  gradNorm,
  upload,
  type Context,
  type DeviceTensor,
} from '@rusty/backend';
import { releaseRef } from '../storage';
import type { Tensor } from '../tensor';

/** A parameter group as given by the user: its own lr / weight decay override the optimizer's defaults. */
export interface ParamGroupInit {
  params: Tensor[];
  lr?: number;
  weightDecay?: number;
}

export interface ParamGroup {
  params: Tensor[];
  lr: number;
  /** The lr the group started with (schedulers scale it). */
  initialLr: number;
  weightDecay: number;
}

/** GPU-side controls of one step (see `clipGradNorm` and `GradScaler`). */
export interface StepControls {
  /** f32 tensor whose element 0 multiplies every gradient inside the step (clip coefficient, unscale). */
  gradScale?: DeviceTensor | Tensor;
  /** u32 flag tensor: if element 0 is non-zero the whole step is skipped on the GPU (and not counted). */
  skip?: DeviceTensor | Tensor;
}

/** Serializable optimizer state (moments as arrays in parameter order). */
export interface OptimizerState {
  kind: string;
  steps: number;
  groups: { lr: number; initialLr: number; weightDecay: number; size: number }[];
  /** Per parameter (groups in order, params in order): named buffers, or null before the first step. */
  state: (Record<string, Float32Array> | null)[];
  /** Per group: the GPU step counter [t, bias corrections] as u32 words. */
  stepStates: Uint32Array[];
}

const dev = (t: DeviceTensor | Tensor | undefined): DeviceTensor | undefined =>
  t === undefined ? undefined : 'isTensor' in t ? t.data : t;

/** What AdamW and SGD share: groups, per-parameter state, zeroGrad, state dicts. */
export abstract class Optimizer {
  readonly paramGroups: ParamGroup[];
  /** Optimizer steps taken (host count, including steps the GPU skipped). */
  steps = 0;
  protected state = new Map<Tensor, Record<string, DeviceTensor>>();
  protected stepStates: DeviceTensor[];
  protected abstract readonly kind: string;
  protected abstract readonly slots: string[];

  constructor(
    readonly ctx: Context,
    params: Tensor[] | ParamGroupInit[],
    defaults: { lr: number; weightDecay: number },
  ) {
    const groups: ParamGroupInit[] = params.length && 'params' in params[0]! ? (params as ParamGroupInit[]) : [{ params: params as Tensor[] }];
    this.paramGroups = groups.map((g) => {
      const lr = g.lr ?? defaults.lr;
      const weightDecay = g.weightDecay ?? defaults.weightDecay;
      if (!(lr >= 0) || !(weightDecay >= 0)) throw new ConfigError(`${this.constructor.name}: lr and weightDecay must be >= 0`);
      return { params: [...g.params], lr, initialLr: lr, weightDecay };
    });
    const seen = new Set<Tensor>();
    for (const g of this.paramGroups)
      for (const p of g.params) {
        if (seen.has(p)) throw new ConfigError(`a parameter${p.name ? ` (${p.name})` : ''} appears in two parameter groups`);
        if (p.dtype !== 'f32') throw new ConfigError(`parameter ${p.name ?? ''} is ${p.dtype}; optimizers update f32 (master) weights`);
        seen.add(p);
      }
    this.stepStates = this.paramGroups.map(() => createStepState(ctx));
  }

  /** Drop every parameter's gradient. */
  zeroGrad(): void {
    for (const g of this.paramGroups) for (const p of g.params) p.zeroGrad();
  }

  protected slotsFor(p: Tensor): Record<string, DeviceTensor> {
    let s = this.state.get(p);
    if (!s) {
      s = {};
      for (const n of this.slots) s[n] = fill(this.ctx, p.shape, 0);
      this.state.set(p, s);
    }
    return s;
  }

  /** Moments and counters, read back (for checkpoints). */
  async stateDict(): Promise<OptimizerState> {
    const state: OptimizerState['state'] = [];
    for (const g of this.paramGroups)
      for (const p of g.params) {
        const s = this.state.get(p);
        if (!s) state.push(null);
        else {
          const o: Record<string, Float32Array> = {};
          for (const n of this.slots) o[n] = (await download(this.ctx, s[n]!)) as Float32Array;
          state.push(o);
        }
      }
    const stepStates = await Promise.all(this.stepStates.map(async (s) => (await download(this.ctx, s)) as Uint32Array));
    return {
      kind: this.kind,
      steps: this.steps,
      groups: this.paramGroups.map((g) => ({ lr: g.lr, initialLr: g.initialLr, weightDecay: g.weightDecay, size: g.params.length })),
      state,
      stepStates,
    };
  }

  loadStateDict(sd: OptimizerState): void {
    if (sd.kind !== this.kind) throw new ConfigError(`optimizer state is for ${sd.kind}, not ${this.kind}`);
    if (sd.groups.length !== this.paramGroups.length || sd.groups.some((g, i) => g.size !== this.paramGroups[i]!.params.length))
      throw new ConfigError('optimizer state does not match the parameter groups (different model or trainable set?)');
    this.steps = sd.steps;
    sd.groups.forEach((g, i) => Object.assign(this.paramGroups[i]!, { lr: g.lr, initialLr: g.initialLr, weightDecay: g.weightDecay }));
    let k = 0;
    for (const g of this.paramGroups)
      for (const p of g.params) {
        const s = sd.state[k++];
        const old = this.state.get(p);
        if (old) for (const t of Object.values(old)) releaseRef(this.ctx, t.buffer);
        this.state.delete(p);
        if (!s) continue;
        const o: Record<string, DeviceTensor> = {};
        for (const n of this.slots) {
          if (s[n]!.length !== p.size) throw new ConfigError(`optimizer state '${n}' has ${s[n]!.length} values, parameter ${p.name ?? ''} has ${p.size}`);
          o[n] = upload(this.ctx, s[n]!, p.shape);
        }
        this.state.set(p, o);
      }
    sd.stepStates.forEach((w, i) => this.ctx.write(this.stepStates[i]!.buffer, w));
  }

  /** Release moments and counters. */
  dispose(): void {
    for (const s of this.state.values()) for (const t of Object.values(s)) releaseRef(this.ctx, t.buffer);
    this.state.clear();
    for (const s of this.stepStates) releaseRef(this.ctx, s.buffer);
  }

  protected controls(c: StepControls) {
    return { gradScale: dev(c.gradScale), skip: dev(c.skip) };
  }

  protected advance(i: number, c: StepControls, betas?: [number, number]): void {
    advanceStep(this.ctx, this.stepStates[i]!, { beta1: betas?.[0], beta2: betas?.[1], skip: dev(c.skip) });
  }
}

/**
 * Global gradient norm of `params` and PyTorch's clip coefficient, on the GPU: an f32 [2] tensor
 * [min(1, maxNorm / (norm + 1e-6)), norm]. Pass it as `gradScale` to `optimizer.step` (the clipping then happens
 * inside the step); read element 1 to log the norm.
 */
export function clipGradNorm(params: Tensor[], maxNorm: number): DeviceTensor {
  const grads = params.filter((p) => p.grad).map((p) => p.grad!.data);
  const ctx = params[0]!.ctx;
  if (!grads.length) return upload(ctx, [1, 0], [2]);
  return gradNorm(ctx, grads, { maxNorm });
}
