/**
 * A small seeded random generator (mulberry32) whose whole state is one u32, so that it can be saved in a
 * checkpoint and restored exactly. Not cryptographic.
 */
export class Rng {
  private s: number;

  constructor(seed = 0) {
    // spread small seeds over the state space
    this.s = (Math.imul((seed >>> 0) ^ 0x5bd1e995, 0x9e3779b1) + 0x6d2b79f5) >>> 0;
  }

  /** The generator state (restore it with `Rng.fromState`). */
  get state(): number {
    return this.s;
  }

  static fromState(state: number): Rng {
    const r = new Rng();
    r.s = state >>> 0;
    return r;
  }

  /** The next u32. */
  nextU32(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [0, n) (n <= 2^32), without modulo bias. */
  int(n: number): number {
    if (n <= 1) return 0;
    const limit = 4294967296 - (4294967296 % n);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % n;
    }
  }

  /** A random permutation of 0..n-1 (Fisher-Yates). */
  permutation(n: number): Uint32Array {
    const p = new Uint32Array(n);
    for (let i = 0; i < n; i++) p[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = p[i]!;
      p[i] = p[j]!;
      p[j] = t;
    }
    return p;
  }
}
