// dequant-dq-scales: decode NF4 double-quantized absmax values: s[i] = DYN_MAP[code_i] * absmax2[i / 256] + offset.
// Bindings: codes (read u32 [ceil(L / 4)], u8 codes, value i in byte i % 4 of word i / 4), absmax2 (read f32
//   [ceil(L / 256)]), offset (read f32 [1]), s (rw f32 [L]).
// Params: L, row (threads per grid row). Workgroup: 256 threads, one per value.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.L) { return; }
  let c = (codes[i / 4u] >> (8u * (i % 4u))) & 0xffu;
  s[i] = DYN_MAP[c] * absmax2[i / 256u] + offset[0];
}
