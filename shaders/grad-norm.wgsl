// grad-norm: first pass of a deterministic global L2 norm: per-workgroup partial sums of squares of a tensor.
// Bindings: g (read: f32/f16/bf16 via read_g), part (rw f32: partial sums of every tensor, this one's at base..),
//   and for the entry point `multi` table (read u32; for `main` the wrapper declares a private stand-in).
// Params: n (elements), base (first partial slot of this tensor), nwg (workgroups of this tensor, <= 1024).
// Workgroup w of a tensor sums g[i]^2 for i = w*256 + lid + k*nwg*256 in a fixed order (4 accumulators per
// thread), then a fixed tree over the 256 threads: the result depends only on n and nwg, never on scheduling.
// Entry `main`: one tensor, a 1-D grid of nwg. Entry `multi`: many tensors at element offsets of one arena
//   binding `g`, one workgroup per table entry of 5 words (offset, n, nwg, w, partial slot); p.n = entries, grid
//   index wid.x + wid.y * nwg.x. Each workgroup computes exactly what `main` computes for that tensor.
// Workgroup: 256 threads.
var<workgroup> red: array<f32, 256>;

// The partial sum of workgroup w of the tensor at element `off` (n elements, nwg workgroups); every thread gets it.
fn partial(off: u32, n: u32, nwg: u32, w: u32, lid: u32) -> f32 {
  let stride = nwg * 256u;
  var i = w * 256u + lid;
  var a0 = 0.0;
  var a1 = 0.0;
  var a2 = 0.0;
  var a3 = 0.0;
  while (i + 3u * stride < n) {
    let x0 = read_g(off + i);
    let x1 = read_g(off + i + stride);
    let x2 = read_g(off + i + 2u * stride);
    let x3 = read_g(off + i + 3u * stride);
    a0 += x0 * x0;
    a1 += x1 * x1;
    a2 += x2 * x2;
    a3 += x3 * x3;
    i += 4u * stride;
  }
  while (i < n) {
    let x = read_g(off + i);
    a0 += x * x;
    i += stride;
  }
  red[lid] = (a0 + a1) + (a2 + a3);
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  return red[0];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = partial(0u, p.n, p.nwg, wid.x, lid);
  if (lid == 0u) { part[p.base + wid.x] = r; }
}

@compute @workgroup_size(256)
fn multi(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nw: vec3u,
         @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * nw.x;
  if (c >= p.n) { return; }
  let e = 5u * c;
  let r = partial(table[e], table[e + 1u], table[e + 2u], table[e + 3u], lid);
  if (lid == 0u) { part[table[e + 4u]] = r; }
}
