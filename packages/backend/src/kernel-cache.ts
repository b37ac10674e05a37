import type { Context, Kernel } from './context';
import type { KernelDef } from './kernel';

const caches = new WeakMap<Context, Map<string, Kernel>>();

/**
 * The compiled kernel for `key` on this context, building its definition with `make` only the first time.
 * Wrappers call this on every dispatch, so `key` must name every choice that changes the definition (dtypes,
 * constants); it costs one Map lookup instead of rebuilding the definition and its cache key.
 */
export function cachedKernel(ctx: Context, key: string, make: () => KernelDef): Kernel {
  let m = caches.get(ctx);
  if (!m) caches.set(ctx, (m = new Map()));
  let k = m.get(key);
  if (!k) m.set(key, (k = ctx.kernel(make())));
  return k;
}
