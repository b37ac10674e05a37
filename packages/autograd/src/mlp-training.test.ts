import { createContext, type Context } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdamW, clipGradNorm, linear, LinearWarmup, mean, square, sub, tanh, Tensor, tidy } from './index';
import { randn } from './random';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

type Vec = Float64Array;

/** float64 reference: y = W2 tanh(W1 x + b1) + b2, loss = mean((y - t)^2), AdamW with clipping + warm-up. */
function referenceTrajectory(init: Record<string, Vec>, x: Vec, t: Vec, n: number, dims: number[], steps: number) {
  const [din, dh, dout] = dims as [number, number, number];
  const p = Object.fromEntries(Object.entries(init).map(([k, v]) => [k, Float64Array.from(v)]));
  const m = Object.fromEntries(Object.keys(p).map((k) => [k, new Float64Array(p[k]!.length)]));
  const v = Object.fromEntries(Object.keys(p).map((k) => [k, new Float64Array(p[k]!.length)]));
  const [b1, b2, eps, wd, lr0, clip] = [0.9, 0.95, 1e-8, 0.1, 1e-2, 1.0];
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    const h = new Float64Array(n * dh);
    const y = new Float64Array(n * dout);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < dh; j++) {
        let a = p.b1![j]!;
        for (let k = 0; k < din; k++) a += p.W1![j * din + k]! * x[i * din + k]!;
        h[i * dh + j] = Math.tanh(a);
      }
      for (let j = 0; j < dout; j++) {
        let a = p.b2![j]!;
        for (let k = 0; k < dh; k++) a += p.W2![j * dh + k]! * h[i * dh + k]!;
        y[i * dout + j] = a;
      }
    }
    let loss = 0;
    const dy = new Float64Array(n * dout);
    for (let i = 0; i < n * dout; i++) {
      loss += (y[i]! - t[i]!) ** 2 / (n * dout);
      dy[i] = (2 * (y[i]! - t[i]!)) / (n * dout);
    }
    losses.push(loss);
    const g: Record<string, Vec> = Object.fromEntries(Object.keys(p).map((k) => [k, new Float64Array(p[k]!.length)]));
    for (let i = 0; i < n; i++) {
      const dh_ = new Float64Array(dh);
      for (let j = 0; j < dout; j++) {
        g.b2![j]! += dy[i * dout + j]!;
        for (let k = 0; k < dh; k++) {
          g.W2![j * dh + k]! += dy[i * dout + j]! * h[i * dh + k]!;
          dh_[k]! += dy[i * dout + j]! * p.W2![j * dh + k]!;
        }
      }
      for (let j = 0; j < dh; j++) {
        const da = dh_[j]! * (1 - h[i * dh + j]! ** 2);
        g.b1![j]! += da;
        for (let k = 0; k < din; k++) g.W1![j * din + k]! += da * x[i * din + k]!;
      }
    }
    let norm = 0;
    for (const k in g) for (const e of g[k]!) norm += e * e;
    norm = Math.sqrt(norm);
    const coef = Math.min(1, clip / (norm + 1e-6));
    const lr = lr0 * Math.min(1, (s + 1) / 2);
    for (const k in p) {
      const P = p[k]!;
      for (let i = 0; i < P.length; i++) {
        const gi = g[k]![i]! * coef;
        P[i] = P[i]! * (1 - lr * wd);
        m[k]![i] = b1 * m[k]![i]! + (1 - b1) * gi;
        v[k]![i] = b2 * v[k]![i]! + (1 - b2) * gi * gi;
        const mh = m[k]![i]! / (1 - b1 ** (s + 1));
        const vh = v[k]![i]! / (1 - b2 ** (s + 1));
        P[i] = P[i]! - (lr * mh) / (Math.sqrt(vh) + eps);
      }
    }
  }
  return { losses, params: p };
}

describe('training an MLP with AdamW', () => {
  it('reproduces a float64 CPU trajectory (clip, warm-up, weight decay) step for step', async () => {
    const [n, din, dh, dout] = [8, 4, 6, 3];
    const init = {
      W1: Float64Array.from(randn(dh * din, 1, 0.5)),
      b1: Float64Array.from(randn(dh, 2, 0.1)),
      W2: Float64Array.from(randn(dout * dh, 3, 0.5)),
      b2: Float64Array.from(randn(dout, 4, 0.1)),
    };
    const x = Float64Array.from(randn(n * din, 5));
    const t = Float64Array.from(randn(n * dout, 6));
    const steps = 8;
    const ref = referenceTrajectory(init, x, t, n, [din, dh, dout], steps);

    const P = {
      W1: Tensor.fromArray(ctx, init.W1, [dh, din], { requiresGrad: true }),
      b1: Tensor.fromArray(ctx, init.b1, [dh], { requiresGrad: true }),
      W2: Tensor.fromArray(ctx, init.W2, [dout, dh], { requiresGrad: true }),
      b2: Tensor.fromArray(ctx, init.b2, [dout], { requiresGrad: true }),
    };
    const X = Tensor.fromArray(ctx, x, [n, din]);
    const T = Tensor.fromArray(ctx, t, [n, dout]);
    const params = Object.values(P);
    const opt = new AdamW(ctx, params, { lr: 1e-2, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.1 });
    const sched = new LinearWarmup(opt, { warmupSteps: 2 });
    const live0 = ctx.memory.live;
    const losses: number[] = [];
    for (let s = 0; s < steps; s++) {
      opt.zeroGrad();
      const loss = tidy(() => {
        const y = linear(tanh(linear(X, P.W1, P.b1)), P.W2, P.b2);
        const l = mean(square(sub(y, T)));
        l.backward();
        return l;
      });
      const clip = clipGradNorm(params, 1.0);
      opt.step({ gradScale: clip });
      sched.step();
      ctx.release(clip.buffer);
      losses.push(await loss.item());
      loss.dispose();
    }
    losses.forEach((l, i) => expect(Math.abs(l - ref.losses[i]!) / ref.losses[i]!).toBeLessThan(1e-5));
    for (const [k, tt] of Object.entries(P)) {
      const got = await tt.toArray();
      const want = ref.params[k]!;
      let err = 0;
      for (let i = 0; i < want.length; i++) err = Math.max(err, Math.abs(got[i]! - want[i]!));
      expect(err, k).toBeLessThan(1e-5);
    }
    expect(losses[steps - 1]).toBeLessThan(losses[0]!);
    // no leak: after the first step's optimizer state, every step returns to the same live memory
    opt.zeroGrad();
    const live1 = ctx.memory.live;
    expect(live1).toBeGreaterThan(live0); // moments exist now
    for (let s = 0; s < 100; s++) {
      opt.zeroGrad();
      tidy(() => mean(square(sub(linear(tanh(linear(X, P.W1, P.b1)), P.W2, P.b2), T))).backward());
      opt.step();
    }
    opt.zeroGrad();
    expect(ctx.memory.live).toBe(live1);
  });
});
