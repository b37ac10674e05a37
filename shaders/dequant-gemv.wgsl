// dequant-gemv: the decode shape of the fused dequantize + matmul, Y [M, N] = X [M, K] W^T (+ bias) for M <= 16
//   rows, bandwidth-bound: each packed word of W is read once from memory and used for all M rows.
// Bindings: x (read: f32, f16 or bf16, [M, K]), q (read u32 [N, wpr]), s (read f32 or f16 [N, nb]: first-level
//   scales), bias (read [N], any float; x again when HAS_BIAS is false), y (rw f32 [M, N]).
// Params: M (1..16), N, K, G, nb, wpr, gx (workgroups per grid row), one (a uniform 1, see DYN).
// Prepended by the wrapper: MR, the number of rows (= M) as a constant, so that the partial sums live in
//   registers and the reduction covers MR rows only (one pipeline per row count).
// Overrides: FMT (quant-common), HAS_BIAS, DYN (software adapters: loop bounds times p.one keep loops rolled;
//   unrolled, this kernel costs lavapipe's compiler tens of seconds), and entry point main_vec (16-byte loads, where x is
//   f32 with K a multiple of 4, rows unpadded (K == Kp) and wpr a multiple of 4: q and x are re-declared below as
//   q4 / x4 on their binding numbers, and a thread takes 4 words (16 int8 or 32 4-bit codes, one block) at a time).
// Workgroup: 64 threads per output column n (workgroup id x + y * gx); thread t takes words t, t + 64, ... of
//   row n, dequantizes each once and accumulates it into M partial sums, then a tree reduction in workgroup memory.
override HAS_BIAS: bool = false;
override DYN: bool = false;

@group(0) @binding(1) var<storage, read> x4: array<vec4f>;
@group(0) @binding(2) var<storage, read> q4: array<vec4u>;

fn dn(x: u32) -> u32 { return select(x, x * p.one, DYN); }

const WG: u32 = 64u;

var<workgroup> red: array<f32, MR * WG>; // [MR][WG]
var<workgroup> lut: array<f32, 16>;

fn nf4_value(u: u32) -> f32 { return lut[u]; }

// the four int8 values of word w (elements 0..3)
fn word_vals8(w: u32) -> vec4f { return vec4f(vec4i(bitcast<vec4i>(vec4u(w) << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u))); }

// four 4-bit values of word w: elements 0..3 (base 0) or 4..7 (base 16); element 2j in the high nibble of byte j
fn word_vals4(w: u32, base: u32) -> vec4f {
  let u = (vec4u(w) >> (vec4u(4u, 0u, 12u, 8u) + base)) & vec4u(15u);
  if (FMT == 1u) { return vec4f(vec4i(u) - vec4i(8)); }
  return vec4f(lut[u.x], lut[u.y], lut[u.z], lut[u.w]);
}

// the M partial sums of this thread -> workgroup tree -> y[m, n] (+ bias)
fn finish(n: u32, li: u32, acc: array<f32, MR>) {
  for (var m = 0u; m < dn(MR); m++) { red[m * WG + li] = acc[m]; }
  workgroupBarrier();
  for (var st = dn(WG / 2u); st > 0u; st >>= 1u) {
    if (li < st) {
      for (var m = 0u; m < dn(MR); m++) { red[m * WG + li] += red[m * WG + li + st]; }
    }
    workgroupBarrier();
  }
  if (n < p.N && li < MR) {
    var v = red[li * WG];
    if (HAS_BIAS) { v += read_bias(n); }
    y[li * p.N + n] = v;
  }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = wg.x + wg.y * p.gx;
  if (li < 16u) { lut[li] = NF4_CODE[li]; }
  workgroupBarrier();
  let epw = q_epw();
  var acc: array<f32, MR>;
  if (n < p.N) {
    for (var kw = li; kw < p.wpr; kw += WG) {
      let word = q[n * p.wpr + kw];
      let sc = read_s(n * p.nb + (kw * epw) / p.G);
      for (var e = 0u; e < dn(epw); e++) {
        let k = kw * epw + e;
        if (k < p.K) {
          let v = q_value(word, e) * sc;
          for (var m = 0u; m < dn(MR); m++) { acc[m] = fma(v, read_x(m * p.K + k), acc[m]); }
        }
      }
    }
  }
  finish(n, li, acc);
}

// entry point of the VEC case (see the header)
@compute @workgroup_size(64)
fn main_vec(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = wg.x + wg.y * p.gx;
  if (li < 16u) { lut[li] = NF4_CODE[li]; }
  workgroupBarrier();
  let epw = q_epw();
  var acc: array<f32, MR>;
  if (n < p.N) {
    let nv = p.wpr / 4u;
    for (var v = li; v < nv; v += WG) {
      let qv = q4[n * nv + v];
      let k0 = v * 4u * epw;
      let sc = read_s(n * p.nb + k0 / p.G);
      for (var m = 0u; m < dn(MR); m++) {
        let xb = (m * p.K + k0) / 4u;
        var t = 0.0;
        for (var j = 0u; j < dn(4u); j++) {
          if (FMT == 0u) { t += dot(word_vals8(qv[j]), x4[xb + j]); }
          else { t += dot(word_vals4(qv[j], 0u), x4[xb + 2u * j]) + dot(word_vals4(qv[j], 16u), x4[xb + 2u * j + 1u]); }
        }
        acc[m] = fma(sc, t, acc[m]);
      }
    }
  }
  finish(n, li, acc);
}
