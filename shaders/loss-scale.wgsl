// loss-scale: in-place x *= f, optionally recording non-finite values (found-inf), for loss scaling and
// gradient clipping. f = p.mul * (INVERT ? 1 / s[0] : s[0]).
// Bindings: x (rw f32), s (read f32, element 0 = a scale on the GPU, e.g. the loss-scale state or a clip
//   coefficient; a private 1.0 when the factor is host-known), found (rw u32 flag; set to 1 where x[i] is inf
//   or NaN before scaling, a benign race of equal stores; a private dummy when CHECK is false).
// Params: n, row (threads per grid row), mul. Constants: INVERT, CHECK. Workgroup: 256 threads, 4 elements each
// (grid of ceil(n / 1024) workgroups).

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  // thread t of the grid handles elements b, b+256, b+512, b+768 (b = (t/256)*1024 + t%256): coalesced, with
  // four loads in flight per thread before any store
  let t = gid.x + gid.y * p.row;
  let b = (t >> 8u) * 1024u + (t & 255u);
  if (b >= p.n) { return; }
  let s0 = s[0];
  let f = p.mul * select(s0, 1.0 / s0, INVERT);
  var v: array<f32, 4>;
  for (var k = 0u; k < 4u; k++) {
    let i = b + 256u * k;
    if (i < p.n) { v[k] = x[i]; }
  }
  for (var k = 0u; k < 4u; k++) {
    let i = b + 256u * k;
    if (i < p.n) {
      if (CHECK && (bitcast<u32>(v[k]) & 0x7f800000u) == 0x7f800000u) { found[0] = 1u; }
      x[i] = v[k] * f;
    }
  }
}
