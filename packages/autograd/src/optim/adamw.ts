import { adamwStep, adamwStepMulti, ConfigError, type Context } from '@rusty/backend';
import type { Tensor } from '../tensor';
import { arenaTensor } from './arena';
import { Optimizer, type ParamGroupInit, type StepControls } from './optimizer';

export interface AdamWOptions {
  lr?: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
  /**
   * Step the small f32 parameters of each group with one multi-tensor dispatch (PyTorch's `foreach`): they and
   * their gradients and moments move into flat arenas at the first step (see `arena.ts`); the results are
   * bit-identical to one dispatch per tensor. Default true; false: one dispatch per parameter.
   */
  foreach?: boolean;
}

/** `torch.optim.AdamW`: decoupled weight decay, bias-corrected moments; one fused dispatch for all the small
 *  parameters of a group (`foreach`), one per large parameter. */
export class AdamW extends Optimizer {
  protected readonly kind = 'AdamW';
  protected readonly slots = ['m', 'v'];
  readonly betas: [number, number];
  readonly eps: number;

  constructor(ctx: Context, params: Tensor[] | ParamGroupInit[], opts: AdamWOptions = {}) {
    super(ctx, params, { lr: opts.lr ?? 1e-3, weightDecay: opts.weightDecay ?? 1e-2 }, opts.foreach ?? true);
    this.betas = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    if (!(this.eps > 0)) throw new ConfigError('AdamW: eps must be > 0');
  }

  /** Update every parameter that has a gradient. Nothing is read back. */
  step(c: StepControls = {}): void {
    const ctl = this.controls(c);
    this.paramGroups.forEach((g, i) => {
      this.advance(i, c, this.betas);
      const h = { beta1: this.betas[0], beta2: this.betas[1], eps: this.eps, stepState: this.stepStates[i], ...ctl };
      this.stepGroup(
        i,
        (p) => {
          const s = this.slotsFor(p);
          adamwStep(this.ctx, p.data, p.grad!.data, s.m!, s.v!, { lr: g.lr, weightDecay: g.weightDecay, ...h });
        },
        (a, t) => {
          const [P, G, M, V] = ['param', 'grad', 'm', 'v'].map((r) => arenaTensor(a, r));
          adamwStepMulti(this.ctx, t, P!, G!, M!, V!, { lrScale: g.lr, ...h });
        },
      );
    });
    this.steps++;
  }
}
