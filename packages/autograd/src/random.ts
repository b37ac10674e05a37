/** Seeded normal samples (mulberry32 + Box-Muller), as Float32Array. */
export function randn(n: number, seed: number, std = 1, mean = 0): Float32Array {
  let a = (seed * 0x9e3779b1 + 0x6d2b79f5) >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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
  let a = (seed * 0x9e3779b1 + 0x1234567) >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = lo + (hi - lo) * (((t ^ (t >>> 14)) >>> 0) / 4294967296);
  }
  return out;
}
