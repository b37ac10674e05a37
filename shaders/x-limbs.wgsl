// x-limbs: X [rows, K] (f32) as int8 limbs for the integer int4 GEMV, one thread per group of 16 elements of a
//   row (`x-limbs-write.wgsl`, appended by the wrapper, has the layout). K is a multiple of 16.
// Bindings: x (read f32 [rows, K]), xl (rw u32 [rows, 13 K / 16]).
// Params: rows, K, row (threads per grid row).
fn limb_src(e: u32) -> f32 { return x[e]; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let groups = p.K / 16u;
  let i = gid.x + gid.y * p.row;
  if (i >= p.rows * groups) { return; }
  let row = i / groups;
  write_limbs(row * p.K, row * (13u * p.K / 16u), i % groups, p.K);
}
