// read-probe (benchmarks only): the floor of a kernel that only reads a buffer once, for comparing a bandwidth-bound
// kernel (the decode GEMV) with the fastest possible reader of the same bytes. Every thread loads PER vec4s and
// folds them into one word; the word reaches y only when it equals a value no real data folds to in practice,
// so the loads cannot be optimised away and y is (almost) never written.
// Bindings: x (read; re-declared below as array<vec4u> on the same binding number), y (rw u32 [1]).
// Params: n4 (vec4s), row (workgroups per grid row: w = wg.x + wg.y * row), key (the word that is written).
// Constants: PER (vec4s per thread: workgroup w reads vec4s [w * 256 * PER, (w + 1) * 256 * PER), thread l those
//   at l, l + 256, ...: coalesced, PER loads in flight per thread).
// Workgroup: 256 threads.
@group(0) @binding(1) var<storage, read> x4: array<vec4u>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) l: u32) {
  let base = (wg.x + wg.y * p.row) * 256u * PER + l;
  var v = vec4u();
  for (var j = 0u; j < PER; j++) {
    let t = base + 256u * j;
    if (t < p.n4) { v ^= x4[t]; }
  }
  let w = v.x ^ v.y ^ v.z ^ v.w;
  if (w == p.key) { y[0] = w; }
}
