// grad-norm: first pass of a deterministic global L2 norm: per-workgroup partial sums of squares of one tensor.
// Bindings: g (read: f32/f16/bf16 via read_g), part (rw f32: partial sums of every tensor, this one's at base..).
// Params: n (elements), base (first partial slot of this tensor), nwg (workgroups of this dispatch, <= 1024).
// Workgroup w sums g[i]^2 for i = w*256 + lid + k*nwg*256 in a fixed order (4 accumulators per thread), then a
// fixed tree over the 256 threads: the result depends only on n and nwg, never on scheduling.
// Workgroup: 256 threads, 1-D grid of nwg.
var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let stride = p.nwg * 256u;
  var i = wid.x * 256u + lid;
  var a0 = 0.0;
  var a1 = 0.0;
  var a2 = 0.0;
  var a3 = 0.0;
  while (i + 3u * stride < p.n) {
    let x0 = read_g(i);
    let x1 = read_g(i + stride);
    let x2 = read_g(i + 2u * stride);
    let x3 = read_g(i + 3u * stride);
    a0 += x0 * x0;
    a1 += x1 * x1;
    a2 += x2 * x2;
    a3 += x3 * x3;
    i += 4u * stride;
  }
  while (i < p.n) {
    let x = read_g(i);
    a0 += x * x;
    i += stride;
  }
  red[lid] = (a0 + a1) + (a2 + a3);
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) { part[p.base + wid.x] = red[0]; }
}
