// quant-i8-matmul: Y [M, N] = (A B^T) * sa[m] * sb[n] (+ bias[n]) for int8 matrices A [M, K] (activations
//   quantized per row, quant-rows-i8.wgsl) and B [N, K] (an int8 weight with one scale per output row), the
//   portable path of the int8 x int8 product: exact i32 sums of dot4I8Packed (four products per word), converted
//   to f32 once, then the two scales.
// Bindings: a (read u32 [M, wpr]: four int8 per word, element k in byte k % 4), b (read u32 [N, wpr]), sa (read
//   f32 [M]), sb (read f32 [N]), bias (read [N] any float; sa again when HAS_BIAS is false), y (rw f32 [M, N]).
// Params: M, N, wpr (u32 words per row of A and B: ceil(K / 4), padding bytes 0).
// Override: HAS_BIAS.
// Workgroup: 16 x 16 threads, a 64 x 64 tile of Y; thread (tx, ty) owns rows ty + 16 i and columns tx + 16 j
//   (i, j < 4), reading one word of 4 rows of A and 4 rows of B per step (rows past M / N read row 0 and are
//   not written). Grid: x = ceil(N / 64), y = ceil(M / 64).
override HAS_BIAS: bool = false;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let m0 = wg.y * 64u + lid.y;
  let n0 = wg.x * 64u + lid.x;
  var ra: array<u32, 4>;
  var rb: array<u32, 4>;
  for (var i = 0u; i < 4u; i++) {
    ra[i] = select(0u, (m0 + 16u * i) * p.wpr, m0 + 16u * i < p.M);
    rb[i] = select(0u, (n0 + 16u * i) * p.wpr, n0 + 16u * i < p.N);
  }
  var acc: array<i32, 16>;
  for (var w = 0u; w < p.wpr; w++) {
    var av: array<u32, 4>;
    var bv: array<u32, 4>;
    for (var i = 0u; i < 4u; i++) {
      av[i] = a[ra[i] + w];
      bv[i] = b[rb[i] + w];
    }
    for (var i = 0u; i < 4u; i++) {
      for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] += dot4I8Packed(av[i], bv[j]); }
    }
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + 16u * i;
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + 16u * j;
      if (m < p.M && n < p.N) {
        var v = f32(acc[i * 4u + j]) * sa[m] * sb[n];
        if (HAS_BIAS) { v += read_bias(n); }
        y[m * p.N + n] = v;
      }
    }
  }
}
