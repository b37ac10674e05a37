// x-limbs: X [rows, K] (f32) as int8 limbs for the integer int4 GEMV, one invocation per unit of 4 elements
//   (`x-limbs-write.wgsl`, appended by the wrapper, has the units and the layout). K is a multiple of 16.
// Bindings: x (read f32 [rows, K]), xl (rw u32 [rows, 7 K / 8]).
// Params: rows, K, row (invocations per grid row, a multiple of 64).
fn limb_src(e: u32) -> f32 { return x[e]; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let units = p.K / 4u;
  let i = gid.x + gid.y * p.row; // i mod 4 = the invocation's index in its workgroup mod 4
  let row = i / units;
  write_limbs(row * p.K, row, i % units, p.K, i < p.rows * units);
}
