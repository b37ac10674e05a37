/** Helpers shared by the ops/llm tests (not part of the public API). */
import { expect } from 'vitest';
import type { Context } from '../../context';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, type DType } from '../../dtype';
import { download, empty, poison, upload, type DeviceTensor } from '../../tensor';
import { absErr, randn } from '../../testing';
import { refRope, type Geo } from './llm.ref';
import { rope, ropeBackward, ropeInvFreq } from './rope';

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

/**
 * One RoPE case forward and backward against the float64 reference: geometry `g`, inputs of `dtype` (random,
 * seeds `seeds`), `rotaryDim` rotated dims, positions from `posMode` (a position offset; 'ids1': [T] ids
 * 3t + idsBase; 'ids2': [B, T] ids spread over 100000).
 */
export async function checkRope(
  ctx: Context,
  g: Geo,
  dtype: DType,
  rotaryDim: number,
  posMode: 'ids1' | 'ids2' | number,
  idsBase: number,
  seeds: [number, number],
): Promise<void> {
  const inv = ropeInvFreq({ theta: 10000, headDim: rotaryDim });
  const shape = g.layout === 'BTHD' ? [g.b, g.t, g.h, g.d] : [g.b, g.h, g.t, g.d];
  const x = randTensor(ctx, shape, dtype, seeds[0]);
  const dy = randTensor(ctx, shape, dtype, seeds[1]);
  const invT = upload(ctx, inv, [inv.length]);
  let pos: number[][];
  let ids: DeviceTensor | undefined;
  if (posMode === 'ids2') {
    pos = Array.from({ length: g.b }, (_, b) => Array.from({ length: g.t }, (_, t) => (b * 7919 + t * 104729) % 100000));
    ids = upload(ctx, pos.flat(), [g.b, g.t], 'i32');
  } else if (posMode === 'ids1') {
    const p1 = Array.from({ length: g.t }, (_, t) => 3 * t + idsBase);
    pos = Array.from({ length: g.b }, () => p1);
    ids = upload(ctx, p1, [g.t], 'i32');
  } else pos = Array.from({ length: g.b }, () => Array.from({ length: g.t }, (_, t) => t + posMode));
  const opts = { layout: g.layout, positionIds: ids, positionOffset: typeof posMode === 'number' ? posMode : 0 };
  const y = rope(ctx, x.t, invT, { ...opts, out: poisoned(ctx, shape) });
  const dx = ropeBackward(ctx, dy.t, invT, { ...opts, out: poisoned(ctx, shape) });
  expect(absErr(await get(ctx, y), refRope(x.data, inv, pos, g))).toBeLessThan(2e-5);
  expect(absErr(await get(ctx, dx), refRope(dy.data, inv, pos, g, -1))).toBeLessThan(2e-5);
  for (const t of [x.t, dy.t, invT, y, dx, ...(ids ? [ids] : [])]) ctx.release(t.buffer);
}
