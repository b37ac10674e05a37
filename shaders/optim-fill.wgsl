// optim-fill: dst[i] = value for i < n (32-bit words); clears found-inf flags without a host write.
// Bindings: dst (rw u32). Params: n, row (threads per grid row), value. Workgroup: 256 threads.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x + gid.y * p.row;
  if (i < p.n) { dst[i] = p.value; }
}
