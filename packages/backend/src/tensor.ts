import type { GpuBuffer } from './buffer-pool';
import type { Context } from './context';
import { decode, encode, storageBytes, type DType } from './dtype';
import { ShapeError } from './errors';

/** A contiguous row-major array in GPU storage: what backend kernels take and return. */
export interface DeviceTensor {
  readonly buffer: GpuBuffer;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function checkShape(shape: readonly number[], what = 'shape'): void {
  for (const d of shape)
    if (!Number.isInteger(d) || d < 0) throw new ShapeError(`${what} [${shape.join(', ')}] has an invalid dimension ${d}`);
}

/** An uninitialised tensor. */
export function empty(ctx: Context, shape: readonly number[], dtype: DType = 'f32'): DeviceTensor {
  checkShape(shape);
  return { buffer: ctx.alloc(storageBytes(dtype, numel(shape))), dtype, shape: [...shape] };
}

/** Upload numbers (converted to `dtype`, 16-bit with round-to-nearest-even). */
export function upload(ctx: Context, data: ArrayLike<number>, shape: readonly number[], dtype: DType = 'f32'): DeviceTensor {
  checkShape(shape);
  if (data.length !== numel(shape))
    throw new ShapeError(`${data.length} values do not fill shape [${shape.join(', ')}] (${numel(shape)} elements)`);
  const t = empty(ctx, shape, dtype);
  ctx.write(t.buffer, encode(dtype, data));
  return t;
}

/** Upload raw storage bytes (already in `dtype`'s layout). */
export function uploadBytes(ctx: Context, bytes: ArrayBufferView, shape: readonly number[], dtype: DType): DeviceTensor {
  checkShape(shape);
  const need = storageBytes(dtype, numel(shape));
  if (bytes.byteLength < need - 2 || bytes.byteLength > need)
    throw new ShapeError(`${bytes.byteLength} bytes do not match ${dtype}[${shape.join(', ')}] (${need} bytes)`);
  const t = empty(ctx, shape, dtype);
  ctx.write(t.buffer, bytes);
  return t;
}

/** Read a tensor back as numbers (f16/bf16 decoded exactly to f32). */
export async function download(ctx: Context, t: DeviceTensor): Promise<Float32Array | Int32Array | Uint32Array> {
  const n = numel(t.shape);
  const bytes = await ctx.read(t.buffer, storageBytes(t.dtype, n));
  return decode(t.dtype, bytes, n);
}

/** Fill the storage with a 32-bit pattern (NaN by default): tests poison outputs before a kernel runs. */
export function poison(ctx: Context, t: DeviceTensor, word = 0x7fc00000): void {
  const words = storageBytes(t.dtype, numel(t.shape)) / 4;
  ctx.write(t.buffer, new Uint32Array(words).fill(word));
}

export function release(ctx: Context, ...ts: DeviceTensor[]): void {
  for (const t of ts) ctx.release(t.buffer);
}
