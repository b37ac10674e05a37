// matmul-ref (variant v0, the plain reference): one thread per output, C[b, m, n] = alpha * sum_k op(A)[m, k]
// op(B)[k, n] (+ bias[n]) (+ C[b, m, n] when accumulating), summed in K order in f32.
// Bindings: a, b (read, f32/f16/bf16 via read_a/read_b), bias (read, [N]; A again when HAS_BIAS is false),
//   c (rw f32, [batch, M, N]). Layouts as in matmul.wgsl (TRANS_A: A is [K, M]; TRANS_B: B is [N, K]).
// Params: M, N, K, sa, sb (batch strides in elements, 0 broadcasts), alpha, one, lda, ldb (row strides of a and
//   b as stored, as in matmul.wgsl).
// Overrides: TRANS_A, TRANS_B, HAS_BIAS, ACCUM. Grid: x = ceil(N / 16), y = ceil(M / 16), z = batch.
// Workgroup: 16 x 16.
override TRANS_A: bool = false;
override TRANS_B: bool = false;
override HAS_BIAS: bool = false;
override ACCUM: bool = false;

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let n = g.x;
  let m = g.y;
  if (m >= p.M || n >= p.N) { return; }
  let ba = g.z * p.sa;
  let bb = g.z * p.sb;
  var s = 0.0;
  for (var k = 0u; k < p.K; k++) {
    let x = read_a(ba + select(m * p.lda + k, k * p.lda + m, TRANS_A));
    let w = read_b(bb + select(k * p.ldb + n, n * p.ldb + k, TRANS_B));
    s = fma(x, w, s);
  }
  s *= p.alpha;
  if (HAS_BIAS) { s += read_bias(n); }
  let ci = g.z * p.M * p.N + m * p.N + n;
  if (ACCUM) { s += c[ci]; }
  c[ci] = s;
}
