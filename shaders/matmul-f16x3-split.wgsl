// matmul-f16x3-split: the second operand pass of an f32 matmul on f16 tensor cores at "high" precision
// (ops/core/matmul-f16x3.ts): three f16 copies of s * x along K, each the hi or the lo part, so that one
// f16 x f16 -> f32 product with K' = 3K sums hiA hiB + hiA loB + loA hiB (A B to about 22 bits; loA loB, 2^-22
// of the product, is dropped):
//   hi = f16(s x),  lo = f16(s x - hi)      (s x - hi is exact in f32; both rounded to nearest even by round16)
// s = 2^e brings max |x| into [2^13, 2^14): hi parts stay far below f16's 65504, and lo parts stay normal f16 for
// every element within 2^-9 of the maximum (smaller ones keep an absolute error under 2^-25 max |x|). The
// product's epilogue multiplies by 1 / (sA sB), exact in f32. Zero, inf or NaN maxima take s = 1.
// Bindings: x read f32 [batch, R, C] (C contiguous); sc rw atomic u32 [4]: the bits of max |A| and max |B|
//   (matmul-f16x3-absmax.wgsl), then 1 / sA and 1 / sB as f32 bits (written here by thread 0 for slot);
//   out rw f16 as u32 words: [batch, R, 3C] (COLS = 1: the copies side by side along C) or [batch, 3R, C]
//   (COLS = 0: stacked along R); copy j is the lo part where bit j of LO is set, else hi. Thread w writes one
//   word, output halves 2w and 2w + 1.
// Params: n (elements of x), R, C, row (threads per grid row, see grid1d), slot (0: A, 1: B).
// Constants (prepended): COLS, LO. Workgroup: 256 threads.

fn scale_exp(mbits: u32) -> i32 {
  if (mbits == 0u || mbits >= 0x7f800000u) { return 0; }
  // max = f * 2^ex with f in [0.5, 1): 2^(14 - ex) max lies in [2^13, 2^14)
  return clamp(14 - frexp(bitcast<f32>(mbits)).exp, -126, 126);
}

// y rounded to the nearest f16 (ties to even), as f32: integer rounding of the f32 bits to 11 significant bits in
// f16's normal range, a multiple of 2^-24 below it. Written out because a compiler may fold a round trip
// f32(f16(y)) (or unpack(pack(y))) into y: lavapipe does. |y| <= 2^14 here (or inf / NaN, which stay).
fn round16(y: f32) -> f32 {
  if (abs(y) < 6.103515625e-5) { return round(y * 16777216.0) * 5.9604644775390625e-8; }
  let b = bitcast<u32>(y);
  return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);
}

fn part_of(x: f32, s: f32, j: u32) -> f32 {
  let y = x * s;
  let hi = round16(y);
  if (((LO >> j) & 1u) == 0u) { return hi; }
  return round16(y - hi);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let gidx = g.x + g.y * p.row;
  let e = scale_exp(atomicLoad(&sc[p.slot]));
  let s = ldexp(1.0, e);
  if (gidx == 0u) { atomicStore(&sc[2u + p.slot], bitcast<u32>(ldexp(1.0, -e))); }
  let total = 3u * p.n;
  if (2u * gidx >= total) { return; }
  var w = vec2<f32>();
  for (var k = 0u; k < 2u; k++) {
    let o = 2u * gidx + k;
    if (o >= total) { break; }
    var row: u32;
    var c: u32;
    var j: u32;
    if (COLS) {
      let cc = o % (3u * p.C);
      row = o / (3u * p.C);  // over batch * R
      j = cc / p.C;
      c = cc % p.C;
    } else {
      let plane = 3u * p.R * p.C;
      let rr = (o % plane) / p.C;
      j = rr / p.R;
      row = (o / plane) * p.R + rr % p.R;
      c = o % p.C;
    }
    w[k] = part_of(read_x(row * p.C + c), s, j);
  }
  out[gidx] = pack2x16float(w);
}
