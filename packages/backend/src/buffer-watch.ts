import type { GpuBuffer } from './buffer-pool';
import { rootOf } from './sub-buffer';

/**
 * Watches on buffers' contents, by root buffer (`Context.watchWrites`): each fires once, at the first event after
 * which its buffer's bytes may differ. The context reports writes into a root (`touched(buf)`: any write into the
 * root counts) and releases (`released(buf)`: only the watches of that buffer, or all of a released root). Also the
 * release-only hooks of `Context.onRelease`, which writes never reach.
 */
export class BufferWatches {
  private byRoot = new Map<number, { buf: GpuBuffer; onChange: () => void }[]>();
  /** Release-only hooks (`Context.onRelease`), by buffer: kept apart so that they cost the dispatch path nothing. */
  private releaseHooks = new Map<GpuBuffer, Set<() => void>>();

  /** Whether any watch is set (the context's hot paths test this first). */
  get size(): number {
    return this.byRoot.size;
  }

  /** Watch `buf`; returns a function that removes the watch. */
  add(buf: GpuBuffer, onChange: () => void): () => void {
    const id = rootOf(buf).id;
    let list = this.byRoot.get(id);
    if (!list) this.byRoot.set(id, (list = []));
    const w = { buf, onChange };
    list.push(w);
    return () => {
      const l = this.byRoot.get(id);
      const i = l ? l.indexOf(w) : -1;
      if (i < 0) return;
      l!.splice(i, 1);
      if (!l!.length) this.byRoot.delete(id);
    };
  }

  /** Fire the watches on `buf`'s root (on release: only those of `buf` itself or of the root). */
  touched(buf: GpuBuffer, released = false): void {
    const root = rootOf(buf);
    const list = this.byRoot.get(root.id);
    if (!list) return;
    const fire = released && buf !== root ? list.filter((w) => w.buf === buf) : list;
    if (!fire.length) return;
    const rest = fire === list ? [] : list.filter((w) => w.buf !== buf);
    if (rest.length) this.byRoot.set(root.id, rest);
    else this.byRoot.delete(root.id);
    for (const w of fire) w.onChange();
  }

  /** Call `fn` once, when `buf` itself is released; returns a function that removes the hook. */
  onRelease(buf: GpuBuffer, fn: () => void): () => void {
    let hooks = this.releaseHooks.get(buf);
    if (!hooks) this.releaseHooks.set(buf, (hooks = new Set()));
    const h = () => fn();
    hooks.add(h);
    return () => {
      const set = this.releaseHooks.get(buf);
      if (!set?.delete(h)) return;
      if (!set.size) this.releaseHooks.delete(buf);
    };
  }

  /** `buf` is being released: its write watches (and a released root's) and its release hooks fire. */
  released(buf: GpuBuffer): void {
    if (this.byRoot.size) this.touched(buf, true);
    const hooks = this.releaseHooks.get(buf);
    if (!hooks) return;
    this.releaseHooks.delete(buf);
    for (const f of hooks) f();
  }
}
