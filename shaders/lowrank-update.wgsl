// lowrank-update: Y[t, n] += alpha * sum_j U[t, j] * W(n, j) for a small rank R: LoRA's update added into the
// base product (forward: y += s u B^T; backward: dx += s v A). Bandwidth-bound on Y (one read and one write of
// each element, coalesced along n); a matmul with K = R runs it on tiles meant for long K.
// Bindings: y (rw f32, [T, N]), u (read, [T, R], any float dtype), w (read, any float dtype: wt == 0 stores W as
// [N, R] (element n * R + j, LoRA's B), wt == 1 as [R, N] (element j * N + n, LoRA's A)).
// Params: T, N, wt, nb (256-column blocks), row (workgroups per grid row), alpha.
// Constants R, RV = ceil(R / 4) (`consts`). Workgroup 256: thread i owns column n = block * 256 + i, holds W(n, :)
// in registers, and updates TR rows whose U rows are staged in workgroup memory; four rows' Y loads in flight.
const TR: u32 = 32u;

var<workgroup> us: array<vec4f, TR * RV>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let nb = wid % p.nb;
  let t0 = (wid / p.nb) * TR;
  let n = nb * 256u + lid;
  for (var e = lid; e < TR * RV * 4u; e += 256u) {
    let rr = e / (RV * 4u);
    let j = e % (RV * 4u);
    var v = 0.0;
    if (t0 + rr < p.T && j < R) { v = read_u((t0 + rr) * R + j); }
    us[rr * RV + j / 4u][j % 4u] = v;
  }
  var wv: array<vec4f, RV>;
  for (var v = 0u; v < RV; v++) {
    for (var i = 0u; i < 4u; i++) {
      let j = 4u * v + i;
      var x = 0.0;
      if (n < p.N && j < R) {
        if (p.wt == 0u) { x = read_w(n * R + j); } else { x = read_w(j * p.N + n); }
      }
      wv[v][i] = x;
    }
  }
  workgroupBarrier();
  if (n >= p.N) { return; }
  let t1 = min(t0 + TR, p.T);
  var t = t0;
  for (; t + 4u <= t1; t += 4u) {
    let o = t * p.N + n;
    let y0 = y[o];
    let y1 = y[o + p.N];
    let y2 = y[o + 2u * p.N];
    let y3 = y[o + 3u * p.N];
    var d = vec4f(0.0);
    let rr = t - t0;
    for (var v = 0u; v < RV; v++) {
      d += vec4f(dot(us[rr * RV + v], wv[v]), dot(us[(rr + 1u) * RV + v], wv[v]), dot(us[(rr + 2u) * RV + v], wv[v]), dot(us[(rr + 3u) * RV + v], wv[v]));
    }
    y[o] = y0 + p.alpha * d.x;
    y[o + p.N] = y1 + p.alpha * d.y;
    y[o + 2u * p.N] = y2 + p.alpha * d.z;
    y[o + 3u * p.N] = y3 + p.alpha * d.w;
  }
  for (; t < t1; t++) {
    var d = 0.0;
    for (var v = 0u; v < RV; v++) { d += dot(us[(t - t0) * RV + v], wv[v]); }
    y[t * p.N + n] += p.alpha * d;
  }
}
