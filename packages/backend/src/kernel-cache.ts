import type { Context, Kernel } from './context';
import type { KernelDef } from './kernel';

/**
 * The kernel cache: every op family gets its compiled kernels here, one Map per context keyed by a string that
 * names every choice that changes the definition (families prefix their keys: `core:`, `optim:`, `llm:` ...).
 * Two ways in: {@link cachedKernel} builds the pipeline at once (the usual case), {@link checkedKernel} first
 * checks the WGSL asynchronously and builds only a kernel that compiled (subgroup-matrix kernels: Dawn under
 * `skip_validation` aborted the process on a pipeline whose shader broke a subgroup-matrix rule).
 */
type Entry = Kernel | { pending: Promise<void> } | { error: Error };
const caches = new WeakMap<Context, Map<string, Entry>>();

function cacheOf(ctx: Context): Map<string, Entry> {
  let m = caches.get(ctx);
  if (!m) caches.set(ctx, (m = new Map()));
  return m;
}

/**
 * The compiled kernel for `key` on this context, building its definition with `make` only the first time.
 * Wrappers call this on every dispatch, so `key` must name every choice that changes the definition (dtypes,
 * constants); it costs one Map lookup instead of rebuilding the definition and its cache key.
 */
export function cachedKernel(ctx: Context, key: string, make: () => KernelDef): Kernel {
  const m = cacheOf(ctx);
  let k = m.get(key);
  if (!k) m.set(key, (k = ctx.kernel(make())));
  return k as Kernel;
}

/**
 * The kernel for `key` once its WGSL has been checked and its pipeline built, else null: the first call starts
 * the check (`ctx.compile`) and returns null, as does every call while it runs and after it failed (see
 * {@link kernelFailures}). Callers run a fallback kernel meanwhile; {@link kernelsReady} waits for the checks.
 */
export function checkedKernel(ctx: Context, key: string, make: () => KernelDef): Kernel | null {
  const m = cacheOf(ctx);
  const e = m.get(key);
  if (e) return 'pipeline' in e ? e : null;
  const pending = ctx.compile(make()).then(
    (k) => void m.set(key, k),
    (err: Error) => void m.set(key, { error: err }),
  );
  m.set(key, { pending });
  return null;
}

/** Wait until every {@link checkedKernel} check started on this context so far has finished. */
export async function kernelsReady(ctx: Context): Promise<void> {
  for (;;) {
    const pend = [...cacheOf(ctx).values()].filter((e): e is { pending: Promise<void> } => 'pending' in e);
    if (!pend.length) return;
    await Promise.all(pend.map((e) => e.pending));
  }
}

/** Whether the {@link checkedKernel} check of `key` failed on this context. */
export function kernelFailed(ctx: Context, key: string): boolean {
  const e = cacheOf(ctx).get(key);
  return !!e && 'error' in e;
}

/** The {@link checkedKernel} keys whose check failed on this context, with the errors. */
export function kernelFailures(ctx: Context): Map<string, Error> {
  const out = new Map<string, Error>();
  for (const [k, e] of cacheOf(ctx)) if ('error' in e) out.set(k, e.error);
  return out;
}
