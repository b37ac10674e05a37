// matmul-f16x3-absmax: the first operand pass of an f32 matmul on f16 tensor cores at "high" precision
// (ops/core/matmul-f16x3.ts, which says why): sc[slot] = max over i of the bits of |x[i]|. Non-negative floats
// order as their bits, so that is the bits of max |x| (a NaN's bits exceed +inf's: a NaN wins). Each workgroup
// reduces its grid-stride share in workgroup memory and does one atomicMax; sc[slot] must be 0 before.
// Bindings: x read f32 [n]; sc rw atomic u32 (see matmul-f16x3-split.wgsl for the slots).
// Params: n, row (threads per grid row of the 2-D grid, see grid1d), slot.
// Workgroup: 256 threads.
var<workgroup> part: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u, @builtin(local_invocation_index) tid: u32, @builtin(num_workgroups) nwg: vec3u) {
  var m = 0u;
  let stride = nwg.x * nwg.y * 256u;
  for (var i = g.x + g.y * p.row; i < p.n; i += stride) { m = max(m, bitcast<u32>(abs(read_x(i)))); }
  part[tid] = m;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (tid < h) { part[tid] = max(part[tid], part[tid + h]); }
    workgroupBarrier();
  }
  if (tid == 0u && part[0] != 0u) { atomicMax(&sc[p.slot], part[0]); }
}
