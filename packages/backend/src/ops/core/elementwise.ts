import binaryWgsl from '../../../../../shaders/binary.wgsl';
import fillWgsl from '../../../../../shaders/fill.wgsl';
import unaryWgsl from '../../../../../shaders/unary.wgsl';
import { ioBindings } from '../../kernel';
import type { Context } from '../../context';
import { storageBytes, type DType } from '../../dtype';
import { formatOf } from '../../format';
import { ShapeError } from '../../errors';
import { dispatch1d } from '../../grid';
import { checkShape, empty, numel, type DeviceTensor } from '../../tensor';
import {
  assertFloat,
  broadcastShapes,
  broadcastStrides,
  cachedKernel,
  checkOut,
  coalesce,
  fmtShape,
  MAX_RANK,
  padRank,
} from './util';

/** Elementwise unary ops (`scale` multiplies by a scalar, `addScalar` adds one; `gelu` is the tanh form). */
export const UNARY_OPS = [
  'neg',
  'exp',
  'log',
  'sqrt',
  'rsqrt',
  'abs',
  'relu',
  'gelu',
  'silu',
  'sigmoid',
  'tanh',
  'square',
  'scale',
  'addScalar',
] as const;
export type UnaryOp = (typeof UNARY_OPS)[number];

/** Elementwise binary ops with NumPy broadcasting (`pow` follows NumPy: negative bases need integral exponents). */
export const BINARY_OPS = ['add', 'sub', 'mul', 'div', 'max', 'min', 'pow'] as const;
export type BinaryOp = (typeof BINARY_OPS)[number];

/** Options of the elementwise ops. */
export interface ElementwiseOptions {
  /** Write into this f32 tensor (of the result's shape) instead of a new one. It must not be an input. */
  out?: DeviceTensor;
}

/**
 * `y = f(x)` elementwise, in f32, for any float input dtype; the result is a new f32 tensor (or `opts.out`).
 * `scalar` is the factor of `scale` and the addend of `addScalar` (ignored by the others).
 */
export function unary(ctx: Context, op: UnaryOp, x: DeviceTensor, scalar = 0, opts: ElementwiseOptions = {}): DeviceTensor {
  const code = UNARY_OPS.indexOf(op);
  if (code < 0) throw new ShapeError(`unknown unary op '${op}' (expected one of ${UNARY_OPS.join(', ')})`);
  assertFloat(x, op);
  const y = opts.out ?? empty(ctx, x.shape);
  if (opts.out) checkOut(opts.out, x.shape, op, 'f32', [x]);
  const n = numel(x.shape);
  const k = cachedKernel(ctx, `unary:${code}:${x.dtype}`, () => ({
    name: 'unary',
    code: unaryWgsl,
    bindings: ioBindings(x.dtype),
    params: ['u32:n', 'u32:row', 'f32:alpha'],
    consts: { OP: code },
  }));
  dispatch1d(ctx, k, [x.buffer, y.buffer], n, [scalar]);
  return y;
}

/** A unary op without a scalar: `f(ctx, x, opts)`. */
export type UnaryFn = (ctx: Context, x: DeviceTensor, opts?: ElementwiseOptions) => DeviceTensor;
const unaryFn =
  (op: UnaryOp): UnaryFn =>
  (ctx, x, opts) =>
    unary(ctx, op, x, 0, opts);

/** `-x` */
export const neg: UnaryFn = unaryFn('neg');
/** `e^x` */
export const exp: UnaryFn = unaryFn('exp');
/** natural logarithm */
export const log: UnaryFn = unaryFn('log');
/** square root */
export const sqrt: UnaryFn = unaryFn('sqrt');
/** `1 / sqrt(x)` */
export const rsqrt: UnaryFn = unaryFn('rsqrt');
/** `|x|` */
export const abs: UnaryFn = unaryFn('abs');
/** `max(x, 0)` */
export const relu: UnaryFn = unaryFn('relu');
/** GELU, tanh approximation (PyTorch `approximate='tanh'`, HF `gelu_pytorch_tanh`). */
export const gelu: UnaryFn = unaryFn('gelu');
/** `x * sigmoid(x)` */
export const silu: UnaryFn = unaryFn('silu');
/** `1 / (1 + e^-x)` */
export const sigmoid: UnaryFn = unaryFn('sigmoid');
/** hyperbolic tangent */
export const tanh: UnaryFn = unaryFn('tanh');
/** `x * x` */
export const square: UnaryFn = unaryFn('square');
/** `s * x` */
export const scale = (ctx: Context, x: DeviceTensor, s: number, opts?: ElementwiseOptions): DeviceTensor =>
  unary(ctx, 'scale', x, s, opts);
/** `x + s` */
export const addScalar = (ctx: Context, x: DeviceTensor, s: number, opts?: ElementwiseOptions): DeviceTensor =>
  unary(ctx, 'addScalar', x, s, opts);

/**
 * `y = f(a, b)` elementwise with NumPy broadcasting of any two shapes, in f32, for any float input dtypes; the
 * result is a new f32 tensor of the broadcast shape (or `opts.out`). After merging dims that are contiguous in
 * both inputs at most 6 may remain.
 */
export function binary(ctx: Context, op: BinaryOp, a: DeviceTensor, b: DeviceTensor, opts: ElementwiseOptions = {}): DeviceTensor {
  const code = BINARY_OPS.indexOf(op);
  if (code < 0) throw new ShapeError(`unknown binary op '${op}' (expected one of ${BINARY_OPS.join(', ')})`);
  assertFloat(a, op, 'a');
  assertFloat(b, op, 'b');
  const shape = broadcastShapes(a.shape, b.shape);
  const y = opts.out ?? empty(ctx, shape);
  if (opts.out) checkOut(opts.out, shape, op, 'f32', [a, b]);
  const n = numel(shape);
  const c = coalesce(shape, [broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape)]);
  if (c.dims.length > MAX_RANK)
    throw new ShapeError(
      `${op}: broadcasting ${fmtShape(a.shape)} with ${fmtShape(b.shape)} needs ${c.dims.length} dims; at most ${MAX_RANK} are supported`,
    );
  const rank = c.dims.length;
  const pr = padRank(c.dims, c.strides);
  const k = cachedKernel(ctx, `binary:${code}:${rank}:${a.dtype}:${b.dtype}`, () => ({
    name: 'binary',
    code: binaryWgsl,
    bindings: [
      { name: 'a', access: 'read', dtype: a.dtype },
      { name: 'b', access: 'read', dtype: b.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: BINARY_PARAMS,
    consts: { OP: code, RANK: rank },
  }));
  dispatch1d(ctx, k, [a.buffer, b.buffer, y.buffer], n, [...pr.dims, ...pr.strides[0]!, ...pr.strides[1]!]);
  return y;
}

const BINARY_PARAMS = [
  'u32:n',
  'u32:row',
  ...[0, 1, 2, 3, 4, 5].map((i) => `u32:d${i}` as const),
  ...[0, 1, 2, 3, 4, 5].map((i) => `u32:sa${i}` as const),
  ...[0, 1, 2, 3, 4, 5].map((i) => `u32:sb${i}` as const),
] as const;

/** A broadcasting binary op: `f(ctx, a, b, opts)`. */
export type BinaryFn = (ctx: Context, a: DeviceTensor, b: DeviceTensor, opts?: ElementwiseOptions) => DeviceTensor;
const binaryFn =
  (op: BinaryOp): BinaryFn =>
  (ctx, a, b, opts) =>
    binary(ctx, op, a, b, opts);

/** `a + b` (broadcasting) */
export const add: BinaryFn = binaryFn('add');
/** `a - b` (broadcasting) */
export const sub: BinaryFn = binaryFn('sub');
/** `a * b` (broadcasting) */
export const mul: BinaryFn = binaryFn('mul');
/** `a / b` (broadcasting) */
export const div: BinaryFn = binaryFn('div');
/** elementwise maximum (broadcasting) */
export const maximum: BinaryFn = binaryFn('max');
/** elementwise minimum (broadcasting) */
export const minimum: BinaryFn = binaryFn('min');
/** `a ** b` (broadcasting) */
export const pow: BinaryFn = binaryFn('pow');

/** The u32 word that repeats `value` in `dtype`'s storage (from the format table's host encoder). */
function fillWord(value: number, dtype: DType): number {
  const f = formatOf(dtype);
  if (f.kind === 'int' && !Number.isInteger(value)) throw new ShapeError(`fill: ${value} is not an integer for dtype ${dtype}`);
  return new Uint32Array(f.encode(new Array<number>(f.perWord).fill(value)).buffer, 0, 1)[0]!;
}

function fillKernel(ctx: Context, entry: 'main' | 'arange', int: boolean) {
  return cachedKernel(ctx, `fill:${entry}:${int}`, () => ({
    name: 'fill',
    code: fillWgsl,
    entryPoint: entry,
    bindings: [{ name: 'y', access: 'rw', dtype: 'u32' }],
    params: ['u32:n', 'u32:row', 'u32:word', 'u32:word2'],
    consts: { INT: int },
  }));
}

/** A tensor of `shape` and `dtype` (default f32) with every element `value` (16-bit dtypes rounded to nearest even). */
export function fill(ctx: Context, shape: readonly number[], value: number, dtype: DType = 'f32', opts: ElementwiseOptions = {}): DeviceTensor {
  checkShape(shape);
  const y = opts.out ?? empty(ctx, shape, dtype);
  if (opts.out) checkOut(opts.out, shape, 'fill', dtype);
  const word = fillWord(value, dtype);
  const words = storageBytes(dtype, numel(shape)) / 4;
  dispatch1d(ctx, fillKernel(ctx, 'main', false), [y.buffer], words, [word, 0]);
  return y;
}

/** `[start, start + step, ...]`: `n` values as f32 (computed as `start + i * step` in f32) or as i32. */
export function arange(ctx: Context, n: number, opts: { start?: number; step?: number; dtype?: 'f32' | 'i32'; out?: DeviceTensor } = {}): DeviceTensor {
  const dtype = opts.dtype ?? 'f32';
  const start = opts.start ?? 0;
  const step = opts.step ?? 1;
  checkShape([n]);
  const y = opts.out ?? empty(ctx, [n], dtype);
  if (opts.out) checkOut(opts.out, [n], 'arange', dtype);
  const int = dtype === 'i32';
  if (int && !(Number.isInteger(start) && Number.isInteger(step))) throw new ShapeError(`arange: i32 needs integer start and step (got ${start}, ${step})`);
  const bits = (v: number) => (int ? v >>> 0 : new Uint32Array(Float32Array.of(v).buffer)[0]!);
  dispatch1d(ctx, fillKernel(ctx, 'arange', int), [y.buffer], n, [bits(start), bits(step)]);
  return y;
}
