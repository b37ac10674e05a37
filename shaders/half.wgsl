// 16-bit float helpers, prepended to every kernel that binds f16/bf16 storage.
// Storage: two 16-bit values per u32 word, element 2k in the low half, 2k+1 in the high half.
// Conversions are exact (decode) or round-to-nearest-even with subnormals, inf and NaN (encode).

fn f16_bits_to_f32(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) {
    // zero or subnormal: m * 2^-24, exact in f32
    let v = f32(m) * 5.9604644775390625e-8;
    return select(v, -v, s != 0u);
  }
  if (e == 0x1fu) {
    return bitcast<f32>(s | 0x7f800000u | (m << 13u));
  }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

fn f32_to_f16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let s = (b >> 16u) & 0x8000u;
  let e = (b >> 23u) & 0xffu;
  let m = b & 0x7fffffu;
  if (e == 0xffu) {
    return s | 0x7c00u | select(0u, 0x200u | (m >> 13u), m != 0u);
  }
  let ee = i32(e) - 112;
  if (ee >= 31) { return s | 0x7c00u; }
  if (ee <= 0) {
    if (ee < -10) { return s; }
    let mm = m | 0x800000u;
    let shift = u32(14 - ee);
    var h = mm >> shift;
    let rem = mm & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u) == 1u)) { h = h + 1u; }
    return s | h;
  }
  var h = (u32(ee) << 10u) | (m >> 13u);
  let rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) { h = h + 1u; }
  return s | h;
}

fn f32_to_bf16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu) != 0u) {
    return ((b >> 16u) | 0x40u) & 0xffffu;
  }
  return ((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn bf16_bits_to_f32(h: u32) -> f32 {
  return bitcast<f32>(h << 16u);
}
