import { mulberry32 } from '@rusty/backend';

/** Seeded normal samples (mulberry32 + Box-Muller), as Float32Array. */
export function randn(n: number, seed: number, std = 1, mean = 0): Float32Array {
  const next = mulberry32(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(next(), 1e-12);
    const v = next();
    const m = Math.sqrt(-2 * Math.log(u)) * std;
    out[i] = mean + m * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = mean + m * Math.sin(2 * Math.PI * v);
  }
  return out;
}

/** Seeded uniform samples in [lo, hi). */
export function randu(n: number, seed: number, lo: number, hi: number): Float32Array {
  const next = mulberry32(seed ^ 0x1234567);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * next();
  return out;
}
