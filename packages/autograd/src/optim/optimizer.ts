import {
  advanceStep,
  ConfigError,
  type SegmentTable,
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
import { gradPieces, makeResident, packArenas, releasePacks, tableFor, type ArenaPack } from './arena';

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
  /** Per group, once its first `foreach` step has made them: the arena packs and the tensors stepped alone. */
  private packs: ({ packs: ArenaPack[]; rest: Tensor[] } | null)[];

  constructor(
    readonly ctx: Context,
    params: Tensor[] | ParamGroupInit[],
    defaults: { lr: number; weightDecay: number },
    /** Step the small f32 parameters of a group in one multi-tensor dispatch (see {@link stepGroup}). */
    readonly foreach = true,
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
    this.packs = this.paramGroups.map(() => null);
  }

  /**
   * Step the parameters of group `i` that have a gradient: with `foreach`, the small f32 ones with f32 gradients
   * in one `multi` dispatch per arena pack (they, their gradients and their state slots move into arenas on the
   * first step, see `arena.ts`; `multi` gets the pack and the segment table of the tensors to step: lr 1 each,
   * the group's weight decay) and the others with `one`; without `foreach`, every one with `one`.
   */
  protected stepGroup(i: number, one: (p: Tensor) => void, multi: (pack: ArenaPack, table: SegmentTable) => void): void {
    const g = this.paramGroups[i]!;
    if (!this.foreach) {
      for (const p of g.params) if (p.grad) one(p);
      return;
    }
    const pk = (this.packs[i] ??= packArenas(this.ctx, g.params, this.slots));
    for (const p of pk.rest) if (p.grad) one(p);
    for (const a of pk.packs) {
      const inc: number[] = [];
      a.params.forEach((p, j) => {
        const gr = p.grad;
        if (!gr) return;
        // a gradient in another format, or a parameter no longer f32: this step takes it alone
        if (gr.dtype !== 'f32' || p.dtype !== 'f32') return one(p);
        makeResident(this.ctx, a, j, this.state, this.slots);
        inc.push(j);
      });
      if (inc.length) multi(a, tableFor(this.ctx, a, inc, g.weightDecay));
    }
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
    for (const pk of this.packs) if (pk) releasePacks(this.ctx, pk.packs);
    this.packs = this.paramGroups.map(() => null);
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
  // parameters a `foreach` optimizer keeps in arenas: one pass over each gradient arena
  const grads = gradPieces(params);
  const ctx = params[0]!.ctx;
  if (!grads.length) return upload(ctx, [1, 0], [2]);
  return gradNorm(ctx, grads, { maxNorm });
}
