import { mulberry32 } from './random';

/** Helpers for kernel tests: seeded random data, float64 comparisons and finite differences. Exported so
 *  that users can test their own kernels the same way. */

/** Deterministic PRNG returning floats in [0, 1) (see `mulberry32`). */
export const rng = mulberry32;

/** `n` standard-normal samples (Box-Muller), scaled by `scale`, as float64. */
export function randn(n: number, seed = 1, scale = 1): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(r(), 1e-12);
    const v = r();
    const m = Math.sqrt(-2 * Math.log(u)) * scale;
    out[i] = m * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = m * Math.sin(2 * Math.PI * v);
  }
  return out;
}

/** `n` uniform samples in [lo, hi). */
export function randu(n: number, seed = 1, lo = -1, hi = 1): Float64Array {
  const r = rng(seed);
  return Float64Array.from({ length: n }, () => lo + (hi - lo) * r());
}

/** Round every value through f32 (what the GPU sees after upload). */
export function toF32(x: ArrayLike<number>): Float64Array {
  return Float64Array.from(Float32Array.from(x));
}

/** max |a - b| / max |b| (0 when both are all zero); NaN anywhere in `a` gives Infinity. */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    if (Number.isNaN(x) || !Number.isFinite(x)) return Infinity;
    num = Math.max(num, Math.abs(x - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return den === 0 ? num : num / den;
}

/** max |a - b|; NaN anywhere in `a` gives Infinity. */
export function absErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    if (!Number.isFinite(x)) return Infinity;
    m = Math.max(m, Math.abs(x - b[i]!));
  }
  return m;
}

/**
 * Central finite differences of a scalar function of one float64 input: d f / d x[i] for every i
 * (or for the indices given). `f` must not modify `x`.
 */
export function finiteDiff(f: (x: Float64Array) => number, x: Float64Array, eps = 1e-6, indices?: number[]): Float64Array {
  const g = new Float64Array(x.length);
  const xs = Float64Array.from(x);
  for (const i of indices ?? x.keys()) {
    const o = xs[i]!;
    xs[i] = o + eps;
    const fp = f(xs);
    xs[i] = o - eps;
    const fm = f(xs);
    xs[i] = o;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

/** sum(y * w): turns a vector output into the scalar whose gradient is `w` (for finite-difference checks). */
export function dot(y: ArrayLike<number>, w: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < y.length; i++) s += y[i]! * w[i]!;
  return s;
}
