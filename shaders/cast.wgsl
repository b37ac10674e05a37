// cast: dst = convert(src), elementwise, with exact 16-bit conversions (see half.wgsl).
// Bindings: src (read, any float dtype, via read_src), dst (rw u32 words: f32 bits, or packed 16-bit pairs).
// Params: n (elements), row (threads per grid row, for 2-D grids past 65535 workgroups).
// Constants: DST_KIND 0 = f32 (one thread per element), 1 = f16, 2 = bf16 (one thread per output word).
override DST_KIND: u32 = 0u;

fn enc16(x: f32) -> u32 {
  if (DST_KIND == 1u) { return f32_to_f16_bits(x); }
  return f32_to_bf16_bits(x);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = g.x + g.y * p.row;
  if (DST_KIND == 0u) {
    if (t >= p.n) { return; }
    dst[t] = bitcast<u32>(read_src(t));
    return;
  }
  let i = 2u * t;
  if (i >= p.n) { return; }
  var hi = 0u;
  if (i + 1u < p.n) { hi = enc16(read_src(i + 1u)); }
  dst[t] = enc16(read_src(i)) | (hi << 16u);
}
