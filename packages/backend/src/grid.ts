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
