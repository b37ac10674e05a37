/** Float64 CPU references of the optimizer kernels (PyTorch semantics), for the tests. */

export interface AdamWRefHyper {
  lr: number;
  wd: number;
  b1: number;
  b2: number;
  eps: number;
  /** 1-based step count. */
  t: number;
  /** Multiplies the gradient (clip coefficient, unscale, maximize sign). */
  gs?: number;
}

/** One torch.optim.AdamW step (amsgrad off) in place on float64 arrays. */
export function adamwRef(p: Float64Array, g: ArrayLike<number>, m: Float64Array, v: Float64Array, h: AdamWRefHyper, off = 0, len = p.length): void {
  const gs = h.gs ?? 1;
  const bc1 = 1 - h.b1 ** h.t;
  const bc2 = 1 - h.b2 ** h.t;
  for (let i = off; i < off + len; i++) {
    const gi = g[i]! * gs;
    p[i]! *= 1 - h.lr * h.wd;
    m[i] = h.b1 * m[i]! + (1 - h.b1) * gi;
    v[i] = h.b2 * v[i]! + (1 - h.b2) * gi * gi;
    p[i]! -= ((h.lr / bc1) * m[i]!) / (Math.sqrt(v[i]!) / Math.sqrt(bc2) + h.eps);
  }
}

export interface SGDRefHyper {
  lr: number;
  wd: number;
  momentum: number;
  dampening: number;
  nesterov: boolean;
  /** First step: the momentum buffer is initialised to the gradient. */
  first: boolean;
  gs?: number;
}

/** One torch.optim.SGD step in place on float64 arrays (`buf` unused when momentum is 0). */
export function sgdRef(p: Float64Array, g: ArrayLike<number>, buf: Float64Array | null, h: SGDRefHyper, off = 0, len = p.length): void {
  const gs = h.gs ?? 1;
  for (let i = off; i < off + len; i++) {
    let d = g[i]! * gs;
    if (h.wd !== 0) d += h.wd * p[i]!;
    if (h.momentum !== 0) {
      const b = h.first ? d : h.momentum * buf![i]! + (1 - h.dampening) * d;
      buf![i] = b;
      d = h.nesterov ? d + h.momentum * b : b;
    }
    p[i]! -= h.lr * d;
  }
}

/** torch.cuda.amp.GradScaler's scale update, simulated on the CPU (the scale kept in f32 as on the GPU). */
export class GradScalerSim {
  tracker = 0;
  constructor(
    public scale: number,
    readonly growth = 2,
    readonly backoff = 0.5,
    readonly interval = 2000,
  ) {}

  update(foundInf: boolean): void {
    if (foundInf) {
      this.scale = Math.fround(this.scale * this.backoff);
      this.tracker = 0;
    } else if (this.tracker + 1 === this.interval) {
      const ns = Math.fround(this.scale * this.growth);
      if (Number.isFinite(ns)) this.scale = ns;
      this.tracker = 0;
    } else this.tracker++;
  }
}
