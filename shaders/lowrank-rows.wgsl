// lowrank-rows: C[t, j] = alpha * sum_k X[t, k] * W(j, k) (+ C[t, j] when acc == 1), for a small R (the LoRA
// products x A^T and dY B: [tokens, K] times a rank-R factor). Bandwidth-bound on X, which is read once.
// Bindings: x (read, [T, K], any float dtype via read_x), w (read, any float dtype: wt == 0 stores W as [R, K]
// (element j * K + k, LoRA's A), wt == 1 as [K, R] (element k * R + j, LoRA's B)), c (rw f32, [T, R]).
// Params: T, K, wt, acc, row (workgroups per grid row), alpha. Constant R (prepended by the wrapper: `const R`).
// Workgroup 256 = 8 rows x 32 lanes: lane l of a row sums k = l, l + 32, ... into R accumulators (coalesced reads of
// the row), then the 32 lanes meet in a tree in workgroup memory, one j at a time. Deterministic, no atomics.
const ROWS: u32 = 8u;
const LANES: u32 = 32u;

var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let rloc = lid / LANES;
  let lane = lid % LANES;
  let t = (wg.x + wg.y * p.row) * ROWS + rloc;
  let live = t < p.T;
  var acc: array<f32, R>;
  for (var j = 0u; j < R; j++) { acc[j] = 0.0; }
  if (live) {
    let base = t * p.K;
    for (var k = lane; k < p.K; k += LANES) {
      let xv = read_x(base + k);
      if (p.wt == 0u) {
        for (var j = 0u; j < R; j++) { acc[j] += xv * read_w(j * p.K + k); }
      } else {
        for (var j = 0u; j < R; j++) { acc[j] += xv * read_w(k * R + j); }
      }
    }
  }
  for (var j = 0u; j < R; j++) {
    part[lid] = acc[j];
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s / 2u) {
      if (lane < s) { part[lid] += part[lid + s]; }
      workgroupBarrier();
    }
    if (live && lane == 0u) {
      let v = p.alpha * part[lid];
      let o = t * R + j;
      c[o] = select(v, c[o] + v, p.acc == 1u);
    }
    workgroupBarrier();
  }
}
