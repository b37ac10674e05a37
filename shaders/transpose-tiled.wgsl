// transpose-tiled: batched 2-D transpose y[b, c, r] = x[b, r, c] of contiguous [B, R, C] into [B, C, R], f32 out.
// Bindings: x (read, f32/f16/bf16 via read_x), y (rw f32).
// Params: R, C (matrix dims), zoff (first batch of this dispatch).
// Grid: x = ceil(C / 32), y = ceil(R / 32), z = batches of this dispatch (<= 65535; the wrapper splits larger batch counts).
// Workgroup: 32 x 8 threads; each moves a 32x32 tile through workgroup memory (rows padded to 33 words so
// the column reads hit 32 different banks), 4 elements per thread, both global sides coalesced.
var<workgroup> tile: array<f32, 1056>; // 32 x 33

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let b = wg.z + p.zoff;
  let c0 = wg.x * 32u;
  let r0 = wg.y * 32u;
  let base = b * p.R * p.C;
  for (var j = 0u; j < 32u; j += 8u) {
    let r = r0 + l.y + j;
    let c = c0 + l.x;
    if (r < p.R && c < p.C) { tile[(l.y + j) * 33u + l.x] = read_x(base + r * p.C + c); }
  }
  workgroupBarrier();
  for (var j = 0u; j < 32u; j += 8u) {
    let c = c0 + l.y + j;
    let r = r0 + l.x;
    if (r < p.R && c < p.C) { y[base + c * p.R + r] = tile[l.x * 33u + l.y + j]; }
  }
}
