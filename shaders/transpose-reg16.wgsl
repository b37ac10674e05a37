// transpose-reg16: batched 2-D transpose y[b, c, r] = x[b, r, c] of contiguous [B, R, C] 16-bit elements (f16,
// bf16: moved as bits) into [B, C, R], for R and C multiples of 8, with no workgroup memory: each thread moves one
// 8 x 8 block in its registers. It loads the block's 8 source rows (16 bytes each; the 8 threads of one row group
// cover a 128-byte row segment, so a warp's load is 4 whole rows of 128 bytes), packs each output word from two
// source rows, and stores 8 units of 16 bytes, one per source column (a warp's store: 8 output rows of 64 bytes).
// No barrier, so a thread with no block returns at once; all 8 loads are issued before any is used.
// Bindings: x (read, 16-bit storage; used through x4: array<vec4u>, 8 elements per load), y (rw; used through y4:
//   array<vec4u>, declared by the wrapper on the same binding numbers).
// Params: R, C (matrix dims), zoff (first batch of this dispatch).
// Grid: x = ceil(C / 64), y = ceil(R / 256), z = batches of this dispatch (<= 65535; the wrapper splits more).
// Workgroup: 256 threads, a 256 x 64 tile: thread t takes source rows 8 (t / 8) .. + 7, columns 8 (t % 8) .. + 7.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wg.y * 256u + (lid / 8u) * 8u;
  let c = wg.x * 64u + (lid % 8u) * 8u;
  if (r >= p.R || c >= p.C) { return; }
  let base = (wg.z + p.zoff) * p.R * p.C;
  let i0 = (base + r * p.C + c) / 8u;
  let cs = p.C / 8u;
  var q: array<vec4u, 8>;
  for (var j = 0u; j < 8u; j++) { q[j] = x4[i0 + j * cs]; }
  // word k of source row j holds columns 2k (low half) and 2k + 1 (high half); output word i of column 2k + h
  // holds source rows 2i (low) and 2i + 1 (high)
  let o0 = (base + c * p.R + r) / 8u;
  let rs = p.R / 8u;
  for (var k = 0u; k < 4u; k++) {
    var e: vec4u;
    var o: vec4u;
    for (var i = 0u; i < 4u; i++) {
      let lo = q[2u * i][k];
      let hi = q[2u * i + 1u][k];
      e[i] = (lo & 0xffffu) | (hi << 16u);
      o[i] = (lo >> 16u) | (hi & 0xffff0000u);
    }
    y4[o0 + 2u * k * rs] = e;
    y4[o0 + (2u * k + 1u) * rs] = o;
  }
}
