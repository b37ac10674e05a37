// cast: dst = convert(src), elementwise, with exact 16-bit conversions (see half.wgsl).
// Bindings: src (read, any float dtype, via read_src), dst (rw u32 words of the output format).
// Params: n (elements), row (threads per grid row, for 2-D grids past 65535 workgroups).
// Prepended by the wrapper from the format table (kernel.ts `wgslPacker('dst', dtype)`): PW_dst (output
//   elements per word) and pack_dst (PW_dst f32 values -> one word). One thread per output word.
// Workgroup: 256 threads.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = g.x + g.y * p.row;
  let i = PW_dst * t;
  if (i >= p.n) { return; }
  var x: array<f32, PW_dst>;
  for (var j = 0u; j < PW_dst; j++) {
    if (i + j < p.n) { x[j] = read_src(i + j); }
  }
  dst[t] = pack_dst(x);
}
