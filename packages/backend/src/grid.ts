/** Split `workgroups` along x and y so neither exceeds `max` (65535 by default); kernels recover the
 *  linear index as `gid.x + gid.y * row` where `row = x * workgroupSize` is passed as a param. */
export function grid1d(threads: number, workgroupSize: number, max = 65535): { wg: [number, number]; row: number } {
  const groups = Math.max(1, Math.ceil(threads / workgroupSize));
  if (groups <= max) return { wg: [groups, 1], row: groups * workgroupSize };
  const y = Math.ceil(groups / max);
  const x = Math.ceil(groups / y);
  return { wg: [x, y], row: x * workgroupSize };
}
