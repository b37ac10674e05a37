import { adamwStep, adamwStepMulti, ConfigError, type Context } from '@rusty/backend';
import type { Tensor } from '../tensor';
import { arenaTensor, makeResident, packArenas, releasePacks, tableFor, type ArenaPack } from './arena';
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
  readonly foreach: boolean;
  /** Per group, once the first step has made them: the arena packs and the parameters stepped one by one. */
  private packs: ({ packs: ArenaPack[]; rest: Tensor[] } | null)[];

  constructor(ctx: Context, params: Tensor[] | ParamGroupInit[], opts: AdamWOptions = {}) {
    super(ctx, params, { lr: opts.lr ?? 1e-3, weightDecay: opts.weightDecay ?? 1e-2 });
    this.betas = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    this.foreach = opts.foreach ?? true;
    this.packs = this.paramGroups.map(() => null);
    if (!(this.eps > 0)) throw new ConfigError('AdamW: eps must be > 0');
  }

  /** Update every parameter that has a gradient. Nothing is read back. */
  step(c: StepControls = {}): void {
    const ctl = this.controls(c);
    this.paramGroups.forEach((g, i) => {
      this.advance(i, c, this.betas);
      const hyper = { beta1: this.betas[0], beta2: this.betas[1], eps: this.eps, stepState: this.stepStates[i], ...ctl };
      const one = (p: Tensor) => {
        const s = this.slotsFor(p);
        adamwStep(this.ctx, p.data, p.grad!.data, s.m!, s.v!, { lr: g.lr, weightDecay: g.weightDecay, ...hyper });
      };
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
        if (!inc.length) continue;
        const t = tableFor(this.ctx, a, inc, g.weightDecay);
        const [P, G, M, V] = ['param', 'grad', 'm', 'v'].map((r) => arenaTensor(a, r));
        adamwStepMulti(this.ctx, t, P!, G!, M!, V!, { lrScale: g.lr, ...hyper });
      }
    });
    this.steps++;
  }

  override dispose(): void {
    super.dispose();
    for (const pk of this.packs) if (pk) releasePacks(this.ctx, pk.packs);
    this.packs = this.paramGroups.map(() => null);
  }
}
