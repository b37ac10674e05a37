// round16(y): y rounded to the nearest f16 value (ties to even), as f32, for |y| <= 2^16 (inf and NaN stay):
// integer rounding of the f32 bits to 11 significant bits in f16's normal range, a multiple of 2^-24 below it.
// Written out because a compiler may fold a round trip f32(f16(y)) (or unpack(pack(y))) into y: lavapipe does.
// Prepended by the wrappers of matmul-f16x3-split.wgsl, matmul-f16-image.wgsl and matmul-rows-split.wgsl.
fn round16(y: f32) -> f32 {
  if (abs(y) < 6.103515625e-5) { return round(y * 16777216.0) * 5.9604644775390625e-8; }
  let b = bitcast<u32>(y);
  return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);
}
