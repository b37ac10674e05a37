/** Helpers shared by the ops/llm tests (not part of the public API). */
import type { Context } from '../../context';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, type DType } from '../../dtype';
import { download, empty, poison, upload, type DeviceTensor } from '../../tensor';
import { randn } from '../../testing';

/** Round float64 values to what a tensor of `dtype` stores (f32 / f16 / bf16, round to nearest even). */
export function quantize(dtype: DType, x: ArrayLike<number>): Float64Array {
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    out[i] =
      dtype === 'f16' ? f16BitsToF32(f32ToF16Bits(v)) : dtype === 'bf16' ? bf16BitsToF32(f32ToBf16Bits(v)) : Math.fround(v);
  }
  return out;
}

/** Random normal data already rounded to `dtype`, and its upload. */
export function randTensor(
  ctx: Context,
  shape: readonly number[],
  dtype: DType,
  seed: number,
  scale = 1,
): { data: Float64Array; t: DeviceTensor } {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = quantize(dtype, randn(n, seed, scale));
  return { data, t: upload(ctx, data, shape, dtype) };
}

/** An f32 output tensor filled with NaN. */
export function poisoned(ctx: Context, shape: readonly number[]): DeviceTensor {
  const t = empty(ctx, shape);
  poison(ctx, t);
  return t;
}

export async function get(ctx: Context, t: DeviceTensor): Promise<Float64Array> {
  return Float64Array.from(await download(ctx, t));
}
