// embedding backward, steps 2 and 3 (after embedding-sort.wgsl): dw[v, :] = sum of dy[n, :] over the
// positions n with ids[n] == v, in increasing n (deterministic); rows of ids that never occur are written 0.
//   offsets: offs[v] = lower_bound(keys[0..n), v) for v in [0, vocab] (binary search, one thread each)
//   accum:   one workgroup per vocabulary row v: sums dy rows vals[offs[v]], ..., vals[offs[v+1] - 1]
// Cost: sort O(N log^2 N), offsets O(vocab log N), accum reads dy once (N*D) and writes dw once (vocab*D).
// Tensors larger than one storage binding are bound in row chunks: accum runs once per (dw chunk of rows
// [v0, v0 + vrows), dy chunk of positions [n0, n0 + nrows)), dy chunks in increasing order; a later dy chunk
// (acc = 1) adds to the dw rows written so far, so every sum is still taken in increasing n (the same
// result as one pass).
// Bindings: keys [P] (read u32, sorted), vals [P] (read u32), dy [nrows, D] (read, float: positions n0..),
//   offs [vocab + 1] (rw u32), dw [vrows, D] (rw f32: rows v0..).
// Params: n, vocab, D, v0, vrows, n0, nrows, acc (1: add to dw instead of writing it).
// Prepended: const WG, NV (units per thread in registers; 0 = loop over D in chunks of WG), NC, VEC, alias V,
//   ld_dy, ld_dw, st_dw.

@compute @workgroup_size(WG)
fn offsets(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
           @builtin(local_invocation_index) t: u32) {
  let v = (wid.x + wid.y * nwg.x) * WG + t;
  if (v > p.vocab) { return; }
  var lo = 0u;
  var hi = p.n;
  while (lo < hi) {
    let mid = (lo + hi) >> 1u;
    if (keys[mid] < v) { lo = mid + 1u; } else { hi = mid; }
  }
  offs[v] = lo;
}

@compute @workgroup_size(WG)
fn accum(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
         @builtin(local_invocation_index) t: u32) {
  let vl = wid.x + wid.y * nwg.x;
  if (vl >= p.vrows) { return; }
  let v = p.v0 + vl;
  let s = offs[v];
  let e = offs[v + 1u];
  let du = p.D / VEC;
  let out = vl * p.D;
  if (NV > 0u) {
    var acc: array<V, NC>;
    for (var i = 0u; i < NC; i++) {
      acc[i] = V(0.0);
      let u = t + i * WG;
      if (p.acc == 1u && u < du) { acc[i] = ld_dw(out + u * VEC); }
    }
    for (var q = s; q < e; q++) {
      let r = vals[q] - p.n0; // wraps for positions below the chunk
      if (r >= p.nrows) { continue; }
      let src = r * p.D;
      for (var i = 0u; i < NC; i++) {
        let u = t + i * WG;
        if (u < du) { acc[i] += ld_dy(src + u * VEC); }
      }
    }
    for (var i = 0u; i < NC; i++) {
      let u = t + i * WG;
      if (u < du) { st_dw(out + u * VEC, acc[i]); }
    }
  } else {
    for (var u = t; u < du; u += WG) {
      var a = V(0.0);
      if (p.acc == 1u) { a = ld_dw(out + u * VEC); }
      for (var q = s; q < e; q++) {
        let r = vals[q] - p.n0;
        if (r < p.nrows) { a += ld_dy(r * p.D + u * VEC); }
      }
      st_dw(out + u * VEC, a);
    }
  }
}
