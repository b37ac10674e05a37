// transpose-reg16: batched 2-D transpose y[b, c, r] = x[b, r, c] of contiguous [B, R, C] 16-bit elements (f16,
// bf16: moved as bits) into [B, C, R], for R and C multiples of 8, with no workgroup memory: each thread moves one
// 8 x 8 block in its registers. It loads the block's 8 source rows (16 bytes each; the 8 threads of one row group
// cover a 128-byte row segment, so a warp's load is 4 whole rows of 128 bytes), packs each output word from two
// source rows, and stores 8 units of 16 bytes, one per source column (a warp's store: 8 output rows of 64 bytes).
// No barrier, so a thread with no block returns at once; all 8 loads are issued before any is used.
// The pair form moves two unbatched matrices in one dispatch (x W^T through TN transposes both operands): the
// workgroup rows below gy1 take the first, the rest the second.
// Bindings (declared by the wrapper, transpose.ts, with ld(m, i) and st(m, i, v): unit i of matrix m's source and
//   destination as array<vec4u>): x, y, and in the pair form x2, y2.
// Params: R, C (the first matrix), zoff (first batch of this dispatch), R2, C2 (the second; 0 in the single form),
//   gy1 (workgroup rows of the first: ceil(R / 256)).
// Grid: x = ceil(max(C, C2) / 64), y = gy1 + ceil(R2 / 256), z = batches of this dispatch (<= 65535; the wrapper
//   splits more; 1 in the pair form).
// Workgroup: 256 threads, a 256 x 64 tile: thread t takes source rows 8 (t / 8) .. + 7, columns 8 (t % 8) .. + 7.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let m = select(0u, 1u, wg.y >= p.gy1);
  let R = select(p.R, p.R2, m == 1u);
  let C = select(p.C, p.C2, m == 1u);
  let r = (wg.y - m * p.gy1) * 256u + (lid / 8u) * 8u;
  let c = wg.x * 64u + (lid % 8u) * 8u;
  if (r >= R || c >= C) { return; }
  let base = (wg.z + p.zoff) * R * C;
  let i0 = (base + r * C + c) / 8u;
  let cs = C / 8u;
  var q: array<vec4u, 8>;
  for (var j = 0u; j < 8u; j++) { q[j] = ld(m, i0 + j * cs); }
  // word k of source row j holds columns 2k (low half) and 2k + 1 (high half); output word i of column 2k + h
  // holds source rows 2i (low) and 2i + 1 (high)
  let o0 = (base + c * R + r) / 8u;
  let rs = R / 8u;
  for (var k = 0u; k < 4u; k++) {
    var e: vec4u;
    var o: vec4u;
    for (var i = 0u; i < 4u; i++) {
      let lo = q[2u * i][k];
      let hi = q[2u * i + 1u][k];
      e[i] = (lo & 0xffffu) | (hi << 16u);
      o[i] = (lo >> 16u) | (hi & 0xffff0000u);
    }
    st(m, o0 + 2u * k * rs, e);
    st(m, o0 + (2u * k + 1u) * rs, o);
  }
}
