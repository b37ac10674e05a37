/**
 * Sub-buffers: a byte range of a pool buffer that stands in for a buffer of its own. A tensor whose storage is
 * a sub-buffer lives at an offset inside a larger "arena" buffer, and every op binds, reads, writes and copies it
 * as usual (the context adds the offset): the multi-tensor optimizer keeps many small parameters, gradients and
 * moments in one arena each and updates them all in one dispatch.
 *
 * Lifetime: releasing a sub-buffer marks it released (it never enters the pool); the arena goes back to the pool
 * once its owner has released it and every sub-buffer of it has been released, whatever the order.
 */
import type { GpuBuffer } from './buffer-pool';
import { DeviceError } from './errors';

/** A byte range [offset, offset + size) of `root` (a pool buffer), usable wherever a {@link GpuBuffer} is. */
export interface SubBuffer extends GpuBuffer {
  readonly root: GpuBuffer;
  /** Byte offset in `root`: a multiple of the device's `minStorageBufferOffsetAlignment`. */
  readonly offset: number;
}

interface RootState {
  views: number;
  ownerReleased: boolean;
}

const roots = new WeakMap<GpuBuffer, RootState>();
// negative ids: never those of pool buffers (1, 2, ...), so bind-group keys and pending sets tell them apart
let nextId = -1;

/** The pool buffer that holds `b`'s bytes (`b` itself unless it is a sub-buffer). */
export function rootOf(b: GpuBuffer): GpuBuffer {
  return (b as SubBuffer).root ?? b;
}

/** Byte offset of `b`'s data in {@link rootOf}(b). */
export function offsetOf(b: GpuBuffer): number {
  return (b as SubBuffer).offset ?? 0;
}

/**
 * A sub-buffer of `size` bytes at byte `offset` of `root` (use `ctx.subBuffer`, which passes the device's
 * alignment). Throws a DeviceError for a misaligned or out-of-range range, or a released or nested root.
 */
export function makeSubBuffer(root: GpuBuffer, offset: number, size: number, align: number): SubBuffer {
  const what = `sub-buffer at byte ${offset}, ${size} bytes, of a ${root.size}-byte buffer`;
  if ((root as SubBuffer).root) throw new DeviceError(`${what}: the buffer is itself a sub-buffer`);
  if (root.released) throw new DeviceError(`${what}: the buffer was already released`);
  if (!Number.isInteger(offset) || offset < 0 || offset % align !== 0)
    throw new DeviceError(`${what}: the offset must be a non-negative multiple of minStorageBufferOffsetAlignment (${align})`);
  if (!Number.isInteger(size) || size <= 0 || size % 4 !== 0) throw new DeviceError(`${what}: the size must be a positive multiple of 4`);
  if (offset + size > root.size) throw new DeviceError(`${what}: the range ends past the buffer`);
  let st = roots.get(root);
  if (!st) roots.set(root, (st = { views: 0, ownerReleased: false }));
  st.views++;
  return { id: nextId--, gpu: root.gpu, size, released: false, root, offset };
}

/**
 * Release bookkeeping for `ctx.release(b)`: returns the pool buffer to give back to the pool now, or null. A
 * sub-buffer is marked released (its root returned once the owner and every other sub-buffer are done); a root
 * with live sub-buffers waits for them.
 */
export function releaseTarget(b: GpuBuffer): GpuBuffer | null {
  const root = (b as SubBuffer).root;
  if (root) {
    if (b.released) return null;
    b.released = true;
    const st = roots.get(root)!;
    if (--st.views > 0 || !st.ownerReleased) return null;
    roots.delete(root);
    return root;
  }
  const st = roots.get(b);
  if (!st) return b;
  if (st.views > 0) {
    st.ownerReleased = true;
    return null;
  }
  roots.delete(b);
  return b;
}
