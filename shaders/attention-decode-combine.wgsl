// attention-decode-combine: merge the split-K partials of attention-decode (fixed chunk order):
//   M = max_c m_c,  l = sum_c l_c 2^(m_c - M),  o = sum_c acc_c 2^(m_c - M) / l   (o = 0 when l = 0)
// Bindings: part read f32 [B * Hq, nChunks, W] (W = DV * 4 + 2: acc, max, sum); o rw f32 [B, Hq, D].
// Params: nChunks, W, D, Hq.
// Workgroup: 64 threads, one workgroup per (b, h): grid (Hq, B); thread i handles elements i, i + 64, ...
const NEG: f32 = -1.0e30;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let bh = wid.y * p.Hq + wid.x;
  let base = bh * p.nChunks * p.W;
  let off = p.W - 2u;
  var mx = NEG;
  for (var c = 0u; c < p.nChunks; c++) { mx = max(mx, read_part(base + c * p.W + off)); }
  let ms = select(mx, 0.0, mx == NEG);
  var l = 0.0;
  for (var c = 0u; c < p.nChunks; c++) {
    l += read_part(base + c * p.W + off + 1u) * exp2(read_part(base + c * p.W + off) - ms);
  }
  let inv = select(1.0 / l, 0.0, l == 0.0);
  for (var d = tid; d < p.D; d += 64u) {
    var y = 0.0;
    for (var c = 0u; c < p.nChunks; c++) {
      y = fma(read_part(base + c * p.W + d), exp2(read_part(base + c * p.W + off) - ms), y);
    }
    o[bh * p.D + d] = y * inv;
  }
}
