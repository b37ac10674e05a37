// loss-scale: in-place x *= f, optionally recording non-finite values (found-inf), for loss scaling and
// gradient clipping. f = p.mul * (INVERT ? 1 / s[0] : s[0]).
// Bindings: x (rw f32), s (read f32, element 0 = a scale on the GPU, e.g. the loss-scale state or a clip
//   coefficient; a private 1.0 when the factor is host-known), found (rw u32 flag; set to 1 where x[i] is inf
//   or NaN before scaling, a benign race of equal stores; a private dummy when CHECK is false), and for the
//   entry point `pieces` table (read u32; a private stand-in for `main`).
// Params: n, row (threads per grid row), mul. Constants: INVERT, CHECK. Workgroup: 256 threads, 4 elements each.
// Entry `main`: all of x, a grid of ceil(n / 1024) workgroups. Entry `pieces`: ranges of x (tensors stored in an
//   arena), one workgroup per table entry (start, length <= 1024) at index wid.x + wid.y * nwg.x < p.n.

// Elements b, b+256, b+512, b+768 of the `len` elements from `start`: four loads in flight before any store.
fn scale4(start: u32, b: u32, len: u32) {
  let s0 = s[0];
  let f = p.mul * select(s0, 1.0 / s0, INVERT);
  var v: array<f32, 4>;
  for (var k = 0u; k < 4u; k++) {
    let i = b + 256u * k;
    if (i < len) { v[k] = x[start + i]; }
  }
  for (var k = 0u; k < 4u; k++) {
    let i = b + 256u * k;
    if (i < len) {
      if (CHECK && (bitcast<u32>(v[k]) & 0x7f800000u) == 0x7f800000u) { found[0] = 1u; }
      x[start + i] = v[k] * f;
    }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  // thread t of the grid handles elements b, b+256, b+512, b+768 (b = (t/256)*1024 + t%256): coalesced
  let t = gid.x + gid.y * p.row;
  let b = (t >> 8u) * 1024u + (t & 255u);
  if (b >= p.n) { return; }
  scale4(0u, b, p.n);
}

@compute @workgroup_size(256)
fn pieces(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
          @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * nwg.x;
  if (c >= p.n) { return; }
  scale4(table[2u * c], lid, table[2u * c + 1u]);
}
