import { adamwStep, ConfigError, type Context } from '@rusty/backend';
import type { Tensor } from '../tensor';
import { Optimizer, type ParamGroupInit, type StepControls } from './optimizer';

export interface AdamWOptions {
  lr?: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
}

/** `torch.optim.AdamW`: decoupled weight decay, bias-corrected moments; one fused dispatch per parameter. */
export class AdamW extends Optimizer {
  protected readonly kind = 'AdamW';
  protected readonly slots = ['m', 'v'];
  readonly betas: [number, number];
  readonly eps: number;

  constructor(ctx: Context, params: Tensor[] | ParamGroupInit[], opts: AdamWOptions = {}) {
    super(ctx, params, { lr: opts.lr ?? 1e-3, weightDecay: opts.weightDecay ?? 1e-2 });
    this.betas = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    if (!(this.eps > 0)) throw new ConfigError('AdamW: eps must be > 0');
  }

  /** Update every parameter that has a gradient. Nothing is read back. */
  step(c: StepControls = {}): void {
    const ctl = this.controls(c);
    this.paramGroups.forEach((g, i) => {
      this.advance(i, c, this.betas);
      for (const p of g.params) {
        if (!p.grad) continue;
        const s = this.slotsFor(p);
        adamwStep(this.ctx, p.data, p.grad.data, s.m!, s.v!, {
          lr: g.lr,
          weightDecay: g.weightDecay,
          beta1: this.betas[0],
          beta2: this.betas[1],
          eps: this.eps,
          stepState: this.stepStates[i],
          ...ctl,
        });
      }
    });
    this.steps++;
  }
}
