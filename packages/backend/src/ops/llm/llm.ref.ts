/** float64 CPU references of the LLM kernels, shared by their tests (not part of the public API). */

export function refEmbedding(ids: number[], w: Float64Array, vocab: number, d: number): Float64Array {
  const out = new Float64Array(ids.length * d);
  ids.forEach((id, n) => {
    if (id >= 0 && id < vocab) for (let j = 0; j < d; j++) out[n * d + j] = w[id * d + j]!;
  });
  return out;
}

export function refEmbeddingBackward(ids: number[], dy: Float64Array, vocab: number, d: number): Float64Array {
  const dw = new Float64Array(vocab * d);
  ids.forEach((id, n) => {
    if (id >= 0 && id < vocab) for (let j = 0; j < d; j++) dw[id * d + j] = dw[id * d + j]! + dy[n * d + j]!;
  });
  return dw;
}

/** float64 reference: y and rstd (the weight used is w + woff). */
export function refRmsNorm(x: Float64Array, w: Float64Array, rows: number, d: number, eps: number, woff = 0) {
  const y = new Float64Array(rows * d);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < d; j++) ss += x[r * d + j]! ** 2;
    const rs = 1 / Math.sqrt(ss / d + eps);
    rstd[r] = rs;
    for (let j = 0; j < d; j++) y[r * d + j] = x[r * d + j]! * rs * (w[j]! + woff);
  }
  return { y, rstd };
}

/** float64 reference backward (the weight used is w + woff; dw is the gradient of w). */
export function refRmsNormBackward(dy: Float64Array, x: Float64Array, w: Float64Array, rows: number, d: number, eps: number, woff = 0) {
  const dx = new Float64Array(rows * d);
  const dw = new Float64Array(d);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    let dt = 0;
    for (let j = 0; j < d; j++) {
      ss += x[r * d + j]! ** 2;
      dt += dy[r * d + j]! * (w[j]! + woff) * x[r * d + j]!;
    }
    const rs = 1 / Math.sqrt(ss / d + eps);
    for (let j = 0; j < d; j++) {
      const i = r * d + j;
      dx[i] = rs * (dy[i]! * (w[j]! + woff) - (x[i]! * rs * rs * dt) / d);
      dw[j] = dw[j]! + dy[i]! * x[i]! * rs;
    }
  }
  return { dx, dw };
}

export const sigmoid = (g: number) => 1 / (1 + Math.exp(-g));

export const refSwiglu = (g: Float64Array, u: Float64Array) => g.map((v, i) => v * sigmoid(v) * u[i]!);

export function refSwigluBackward(dy: Float64Array, g: Float64Array, u: Float64Array) {
  const dg = g.map((v, i) => dy[i]! * u[i]! * sigmoid(v) * (1 + v * (1 - sigmoid(v))));
  const du = g.map((v, i) => dy[i]! * v * sigmoid(v));
  return { dg, du };
}

const GELU_C = Math.sqrt(2 / Math.PI);

/** gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's formula, and its derivative. */
export function refGeluTanh(x: number): { y: number; d: number } {
  const t = Math.tanh(GELU_C * (x + 0.044715 * x ** 3));
  return { y: 0.5 * x * (1 + t), d: 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x) };
}

export const refGeluTanhGate = (g: Float64Array, u: Float64Array) => g.map((v, i) => refGeluTanh(v).y * u[i]!);

export function refGeluTanhGateBackward(dy: Float64Array, g: Float64Array, u: Float64Array) {
  const dg = g.map((v, i) => dy[i]! * u[i]! * refGeluTanh(v).d);
  const du = g.map((v, i) => dy[i]! * refGeluTanh(v).y);
  return { dg, du };
}

/** float64 reference: rotate with angles fround(fround(pos) * inv[i]) (HF's f32 product), cos/sin in float64. */
export function refRope(x: Float64Array, inv: Float32Array, pos: number[][], g: Geo, sign = 1, scale = 1): Float64Array {
  const y = Float64Array.from(x);
  const half = inv.length;
  for (let b = 0; b < g.b; b++)
    for (let t = 0; t < g.t; t++)
      for (let h = 0; h < g.h; h++) {
        const base = g.layout === 'BTHD' ? ((b * g.t + t) * g.h + h) * g.d : ((b * g.h + h) * g.t + t) * g.d;
        for (let i = 0; i < half; i++) {
          const ang = Math.fround(Math.fround(pos[b]![t]!) * inv[i]!);
          const c = Math.cos(ang) * scale;
          const s = Math.sin(ang) * scale * sign;
          const a = x[base + i]!;
          const z = x[base + i + half]!;
          y[base + i] = a * c - z * s;
          y[base + i + half] = z * c + a * s;
        }
      }
  return y;
}

/** float64 reference: row losses and the reduced loss (PyTorch F.cross_entropy semantics). */
export function refCrossEntropy(x: Float64Array, tg: number[], v: number, o: RefOpts) {
  const n = tg.length;
  const rows = new Float64Array(n);
  let count = 0;
  let sum = 0;
  for (let r = 0; r < n; r++) {
    if (tg[r] === o.ignore) continue;
    count++;
    let m = -Infinity;
    let sx = 0;
    for (let j = 0; j < v; j++) {
      m = Math.max(m, x[r * v + j]!);
      sx += x[r * v + j]!;
    }
    let s = 0;
    for (let j = 0; j < v; j++) s += Math.exp(x[r * v + j]! - m);
    const lse = m + Math.log(s);
    rows[r] = (1 - o.eps) * (lse - x[r * v + tg[r]!]!) + o.eps * (lse - sx / v);
    sum += rows[r]!;
  }
  return { rows, loss: o.mean ? sum / count : sum, count };
}

/** float64 reference gradient of the reduced loss, times scale. */
export function refCrossEntropyGrad(x: Float64Array, tg: number[], v: number, o: RefOpts, scale = 1) {
  const n = tg.length;
  const g = new Float64Array(n * v);
  const count = tg.filter((t) => t !== o.ignore).length;
  const k = scale / (o.mean ? count : 1);
  for (let r = 0; r < n; r++) {
    if (tg[r] === o.ignore) continue;
    let m = -Infinity;
    for (let j = 0; j < v; j++) m = Math.max(m, x[r * v + j]!);
    let s = 0;
    for (let j = 0; j < v; j++) s += Math.exp(x[r * v + j]! - m);
    for (let j = 0; j < v; j++)
      g[r * v + j] = (Math.exp(x[r * v + j]! - m) / s - o.eps / v - (j === tg[r] ? 1 - o.eps : 0)) * k;
  }
  return g;
}

/** Options of {@link refCrossEntropy}. */
export interface RefOpts {
  ignore: number;
  eps: number;
  mean: boolean;
}

/** Shape and layout of a rope input. */
export interface Geo {
  b: number;
  t: number;
  h: number;
  d: number;
  layout: 'BTHD' | 'BHTD';
}
