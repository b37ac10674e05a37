// dequant-gemv: the decode shape of the fused dequantize + matmul, Y [M, N] = X [M, K] W^T (+ bias) for M <= 16
//   rows, bandwidth-bound: each packed word of W is read once from memory and used for all M rows.
// Bindings: x (read: f32, f16 or bf16, [M, K]), q (read u32 [N, wpr]), s (read f32 or f16 [N, nb]: first-level
//   scales), bias (read [N], any float; x again when HAS_BIAS is false), y (rw f32 [M, N]).
// Params: M (1..16), N, K, G, nb, wpr, gx (workgroups per grid row), one (a uniform 1, see DYN).
// Overrides: FMT (quant-common), HAS_BIAS, DYN (software adapters: loop bounds times p.one keep loops rolled;
//   unrolled, this kernel costs lavapipe's compiler tens of seconds).
// Workgroup: 64 threads per output column n (workgroup id x + y * gx); thread t takes words t, t + 64, ... of
//   row n, dequantizes each once and accumulates it into M partial sums, then a tree reduction in workgroup memory.
override HAS_BIAS: bool = false;
override DYN: bool = false;

fn dn(x: u32) -> u32 { return select(x, x * p.one, DYN); }

const WG: u32 = 64u;
const MAXM: u32 = 16u;

var<workgroup> red: array<f32, 1024>; // [MAXM][WG]
var<workgroup> lut: array<f32, 16>;

fn nf4_value(u: u32) -> f32 { return lut[u]; }

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = wg.x + wg.y * p.gx;
  if (li < 16u) { lut[li] = NF4_CODE[li]; }
  workgroupBarrier();
  let epw = q_epw();
  var acc: array<f32, MAXM>;
  if (n < p.N) {
    for (var kw = li; kw < p.wpr; kw += WG) {
      let word = q[n * p.wpr + kw];
      let sc = read_s(n * p.nb + (kw * epw) / p.G);
      for (var e = 0u; e < dn(epw); e++) {
        let k = kw * epw + e;
        if (k < p.K) {
          let v = q_value(word, e) * sc;
          for (var m = 0u; m < p.M; m++) { acc[m] = fma(v, read_x(m * p.K + k), acc[m]); }
        }
      }
    }
  }
  for (var m = 0u; m < dn(MAXM); m++) { red[m * WG + li] = acc[m]; }
  workgroupBarrier();
  for (var st = dn(WG / 2u); st > 0u; st >>= 1u) {
    if (li < st) {
      for (var m = 0u; m < dn(MAXM); m++) { red[m * WG + li] += red[m * WG + li + st]; }
    }
    workgroupBarrier();
  }
  if (n < p.N && li < p.M) {
    var v = red[li * WG];
    if (HAS_BIAS) { v += read_bias(n); }
    y[li * p.N + n] = v;
  }
}
