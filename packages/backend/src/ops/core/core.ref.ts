/** Float64 CPU references of the core kernels, for tests. */
import { decode, encode, type DType } from '../../dtype';

/** The values a tensor of `dtype` holds after uploading `x` (f32 or 16-bit rounding), as float64. */
export function roundTo(dtype: DType, x: ArrayLike<number>): Float64Array {
  return Float64Array.from(decode(dtype, encode(dtype, x).buffer as ArrayBuffer, x.length));
}

export function stridesOf(shape: readonly number[]): number[] {
  const s: number[] = [];
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
}

/** Element of `shape` read at output coordinates `c` of a broadcast result (right-aligned, size-1 dims repeat). */
function bIndex(shape: readonly number[], c: readonly number[]): number {
  const st = stridesOf(shape);
  let i = 0;
  const off = c.length - shape.length;
  for (let k = 0; k < shape.length; k++) if (shape[k] !== 1) i += c[off + k]! * st[k]!;
  return i;
}

export function coords(i: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let k = shape.length - 1; k >= 0; k--) {
    c[k] = i % shape[k]!;
    i = Math.floor(i / shape[k]!);
  }
  return c;
}

export function binaryRef(
  f: (x: number, y: number) => number,
  a: Float64Array,
  as: readonly number[],
  b: Float64Array,
  bs: readonly number[],
  out: readonly number[],
): Float64Array {
  const n = out.reduce((x, y) => x * y, 1);
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = coords(i, out);
    y[i] = f(a[bIndex(as, c)]!, b[bIndex(bs, c)]!);
  }
  return y;
}

export function reduceRef(op: 'sum' | 'mean' | 'max', x: Float64Array, outer: number, R: number, inner: number): Float64Array {
  const y = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++)
    for (let i = 0; i < inner; i++) {
      let s = op === 'max' ? -Infinity : 0;
      for (let r = 0; r < R; r++) {
        const v = x[(o * R + r) * inner + i]!;
        s = op === 'max' ? Math.max(s, v) : s + v;
      }
      y[o * inner + i] = op === 'mean' ? s / R : s;
    }
  return y;
}

export function gatherRef(x: Float64Array, shape: readonly number[], strides: readonly number[], offset: number): Float64Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = coords(i, shape);
    let j = offset;
    for (let k = 0; k < c.length; k++) j += c[k]! * strides[k]!;
    y[i] = x[j]!;
  }
  return y;
}

/** C[b] = alpha * op(A[b]) op(B[b]) + bias + C0; batch strides 0 broadcast. */
export function matmulRef(
  a: Float64Array,
  b: Float64Array,
  o: { M: number; N: number; K: number; batch: number; sa: number; sb: number; transA?: boolean; transB?: boolean; alpha?: number; bias?: Float64Array; c0?: Float64Array },
): Float64Array {
  const { M, N, K, batch, sa, sb } = o;
  const alpha = o.alpha ?? 1;
  const c = new Float64Array(batch * M * N);
  for (let z = 0; z < batch; z++)
    for (let m = 0; m < M; m++)
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) {
          const x = a[z * sa + (o.transA ? k * M + m : m * K + k)]!;
          const w = b[z * sb + (o.transB ? n * K + k : k * N + n)]!;
          s += x * w;
        }
        const i = (z * M + m) * N + n;
        c[i] = alpha * s + (o.bias ? o.bias[n]! : 0) + (o.c0 ? o.c0[i]! : 0);
      }
  return c;
}
