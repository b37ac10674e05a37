import type { Context, DeviceTensor, GpuBuffer } from '@rusty/backend';

/** Reference counts of GPU buffers shared by tensors, views and saved-for-backward slots; a buffer with no
 *  entry has exactly one owner (whoever allocated it). */
const refs = new WeakMap<GpuBuffer, number>();

export function retain(buf: GpuBuffer): void {
  refs.set(buf, (refs.get(buf) ?? 1) + 1);
}

/** Drop one reference; the buffer goes back to the pool when none is left. */
export function releaseRef(ctx: Context, buf: GpuBuffer): void {
  const n = (refs.get(buf) ?? 1) - 1;
  if (n > 0) refs.set(buf, n);
  else {
    refs.delete(buf);
    ctx.release(buf);
  }
}

export function refCount(buf: GpuBuffer): number {
  return buf.released ? 0 : (refs.get(buf) ?? 1);
}

/** A DeviceTensor with the same storage and another shape (no copy). */
export function viewAs(t: DeviceTensor, shape: readonly number[]): DeviceTensor {
  return { buffer: t.buffer, dtype: t.dtype, shape: [...shape] };
}
