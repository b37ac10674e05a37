import type { BufferBinding, Context, Kernel } from './context';

/** Split `workgroups` along x and y so neither exceeds `max` (65535 by default); kernels recover the
 *  linear index as `gid.x + gid.y * row` where `row = x * workgroupSize` is passed as a param. */
export function grid1d(threads: number, workgroupSize: number, max = 65535): { wg: [number, number]; row: number } {
  const wg = grid2d(Math.ceil(threads / workgroupSize), max);
  return { wg, row: wg[0] * workgroupSize };
}

/** A grid of `n` workgroups (x and y within `max`, 65535 by default) for kernels that take the workgroup index
 *  as `wid.x + wid.y * nwg.x` and guard against the few extra groups of the last row. */
export function grid2d(n: number, max = 65535): [number, number] {
  if (n <= max) return [Math.max(1, n), 1];
  const y = Math.ceil(n / max);
  return [Math.ceil(n / y), y];
}

/**
 * Encode `k` over `threads` threads (`n` by default) in workgroups of 256, split along y past 65535 workgroups
 * ({@link grid1d}), with params `[n, row, ...rest]` (`n` the kernel's element count, `row` the threads per
 * grid row). No threads: nothing runs.
 */
export function dispatch1d(
  ctx: Context,
  k: Kernel,
  bufs: readonly BufferBinding[],
  n: number,
  rest: readonly number[] = [],
  threads = n,
): void {
  const { wg, row } = grid1d(threads, 256);
  ctx.dispatch(k, bufs, threads ? wg : 0, [n, row, ...rest]);
}
