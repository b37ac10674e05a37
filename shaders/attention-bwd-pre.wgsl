// attention-bwd-pre: the FlashAttention-2 backward's row term  delta[b, h, t] = sum_d dO[b,t,h,d] * O[b,t,h,d].
// Bindings: dout read f32|f16|bf16 [B, T, Hq, D]; out read f32|f16|bf16 [B, T, Hq, D];
//           delta rw f32 [B, Hq, T].
// Params: rows (= B * T * Hq), T, Hq, D, row (threads per grid row of a 2-D grid, see grid1d).
// Workgroup: 256 threads = 16 rows x 16 lanes; lane l sums elements l, l + 16, ... of its row, then the 16
// partial sums are added in a fixed order (deterministic).
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u, @builtin(local_invocation_index) tid: u32) {
  let gidx = g.x + g.y * p.row;
  let r = gidx / 16u;
  let lane = tid % 16u;
  var s = 0.0;
  if (r < p.rows) {
    let base = r * p.D;
    for (var d = lane; d < p.D; d += 16u) { s = fma(read_dout(base + d), read_out(base + d), s); }
  }
  part[tid] = s;
  workgroupBarrier();
  if (lane == 0u && r < p.rows) {
    var t = 0.0;
    for (var i = 0u; i < 16u; i++) { t += part[tid + i]; }
    // r = (b * T + t) * Hq + h  ->  delta index (b * Hq + h) * T + t
    let h = r % p.Hq;
    let bt = r / p.Hq;
    let tt = bt % p.T;
    let b = bt / p.T;
    delta[(b * p.Hq + h) * p.T + tt] = t;
  }
}
