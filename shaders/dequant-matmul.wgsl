// dequant-matmul: fused dequantize + matmul against a quantized weight W [N, K] (quant-common.wgsl), f32 math.
//   Forward (BWD false): Y [M, N] = X [M, K] W^T (+ bias): the Linear y = x W^T + b.
//   Backward (BWD true): dX [M, K] = dY [M, N] W: the gradient with respect to the input (W is frozen).
//   In both, C [M, P] = A [M, R] B [R, P] with A = x (R = K) or dY (R = N) and B read from W's tiles.
// Bindings: x (read: f32, f16 or bf16, [M, R]), q (read u32 [N, wpr]), s (read f32 or f16 [N, nb]: first-level
//   scales, double quantization already decoded), bias (read, [N], any float; x again when HAS_BIAS is false),
//   y (rw f32 [M, P]).
// Params: M, N, K, G (elements per block), nb (blocks per row), wpr (words per row), one (a uniform 1: loop
//   bounds on software adapters, see DYN).
// Overrides: FMT (quant-common), BWD, HAS_BIAS (forward only), DYN (software adapters: keep loops rolled).
// Tile: BM x BP = 64 x 64 outputs per workgroup, 16 x 16 threads with 4 x 4 outputs each; R walked in slices of
//   BR = 16. Per slice the A tile is staged in workgroup memory as f32 and W's words covering the slice are
//   dequantized into workgroup memory (forward: 64 rows n x 16 k; backward: 16 rows n x 64 k), so each packed
//   word is read once per workgroup. Out-of-range elements load as 0 (W rows are zero-padded to Kp).
// Grid: x = ceil(P / 64), y = ceil(M / 64).
override BWD: bool = false;
override HAS_BIAS: bool = false;
override DYN: bool = false;

const BM: u32 = 64u;
const BP: u32 = 64u;
const BR: u32 = 16u;

var<workgroup> As: array<f32, 1024>; // [BR][BM]
var<workgroup> Bs: array<f32, 1024>; // [BR][BP]
var<workgroup> lut: array<f32, 16>;

fn nf4_value(u: u32) -> f32 { return lut[u]; }
fn dn(x: u32) -> u32 { return select(x, x * p.one, DYN); }

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let R = select(p.K, p.N, BWD);
  let P = select(p.N, p.K, BWD);
  let m0 = wg.y * BM;
  let p0 = wg.x * BP;
  if (li < 16u) { lut[li] = NF4_CODE[li]; }
  let epw = q_epw();
  let wrows = select(BP, BR, BWD);          // W rows per tile
  let wcols = select(BR, BP, BWD) / epw;    // words per W tile row
  var acc: array<f32, 16>;
  for (var r0 = 0u; r0 < R; r0 += BR) {
    for (var t = 0u; t < dn(4u); t++) {
      let e = li + t * 256u;
      let m = e / BR;
      let r = e % BR;
      var v = 0.0;
      if (m0 + m < p.M && r0 + r < R) { v = read_x((m0 + m) * R + r0 + r); }
      As[r * BM + m] = v;
    }
    let n0 = select(p0, r0, BWD);
    let kw0 = select(r0, p0, BWD) / epw;
    workgroupBarrier(); // lut ready (first slice); previous slice's reads of Bs done
    for (var t = li; t < wrows * wcols; t += 256u) {
      let wr = t / wcols;
      let wc = t % wcols;
      let n = n0 + wr;
      let kw = kw0 + wc;
      var word = 0u;
      var sc = 0.0;
      if (n < p.N && kw < p.wpr) {
        word = q[n * p.wpr + kw];
        sc = read_s(n * p.nb + (kw * epw) / p.G);
      }
      for (var e = 0u; e < dn(epw); e++) {
        let v = q_value(word, e) * sc;
        let kk = wc * epw + e;
        if (BWD) { Bs[wr * BP + kk] = v; } else { Bs[kk * BP + wr] = v; }
      }
    }
    workgroupBarrier();
    for (var r = 0u; r < dn(BR); r++) {
      let a = vec4f(As[r * BM + lid.y * 4u], As[r * BM + lid.y * 4u + 1u], As[r * BM + lid.y * 4u + 2u], As[r * BM + lid.y * 4u + 3u]);
      let b = vec4f(Bs[r * BP + lid.x * 4u], Bs[r * BP + lid.x * 4u + 1u], Bs[r * BP + lid.x * 4u + 2u], Bs[r * BP + lid.x * 4u + 3u]);
      for (var i = 0u; i < dn(4u); i++) {
        for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] = fma(a[i], b[j], acc[i * 4u + j]); }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let c = p0 + lid.x * 4u + j;
      if (m < p.M && c < P) {
        var v = acc[i * 4u + j];
        if (HAS_BIAS && !BWD) { v += read_bias(c); }
        y[m * P + c] = v;
      }
    }
  }
}
