import { sgdStep, sgdStepMulti, type Context } from '@rusty/backend';
import type { Tensor } from '../tensor';
import { arenaTensor } from './arena';
import { Optimizer, type ParamGroupInit, type StepControls } from './optimizer';

export interface SGDOptions {
  lr?: number;
  momentum?: number;
  dampening?: number;
  nesterov?: boolean;
  /** L2 penalty added to the gradient (PyTorch's SGD weight_decay). */
  weightDecay?: number;
  /** One multi-tensor dispatch for the small f32 parameters of each group, as AdamW's `foreach`. Default true. */
  foreach?: boolean;
}

/** `torch.optim.SGD` with momentum, dampening, Nesterov and L2 weight decay. */
export class SGD extends Optimizer {
  protected readonly kind = 'SGD';
  protected readonly slots: string[];
  constructor(
    ctx: Context,
    params: Tensor[] | ParamGroupInit[],
    readonly opts: SGDOptions = {},
  ) {
    super(ctx, params, { lr: opts.lr ?? 1e-3, weightDecay: opts.weightDecay ?? 0 }, opts.foreach ?? true);
    this.slots = (opts.momentum ?? 0) > 0 ? ['momentum'] : [];
  }

  step(c: StepControls = {}): void {
    const ctl = this.controls(c);
    const h = { momentum: this.opts.momentum, dampening: this.opts.dampening, nesterov: this.opts.nesterov, step: this.steps + 1, ...ctl };
    this.paramGroups.forEach((g, i) => {
      this.stepGroup(
        i,
        (p) => {
          const s = this.slotsFor(p);
          sgdStep(this.ctx, p.data, p.grad!.data, s.momentum ?? null, { lr: g.lr, weightDecay: g.weightDecay, ...h });
        },
        (a, t) => {
          const mom = this.slots.length ? arenaTensor(a, 'momentum') : null;
          sgdStepMulti(this.ctx, t, arenaTensor(a, 'param'), arenaTensor(a, 'grad'), mom, { lrScale: g.lr, ...h });
        },
      );
    });
    this.steps++;
  }
}
