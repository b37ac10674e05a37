/** CPU references of causal scaled-dot-product attention for the tests: a float64 one (forward and backward)
 *  and an unfused f32 composition (matmul, scale, mask, softmax, matmul) as an eager framework computes it. */

export interface RefDims {
  B: number;
  T: number;
  S: number;
  Hq: number;
  Hkv: number;
  D: number;
}

export interface RefOpts {
  causal: boolean;
  scale: number;
  qOffset: number;
  /** [B, S], nonzero = keep. */
  mask?: ArrayLike<number>;
  /** Sliding window (causal): key s visible to the query at position p iff p - window < s <= p. */
  window?: number;
  /** Logit soft-capping: score = softcap * tanh(scale * q.k / softcap). */
  softcap?: number;
}

const qi = (d: RefDims, b: number, t: number, h: number) => ((b * d.T + t) * d.Hq + h) * d.D;
const ki = (d: RefDims, b: number, s: number, h: number) => ((b * d.S + s) * d.Hkv + h) * d.D;

function visible(d: RefDims, o: RefOpts, b: number, t: number, s: number): boolean {
  if (o.mask && !o.mask[b * d.S + s]) return false;
  const p = o.qOffset + t;
  if (o.window !== undefined && !(s > p - o.window)) return false;
  return !o.causal || s <= p;
}

/** The score of a visible pair from q.k: scaled, then soft-capped; and d(score)/d(scale * q.k). */
function score(o: RefOpts, qk: number): { s: number; ds: number } {
  const x = qk * o.scale;
  if (!o.softcap) return { s: x, ds: 1 };
  const th = Math.tanh(x / o.softcap);
  return { s: o.softcap * th, ds: 1 - th * th };
}

/** Row probabilities P[s] (0 for invisible keys; all zero when no key is visible) and the row logsumexp. */
function rowSoftmax(
  d: RefDims,
  o: RefOpts,
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  b: number,
  t: number,
  h: number,
): { p: Float64Array; lse: number } {
  const kh = Math.floor(h / (d.Hq / d.Hkv));
  const sc = new Float64Array(d.S).fill(-Infinity);
  let m = -Infinity;
  for (let s = 0; s < d.S; s++) {
    if (!visible(d, o, b, t, s)) continue;
    let a = 0;
    const qo = qi(d, b, t, h);
    const ko = ki(d, b, s, kh);
    for (let x = 0; x < d.D; x++) a += q[qo + x]! * k[ko + x]!;
    sc[s] = score(o, a).s;
    m = Math.max(m, sc[s]!);
  }
  const p = new Float64Array(d.S);
  if (m === -Infinity) return { p, lse: -Infinity };
  let l = 0;
  for (let s = 0; s < d.S; s++) l += p[s] = sc[s] === -Infinity ? 0 : Math.exp(sc[s]! - m);
  for (let s = 0; s < d.S; s++) p[s]! /= l;
  return { p, lse: m + Math.log(l) };
}

/** float64 forward: out [B, T, Hq, D] and lse [B, Hq, T]. */
export function refAttention(
  d: RefDims,
  o: RefOpts,
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
): { out: Float64Array; lse: Float64Array } {
  const out = new Float64Array(d.B * d.T * d.Hq * d.D);
  const lse = new Float64Array(d.B * d.Hq * d.T);
  const G = d.Hq / d.Hkv;
  for (let b = 0; b < d.B; b++)
    for (let h = 0; h < d.Hq; h++)
      for (let t = 0; t < d.T; t++) {
        const { p, lse: l } = rowSoftmax(d, o, q, k, b, t, h);
        lse[(b * d.Hq + h) * d.T + t] = l;
        const oo = qi(d, b, t, h);
        for (let s = 0; s < d.S; s++) {
          if (p[s] === 0) continue;
          const vo = ki(d, b, s, Math.floor(h / G));
          for (let x = 0; x < d.D; x++) out[oo + x]! += p[s]! * v[vo + x]!;
        }
      }
  return { out, lse };
}

/** float64 backward: dq [B, T, Hq, D], dk and dv [B, S, Hkv, D] for the upstream gradient dout. */
export function refAttentionBackward(
  d: RefDims,
  o: RefOpts,
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  dout: ArrayLike<number>,
): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const dq = new Float64Array(q.length);
  const dk = new Float64Array(k.length);
  const dv = new Float64Array(v.length);
  const G = d.Hq / d.Hkv;
  for (let b = 0; b < d.B; b++)
    for (let h = 0; h < d.Hq; h++)
      for (let t = 0; t < d.T; t++) {
        const kh = Math.floor(h / G);
        const { p } = rowSoftmax(d, o, q, k, b, t, h);
        const qo = qi(d, b, t, h);
        // dP[s] = dO . v[s]; dS = P * (dP - sum_s P dP)
        const dp = new Float64Array(d.S);
        let delta = 0;
        for (let s = 0; s < d.S; s++) {
          if (p[s] === 0) continue;
          const vo = ki(d, b, s, kh);
          let a = 0;
          for (let x = 0; x < d.D; x++) {
            a += dout[qo + x]! * v[vo + x]!;
            dv[vo + x]! += p[s]! * dout[qo + x]!;
          }
          dp[s] = a;
          delta += p[s]! * a;
        }
        for (let s = 0; s < d.S; s++) {
          if (p[s] === 0) continue;
          const ko = ki(d, b, s, kh);
          let qk = 0;
          for (let x = 0; x < d.D; x++) qk += q[qo + x]! * k[ko + x]!;
          const ds = p[s]! * (dp[s]! - delta) * score(o, qk).ds * o.scale;
          for (let x = 0; x < d.D; x++) {
            dq[qo + x]! += ds * k[ko + x]!;
            dk[ko + x]! += ds * q[qo + x]!;
          }
        }
      }
  return { dq, dk, dv };
}

/**
 * Unfused f32 composition, step by step as an eager framework runs it: scores = q k^T (f32 accumulation),
 * scaled, masked with -inf, softmax (max-subtracted; an all-masked row gives zeros here, by convention), then
 * probabilities times v.
 */
export function refAttentionUnfused(
  d: RefDims,
  o: RefOpts,
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
): Float32Array {
  const f = Math.fround;
  const out = new Float32Array(d.B * d.T * d.Hq * d.D);
  const G = d.Hq / d.Hkv;
  for (let b = 0; b < d.B; b++)
    for (let h = 0; h < d.Hq; h++) {
      const kh = Math.floor(h / G);
      // 1. matmul
      const sc = new Float32Array(d.T * d.S);
      for (let t = 0; t < d.T; t++)
        for (let s = 0; s < d.S; s++) {
          let a = 0;
          for (let x = 0; x < d.D; x++) a = f(a + f(q[qi(d, b, t, h) + x]! * k[ki(d, b, s, kh) + x]!));
          sc[t * d.S + s] = a;
        }
      // 2. scale, soft-cap and mask
      for (let t = 0; t < d.T; t++)
        for (let s = 0; s < d.S; s++) {
          let x = f(sc[t * d.S + s]! * o.scale);
          if (o.softcap) x = f(o.softcap * f(Math.tanh(f(x / o.softcap))));
          sc[t * d.S + s] = visible(d, o, b, t, s) ? x : -Infinity;
        }
      // 3. softmax
      for (let t = 0; t < d.T; t++) {
        let m = -Infinity;
        for (let s = 0; s < d.S; s++) m = Math.max(m, sc[t * d.S + s]!);
        let l = 0;
        for (let s = 0; s < d.S; s++) {
          const e = m === -Infinity ? 0 : f(Math.exp(f(sc[t * d.S + s]! - m)));
          sc[t * d.S + s] = e;
          l = f(l + e);
        }
        for (let s = 0; s < d.S; s++) sc[t * d.S + s] = l === 0 ? 0 : f(sc[t * d.S + s]! / l);
      }
      // 4. matmul
      for (let t = 0; t < d.T; t++)
        for (let x = 0; x < d.D; x++) {
          let a = 0;
          for (let s = 0; s < d.S; s++) a = f(a + f(sc[t * d.S + s]! * v[ki(d, b, s, kh) + x]!));
          out[qi(d, b, t, h) + x] = a;
        }
    }
  return out;
}
