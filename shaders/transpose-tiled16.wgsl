// transpose-tiled16: batched 2-D transpose y[b, c, r] = x[b, r, c] of contiguous [B, R, C] 16-bit elements (f16,
// bf16: moved as bits) into [B, C, R], for R and C multiples of 8 (16-byte units on both global sides).
// Bindings: x (read, 16-bit storage; used through x4: array<vec4u>, 8 elements per load), y (rw; used through y4:
//   array<vec4u>, declared by the wrapper on the same binding numbers).
// Params: R, C (matrix dims), zoff (first batch of this dispatch).
// Grid: x = ceil(C / 64), y = ceil(R / 64), z = batches of this dispatch (<= 65535; the wrapper splits more).
// Workgroup: 256 threads moving a 64 x 64 tile: each loads 2 units of 8 elements along a source row (a warp: 4 rows
// of 128 bytes) and writes them transposed into workgroup memory (one element per u32, rows padded to 65 words),
// then reads 8 consecutive elements of a tile row (a source column) and stores them as one unit of an output row.
const TS: u32 = 64u;
const TP: u32 = 65u;
var<workgroup> tile: array<u32, 4160>; // 64 x 65

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let b = wg.z + p.zoff;
  let c0 = wg.x * TS;
  let r0 = wg.y * TS;
  let base = b * p.R * p.C;
  for (var j = 0u; j < 2u; j++) {
    let u = lid + j * 256u;
    let r = u / 8u;
    let c = (u % 8u) * 8u;
    if (r0 + r < p.R && c0 + c < p.C) {
      let q = x4[(base + (r0 + r) * p.C + c0 + c) / 8u];
      for (var i = 0u; i < 4u; i++) {
        tile[(c + 2u * i) * TP + r] = q[i] & 0xffffu;
        tile[(c + 2u * i + 1u) * TP + r] = q[i] >> 16u;
      }
    }
  }
  workgroupBarrier();
  for (var j = 0u; j < 2u; j++) {
    let u = lid + j * 256u;
    let c = u / 8u;
    let r = (u % 8u) * 8u;
    if (r0 + r < p.R && c0 + c < p.C) {
      var w: vec4u;
      for (var i = 0u; i < 4u; i++) { w[i] = tile[c * TP + r + 2u * i] | (tile[c * TP + r + 2u * i + 1u] << 16u); }
      y4[(base + (c0 + c) * p.R + r0 + r) / 8u] = w;
    }
  }
}
