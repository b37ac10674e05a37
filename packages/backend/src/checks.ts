/** Argument checks shared by every op family (core, llm, optim, ...): shapes, float inputs, `out` tensors and
 *  the storage-binding limit. Each throws a `ShapeError` whose message starts with `what` (the op and the
 *  argument, e.g. `rmsnorm: out`) and names the dtype and shape it got. */
import type { Context } from './context';
import { floatNames, isFloat, storageBytes, type DType } from './dtype';
import { ShapeError } from './errors';
import { numel, type DeviceTensor } from './tensor';

/** `[2, 3]`: a shape for messages. */
export function fmtShape(s: readonly number[]): string {
  return `[${s.join(', ')}]`;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Throw unless `t` has a float storage format (f32, f16, bf16). */
export function assertFloat(t: DeviceTensor, what: string): void {
  if (!isFloat(t.dtype)) throw new ShapeError(`${what} must be ${floatNames()}, got ${t.dtype}${fmtShape(t.shape)}`);
}

/**
 * Check an `out` tensor given to an op: `dtype` (f32 by default) and the shape the op produces, a buffer large
 * enough, and none of `inputs` in its buffer (WebGPU refuses a buffer bound both for reading and for writing in
 * one dispatch).
 */
export function checkOut(
  out: DeviceTensor,
  shape: readonly number[],
  what: string,
  dtype: DType = 'f32',
  inputs: readonly DeviceTensor[] = [],
): void {
  if (inputs.some((t) => t.buffer === out.buffer)) throw new ShapeError(`${what} must not share its buffer with an input`);
  if (out.dtype !== dtype || !sameShape(out.shape, shape))
    throw new ShapeError(`${what} must be ${dtype}${fmtShape(shape)}, got ${out.dtype}${fmtShape(out.shape)}`);
  if (out.buffer.size < storageBytes(dtype, numel(shape)))
    throw new ShapeError(`${what} buffer (${out.buffer.size} bytes) is too small for ${dtype}${fmtShape(shape)}`);
}

/** Every tensor a kernel binds whole must fit one storage binding (`ctx.maxBinding`; see `rowChunks` in
 *  `ops/llm/common.ts` for kernels that split tensors along their rows). */
export function checkBindable(ctx: Context, op: string, ...ts: (readonly [DeviceTensor, string])[]): void {
  const max = ctx.maxBinding;
  for (const [t, name] of ts) {
    const bytes = storageBytes(t.dtype, numel(t.shape));
    if (bytes > max)
      throw new ShapeError(
        `${op}: ${name} ${t.dtype}${fmtShape(t.shape)} is ${bytes} bytes, over this device's storage binding limit ` +
          `(maxStorageBufferBindingSize ${max}); split it along its rows or into smaller tensors`,
      );
  }
}
