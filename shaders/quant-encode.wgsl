// quant-encode: quantize a float matrix W [N, K] into a packed format (quant-common.wgsl), one thread per block.
// Bindings: w (read: f32, f16 or bf16, [N, K]), q (rw u32 [N, wpr]: codes, padded rows), s (rw f32 [N, nb]:
//   the block scales as f32 values; int4's are already f16-exact and cast to f16 by the wrapper).
// Params: N, K, G (elements per block), nb (blocks per row), wpr (words per row), row (threads per grid row).
// Workgroup: 64 threads; grid from grid1d over N * nb threads.
// Thread i = n * nb + b: absmax over the block's elements (k < K), scale, then the block's G / epw words; padding
// elements (k >= K) encode 0. A zero block gets scale 0 and the code of 0.
fn nf4_value(u: u32) -> f32 { return NF4_CODE[u]; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.N * p.nb) { return; }
  let n = i / p.nb;
  let k0 = (i % p.nb) * p.G;
  let k1 = min(p.K, k0 + p.G);
  var amax = 0.0;
  for (var k = k0; k < k1; k++) { amax = max(amax, abs(read_w(n * p.K + k))); }
  let sc = q_scale(amax);
  s[i] = sc;
  let epw = q_epw();
  let nw = p.G / epw;
  let w0 = n * p.wpr + k0 / epw;
  for (var j = 0u; j < nw; j++) {
    var word = 0u;
    for (var e = 0u; e < epw; e++) {
      let k = k0 + j * epw + e;
      var x = 0.0;
      if (k < p.K) { x = read_w(n * p.K + k); }
      if (sc > 0.0) { word |= q_encode(x, sc, e); } else { word |= q_encode(0.0, 1.0, e); }
    }
    q[w0 + j] = word;
  }
}
