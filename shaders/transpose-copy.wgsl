// transpose-copy: contiguous copy of 32-bit words, four per thread as one vec4 load and one vec4 store.
// Bindings: x (read), y (rw); both are re-declared below as array<vec4u> on the same binding numbers (the
// generated scalar declarations stay unused). Buffers from the pool are multiples of 256 bytes, so copying
// whole vec4s never leaves the allocations.
// Params: n4 (vec4s), row (workgroups per grid row: w = wg.x + wg.y * row).
// Constants: PER (vec4s per thread: workgroup w copies vec4s [w * 256 * PER, (w + 1) * 256 * PER), thread l
//   those at l, l + 256, ...: coalesced, PER loads in flight per thread).
// Workgroup: 256 threads.
@group(0) @binding(1) var<storage, read> x4: array<vec4u>;
@group(0) @binding(2) var<storage, read_write> y4: array<vec4u>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) l: u32) {
  let base = (wg.x + wg.y * p.row) * 256u * PER + l;
  if (base + 256u * (PER - 1u) < p.n4) {
    var v: array<vec4u, 8>;  // PER <= 8
    for (var j = 0u; j < PER; j++) { v[j] = x4[base + 256u * j]; }
    for (var j = 0u; j < PER; j++) { y4[base + 256u * j] = v[j]; }
    return;
  }
  for (var j = 0u; j < PER; j++) {
    let t = base + 256u * j;
    if (t < p.n4) { y4[t] = x4[t]; }
  }
}
