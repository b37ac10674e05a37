// dequant-matmul-tc: Y [M, N] = X [M, K] W^T (+ bias) for a quantized W [N, K] (int8 / int4 / NF4 codes with
//   block scales, layouts in packages/backend/src/ops/quant/formats.ts), for few rows of X (prefill of short
//   prompts, batched decoding): W's tiles are dequantized once into workgroup memory as f16 and multiplied with
//   every row tile of X on f16 x f16 -> f32 subgroup matrices (`chromium_experimental_subgroup_matrix`).
// Bindings: x (read f32, f16 or bf16 [M, K]; where K % 4 == 0 re-declared as x4: array<vec4f> for f32 or x2:
//   array<vec2u> for 16-bit floats), q (read u32 [N, wpr]; re-declared as q4: array<vec4u> where wpr % 4 == 0),
//   s (read f32 or f16 [N, nb] block scales; with double quantization u8 codes, decoded by scale_at), bias (read
//   [N], any float; x again when HAS_BIAS is false), y (rw f32 [M, N]); with double quantization absmax2 and
//   offset after y.
// Params: M, N, K, G (elements per block), nb (blocks per row), wpr (u32 words per row), kc (elements of K per
//   split: a multiple of BK).
// Prepended by the wrapper (ops/quant/qmatmul-tc.ts), all WGSL consts: FMT (0 int8, 1 int4, 2 NF4), EPW (codes
//   per word), SM x SN x SK (the adapter's f16 fragment), SG (subgroup size), NSG subgroups, MT row fragments
//   (BM = MT * SM rows of X per workgroup), NSN subgroups along N each owning FNS column fragments (BN = NSN *
//   FNS * SN), KG = NSG / NSN groups of subgroups splitting each K step, BK (K per step), PAD (f16 elements
//   after each staged row), PROBE, HAS_BIAS, RANGE (X may hold values beyond f16's range: f32 or bf16); the
//   functions ld_x(m, k) -> vec4f (4 elements of X, 0 past M or K), ld_w(n, w) -> vec4u (4 words of W's row n) and scale_at(i); the code book constants. The wrapper puts the
//   entry point at the entry marker (last line): with subgroup matrices (the aliases Lm / Rm / Acc, unrolled fragment loads and
//   multiply-accumulates, the partial sums Cs), or the portable reference (no subgroup matrices: each thread sums
//   its outputs from the same staged tiles).
// Grid: x = ceil(N / BN), y = ceil(M / BM), z = S splits of K (split z sums K from z * kc to (z + 1) * kc and
//   writes its partial product into y[z] ([S, M, N]; the wrapper sums the splits in order; bias in split 0).
//   Workgroup: NSG * SG threads.
// Scheme: per K step the [BN, BK] slice of W is dequantized (codes times block scale, rounded once to f16; int4
//   in pairs of f16 lanes: a nibble OR-ed into the mantissa of 1024.0 minus 1032.0 is u - 8 exactly) and the
//   [BM, BK] slice of X converted to f16, both into workgroup memory rows of BK + PAD halves; the next step's
//   words, scales and X are loaded into registers while the subgroups multiply this one (two barriers a step).
//   Subgroup g takes column fragments (g % NSN) * FNS .. + FNS - 1 and the SK-slices k of the step with
//   (k / SK) % KG == g / NSN; its accumulators go through workgroup memory, where the KG partial sums of each
//   output are added in a fixed order (deterministic), the bias added and Y written.
// X's range (RANGE; the entry point's two passes): where a result of the first pass is not finite, the workgroup
//   scans its rows of X (scan_x), runs the K loop again with each row times a power of two 2^-E_m that brings its
//   largest finite element below 2^15, and writes its results again times 2^E_m.
// PROBE (benchmarks only; 0 otherwise, wrong results else): 1 stages no X, 2 stores W's raw words instead of
//   decoding them, 3 skips the multiply-accumulates (what each part of a step costs).
const WG: u32 = NSG * SG;
const BM: u32 = MT * SM;
const BN: u32 = NSN * FNS * SN;
const ST: u32 = BK + PAD;               // staged row stride in halves
const EPU: u32 = 4u * EPW;              // elements per 16-byte unit of W
const W_UNITS: u32 = BN * BK / EPU;
const X_UNITS: u32 = BM * BK / 4u;
const PW: u32 = (W_UNITS + WG - 1u) / WG;
const PX: u32 = (X_UNITS + WG - 1u) / WG;

var<workgroup> Xs: array<f16, BM * ST>;
var<workgroup> Ws: array<f16, BN * ST>;
var<workgroup> lut: array<f32, 16>;
var<private> rw: array<vec4u, PW>;
var<private> rs: array<f32, PW>;
var<private> rx: array<vec4f, PX>;
// X's range (RANGE: f32 or bf16 X; the wrapper's xRange says how it is kept): the exponent E_m each row of X is
// scaled by in the second pass, then the flag the first pass sets for a result that is not finite (BM + 4 words
// keep the workgroup variables after them 16-byte aligned, as subgroup matrix stores and loads of the partial
// sums need)
var<workgroup> xrows: array<atomic<u32>, BM + 4u>;

// the exponent a row with these four X elements needs scaled off, so that its largest finite element falls below
// 2^15 (0 where they are below it): |x| < 2^(e - 126) for biased exponent e, and x 2^-(e - 141) < 2^15
fn x_need(v: vec4f) -> u32 {
  let b = bitcast<vec4u>(abs(v));
  let f = select(vec4u(0u), b, b < vec4u(0x7F800000u));
  let e = max(max(f.x, f.y), max(f.z, f.w)) >> 23u;
  return select(0u, e - 141u, e > 141u);
}

// the second pass's exponents: a scan of the workgroup's rows of X over K from k0 to k1
fn scan_x(m0: u32, k0: u32, k1: u32, lid: u32) {
  let n4 = (k1 - k0 + 3u) / 4u;
  for (var r = 0u; r < min(BM, p.M - m0); r++) {
    for (var c = lid; c < n4; c += WG) { atomicMax(&xrows[r], x_need(ld_x(m0 + r, k0 + c * 4u))); }
  }
}

// the next step's W words and scales and X elements, into registers
fn fetch(m0: u32, n0: u32, k0: u32, lid: u32) {
  for (var l = 0u; l < PW; l++) {
    let u = l * WG + lid;
    let n = n0 + u / (BK / EPU);
    let w = k0 / EPW + (u % (BK / EPU)) * 4u;
    let ok = u < W_UNITS && n < p.N && w < p.wpr;
    rw[l] = select(vec4u(0u), ld_w(n, w), ok);
    rs[l] = select(0.0, scale_at(n * p.nb + (w * EPW) / p.G), ok);
  }
  for (var l = 0u; l < PX * u32(PROBE != 1u); l++) {
    let u = l * WG + lid;
    rx[l] = select(vec4f(0.0), ld_x(m0 + u / (BK / 4u), k0 + (u % (BK / 4u)) * 4u), u < X_UNITS);
  }
}

// int4: the eight codes of a word times s, as f16 (element 2j is the high nibble of byte j)
fn put_i4(o: u32, w: u32, s: f16) {
  let b = vec2<f16>(1032.0h);
  let sv = vec2<f16>(s);
  let e04 = (bitcast<vec2<f16>>(((w >> 4u) & 0x000F000Fu) | 0x64006400u) - b) * sv;
  let e15 = (bitcast<vec2<f16>>((w & 0x000F000Fu) | 0x64006400u) - b) * sv;
  let e26 = (bitcast<vec2<f16>>(((w >> 12u) & 0x000F000Fu) | 0x64006400u) - b) * sv;
  let e37 = (bitcast<vec2<f16>>(((w >> 8u) & 0x000F000Fu) | 0x64006400u) - b) * sv;
  Ws[o] = e04.x; Ws[o + 1u] = e15.x; Ws[o + 2u] = e26.x; Ws[o + 3u] = e37.x;
  Ws[o + 4u] = e04.y; Ws[o + 5u] = e15.y; Ws[o + 6u] = e26.y; Ws[o + 7u] = e37.y;
}

// int8: the four codes of a word (element e in byte e, two's complement) times s, rounded to f16
fn put_i8(o: u32, w: u32, s: f32) {
  let v = vec4f(vec4i(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u), bitcast<i32>(w)) >> vec4u(24u));
  let h = vec4<f16>(v * s);
  Ws[o] = h.x; Ws[o + 1u] = h.y; Ws[o + 2u] = h.z; Ws[o + 3u] = h.w;
}

// NF4: the eight code-book values of a word (nibble order as int4) times s, rounded to f16
fn put_nf4(o: u32, w: u32, s: f32) {
  let lo = (vec4u(w) >> vec4u(4u, 0u, 12u, 8u)) & vec4u(15u);
  let hi = (vec4u(w) >> vec4u(20u, 16u, 28u, 24u)) & vec4u(15u);
  let a = vec4<f16>(vec4f(lut[lo.x], lut[lo.y], lut[lo.z], lut[lo.w]) * s);
  let c = vec4<f16>(vec4f(lut[hi.x], lut[hi.y], lut[hi.z], lut[hi.w]) * s);
  Ws[o] = a.x; Ws[o + 1u] = a.y; Ws[o + 2u] = a.z; Ws[o + 3u] = a.w;
  Ws[o + 4u] = c.x; Ws[o + 5u] = c.y; Ws[o + 6u] = c.z; Ws[o + 7u] = c.w;
}

// X unit l of this thread as f16 into workgroup memory
fn put_x(l: u32, lid: u32, v: vec4f) {
  let u = l * WG + lid;
  if (u < X_UNITS) {
    let o = (u / (BK / 4u)) * ST + (u % (BK / 4u)) * 4u;
    let h = vec4<f16>(v);
    Xs[o] = h.x; Xs[o + 1u] = h.y; Xs[o + 2u] = h.z; Xs[o + 3u] = h.w;
  }
}

// the registers into workgroup memory: W dequantized, X as f16 (scaled: times its row's 2^-E_m, in X's range's
// second pass)
fn stash(lid: u32, scaled: bool) {
  for (var l = 0u; l < PW; l++) {
    let u = l * WG + lid;
    if (u < W_UNITS) {
      let o = (u / (BK / EPU)) * ST + (u % (BK / EPU)) * EPU;
      let w = rw[l];
      for (var i = 0u; i < 4u; i++) {
        if (PROBE == 2u) {
          let h = bitcast<vec2<f16>>(w[i] ^ bitcast<u32>(rs[l]));
          for (var e = 0u; e < EPW; e += 2u) { Ws[o + i * EPW + e] = h.x; Ws[o + i * EPW + e + 1u] = h.y; }
        } else if (FMT == 1u) { put_i4(o + i * 8u, w[i], f16(rs[l])); }
        else if (FMT == 0u) { put_i8(o + i * 4u, w[i], rs[l]); }
        else { put_nf4(o + i * 8u, w[i], rs[l]); }
      }
    }
  }
  if (RANGE && scaled) {
    for (var l = 0u; l < PX; l++) {
      put_x(l, lid, rx[l] * ldexp(1.0, -i32(atomicLoad(&xrows[min((l * WG + lid) / (BK / 4u), BM - 1u)]))));
    }
  } else {
    for (var l = 0u; l < PX * u32(PROBE != 1u); l++) { put_x(l, lid, rx[l]); }
  }
}

//@entry
