// dequant-weight: W [N, K] = value(code) * scale from a packed quantized matrix (quant-common.wgsl).
// Bindings: q (read u32 [N, wpr]), s (read f32 or f16 [N, nb]: first-level scales, double quantization already
//   decoded), y (rw: f32 [N, K], or u32 words of f16 pairs when OUT_F16).
// Params: N, K, G, nb, wpr, total (output words), row (threads per grid row).
// Override OUT_F16: write f16 (round to nearest even, two elements per word, element 2t in the low half).
// Workgroup: 256 threads, one per output word.
override OUT_F16: bool = false;
fn nf4_value(u: u32) -> f32 { return NF4_CODE[u]; }

fn deq(i: u32) -> f32 {
  let n = i / p.K;
  let k = i % p.K;
  let epw = q_epw();
  return q_value(q[n * p.wpr + k / epw], k % epw) * read_s(n * p.nb + k / p.G);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = g.x + g.y * p.row;
  if (t >= p.total) { return; }
  if (OUT_F16) {
    let n = p.N * p.K;
    let lo = f32_to_f16_bits(deq(2u * t));
    var hi = 0u;
    if (2u * t + 1u < n) { hi = f32_to_f16_bits(deq(2u * t + 1u)); }
    y[t] = bitcast<f32>(lo | (hi << 16u));
  } else {
    y[t] = deq(t);
  }
}
