import { ConfigError } from '@rusty/backend';

/** What a scheduler drives: an optimizer's parameter groups (each with `lr` and its starting `initialLr`). */
export interface HasParamGroups {
  paramGroups: { lr: number; initialLr: number }[];
}

export interface SchedulerState {
  lastStep: number;
}

/**
 * A learning-rate schedule over steps, PyTorch style: construction sets the lr for step 0, each `step()`
 * (after `optimizer.step()`) advances one step. `lrAt(step, base)` is the closed form.
 */
export class LRScheduler {
  lastStep = 0;
  constructor(
    readonly optimizer: HasParamGroups,
    /** The closed form: lr at `step` for a group whose initial lr is `base`. */
    readonly lrAt: (step: number, base: number) => number,
  ) {
    this.apply();
  }

  step(): void {
    this.lastStep++;
    this.apply();
  }

  /** The current lr of each group. */
  getLastLr(): number[] {
    return this.optimizer.paramGroups.map((g) => g.lr);
  }

  stateDict(): SchedulerState {
    return { lastStep: this.lastStep };
  }

  loadStateDict(s: SchedulerState): void {
    this.lastStep = s.lastStep;
    this.apply();
  }

  private apply(): void {
    for (const g of this.optimizer.paramGroups) g.lr = this.lrAt(this.lastStep, g.initialLr);
  }
}

function check(cond: boolean, msg: string): void {
  if (!cond) throw new ConfigError(msg);
}

/** `torch.optim.lr_scheduler.ConstantLR`: base * factor for the first `totalIters` steps, then base. */
export class ConstantLR extends LRScheduler {
  constructor(
    opt: HasParamGroups,
    opts: { factor?: number; totalIters?: number } = {},
  ) {
    check((opts.factor ?? 1 / 3) >= 0 && (opts.factor ?? 1 / 3) <= 1, 'ConstantLR: factor must be in [0, 1]');
    super(opt, (step, base) => {
      return step < (opts.totalIters ?? 5) ? base * (opts.factor ?? 1 / 3) : base;
    });
  }
}

/** Linear warm-up: lr = base * min(1, (step + 1) / warmupSteps), constant afterwards. */
export class LinearWarmup extends LRScheduler {
  constructor(
    opt: HasParamGroups,
    opts: { warmupSteps: number },
  ) {
    check(Number.isInteger(opts.warmupSteps) && opts.warmupSteps >= 1, 'LinearWarmup: warmupSteps must be an integer >= 1');
    super(opt, (step, base) => {
      return base * Math.min(1, (step + 1) / opts.warmupSteps);
    });
  }
}

/** `torch.optim.lr_scheduler.CosineAnnealingLR` (closed form): etaMin + (base - etaMin)(1 + cos(pi t / tMax)) / 2. */
export class CosineAnnealingLR extends LRScheduler {
  constructor(
    opt: HasParamGroups,
    opts: { tMax: number; etaMin?: number },
  ) {
    check(opts.tMax > 0, 'CosineAnnealingLR: tMax must be > 0');
    super(opt, (step, base) => {
      const m = opts.etaMin ?? 0;
      return m + ((base - m) * (1 + Math.cos((Math.PI * step) / opts.tMax))) / 2;
    });
  }
}

/**
 * Linear warm-up to the base lr over `warmupSteps` (lr = base * (step + 1) / warmupSteps), then cosine decay to
 * `minLr` at `totalSteps` (and `minLr` after).
 */
export class WarmupCosineScheduler extends LRScheduler {
  constructor(
    opt: HasParamGroups,
    opts: { warmupSteps: number; totalSteps: number; minLr?: number },
  ) {
    check(opts.warmupSteps >= 0 && opts.totalSteps > opts.warmupSteps, 'WarmupCosineScheduler: need 0 <= warmupSteps < totalSteps');
    super(opt, (step, base) => {
      const { warmupSteps: w, totalSteps: t } = opts;
      const m = opts.minLr ?? 0;
      if (step < w) return (base * (step + 1)) / w;
      const progress = Math.min(1, (step - w) / (t - w));
      return m + ((base - m) * (1 + Math.cos(Math.PI * progress))) / 2;
    });
  }
}
