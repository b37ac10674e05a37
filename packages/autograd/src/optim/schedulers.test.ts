import { describe, expect, it } from 'vitest';
import { ConstantLR, CosineAnnealingLR, LinearWarmup, WarmupCosineScheduler } from './schedulers';

const opt = (lr: number) => ({ paramGroups: [{ lr, initialLr: lr }, { lr: lr * 2, initialLr: lr * 2 }] });

function run(s: { step(): void; getLastLr(): number[] }, n: number): number[] {
  const out = [s.getLastLr()[0]!];
  for (let i = 1; i < n; i++) {
    s.step();
    out.push(s.getLastLr()[0]!);
  }
  return out;
}

describe('LR schedulers', () => {
  it('LinearWarmup matches the fixture recipe lr = 1e-3 * min(1, (step+1)/2)', () => {
    expect(run(new LinearWarmup(opt(1e-3), { warmupSteps: 2 }), 5)).toEqual([5e-4, 1e-3, 1e-3, 1e-3, 1e-3]);
  });

  it('CosineAnnealingLR follows PyTorch (values from its closed form, T_max=4, eta_min=0.01)', () => {
    const got = run(new CosineAnnealingLR(opt(0.1), { tMax: 4, etaMin: 0.01 }), 5);
    const want = [0.1, 0.08681980515339464, 0.055, 0.023180194846605363, 0.01];
    got.forEach((g, i) => expect(g).toBeCloseTo(want[i]!, 15));
  });

  it('ConstantLR and WarmupCosine; per-group base lrs; state round-trip', () => {
    expect(run(new ConstantLR(opt(1), { factor: 0.5, totalIters: 2 }), 4)).toEqual([0.5, 0.5, 1, 1]);
    const o = opt(1);
    const s = new WarmupCosineScheduler(o, { warmupSteps: 2, totalSteps: 6, minLr: 0.1 });
    const lrs = run(s, 8);
    expect(lrs.slice(0, 3)).toEqual([0.5, 1, 1]);
    expect(lrs[4]).toBeCloseTo(0.55, 12);
    expect(lrs[6]).toBeCloseTo(0.1, 12);
    expect(lrs[7]).toBeCloseTo(0.1, 12);
    expect(o.paramGroups[1]!.lr).toBeCloseTo(0.1, 12); // minLr is absolute, as eta_min in PyTorch
    const s2 = new WarmupCosineScheduler(opt(1), { warmupSteps: 2, totalSteps: 6, minLr: 0.1 });
    s2.loadStateDict({ lastStep: 4 });
    expect(s2.getLastLr()[0]).toBeCloseTo(0.55, 12);
  });
});
