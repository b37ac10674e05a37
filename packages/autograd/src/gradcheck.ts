import { numel, upload } from '@rusty/backend';
import { noGrad } from './scope';
import { Tensor } from './tensor';
import { randu } from './random';

export interface GradcheckOptions {
  /** Finite-difference step, relative to max(1, |x|). Default 1e-3 (f32 arithmetic on the GPU). */
  eps?: number;
  /** Tolerance: |analytic - numeric| <= atol + rtol * max|numeric| per input. */
  rtol?: number;
  atol?: number;
  /** Check at most this many elements per input (randomly chosen, seeded). Default 48. */
  maxElements?: number;
  seed?: number;
}

export interface GradcheckResult {
  ok: boolean;
  /** Per input that requires grad: worst error and the tolerance it was held to. */
  inputs: { index: number; maxError: number; tolerance: number; checked: number }[];
}

/**
 * Compare the gradients `backward` computes for `fn` with central finite differences of `fn` itself, like
 * `torch.autograd.gradcheck` (which runs in float64; here the GPU computes in f32, hence the looser defaults).
 * The output is reduced with fixed random weights, so every output element takes part.
 */
export async function gradcheck(
  fn: (...inputs: Tensor[]) => Tensor,
  inputs: Tensor[],
  opts: GradcheckOptions = {},
): Promise<GradcheckResult> {
  const eps = opts.eps ?? 1e-3;
  const rtol = opts.rtol ?? 1e-2;
  const atol = opts.atol ?? 1e-4;
  const maxEl = opts.maxElements ?? 48;
  const ctx = inputs[0]!.ctx;
  const values = await Promise.all(inputs.map(async (t) => Float64Array.from(await t.toArray())));

  const evalAt = async (i: number, x: Float64Array): Promise<Float64Array> => {
    const args = inputs.map((t, j) =>
      j === i ? new Tensor(ctx, upload(ctx, x, t.shape, t.dtype), false) : t.detach(),
    );
    const y = noGrad(() => fn(...args));
    const out = Float64Array.from(await y.toArray());
    y.dispose();
    args.forEach((a) => a.dispose());
    return out;
  };

  // analytic
  const fresh = inputs.map((t) => t.detach());
  fresh.forEach((t, i) => (t.requiresGrad = inputs[i]!.requiresGrad));
  const y = fn(...fresh);
  const w = randu(y.size, (opts.seed ?? 7) + 1, -1, 1);
  const wT = Tensor.fromArray(ctx, w, y.shape);
  y.backward(wT);
  const analytic = await Promise.all(fresh.map(async (t) => (t.grad ? Float64Array.from(await t.grad.toArray()) : null)));
  wT.dispose();
  y.dispose();
  fresh.forEach((t) => {
    t.zeroGrad();
    t.dispose();
  });

  const result: GradcheckResult = { ok: true, inputs: [] };
  for (let i = 0; i < inputs.length; i++) {
    if (!inputs[i]!.requiresGrad) continue;
    const x = values[i]!;
    const n = numel(inputs[i]!.shape);
    const pick = randu(n, (opts.seed ?? 7) + 100 + i, 0, 1);
    const idx = [...Array(n).keys()].sort((a, b) => pick[a]! - pick[b]!).slice(0, maxEl);
    const numeric: number[] = [];
    const got: number[] = [];
    for (const k of idx) {
      const h = eps * Math.max(1, Math.abs(x[k]!));
      const xp = Float64Array.from(x);
      xp[k] = x[k]! + h;
      const fp = await evalAt(i, xp);
      xp[k] = x[k]! - h;
      const fm = await evalAt(i, xp);
      // the perturbation actually applied after rounding to f32
      const hp = Math.fround(x[k]! + h) - Math.fround(x[k]! - h);
      let d = 0;
      for (let j = 0; j < fp.length; j++) d += w[j]! * (fp[j]! - fm[j]!);
      numeric.push(d / hp);
      got.push(analytic[i]?.[k] ?? 0);
    }
    const scale = Math.max(...numeric.map(Math.abs), 0);
    const tol = atol + rtol * scale;
    let maxError = 0;
    for (let j = 0; j < idx.length; j++) maxError = Math.max(maxError, Math.abs(got[j]! - numeric[j]!));
    if (!(maxError <= tol)) result.ok = false;
    result.inputs.push({ index: i, maxError, tolerance: tol, checked: idx.length });
  }
  return result;
}

