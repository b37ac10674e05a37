// quant-dq-encode: NF4 double quantization of the absmax list (bitsandbytes' compress_statistics): centre the
// values on their mean, then 8-bit blockwise quantization with the signed dynamic map DYN_MAP, 256 per block.
// Bindings: a (read f32 [L]: the absmax values), total (read f32 [1]: their sum), codes (rw u32 [ceil(L / 4)]:
//   one u8 code per value, value i in byte i % 4 of word i / 4), absmax2 (rw f32 [ceil(L / 256)]),
//   offset (rw f32 [1]: the mean, written by thread 0).
// Params: L, row (threads per grid row). Workgroup: 64 threads, one per 256-block.
// Codes: the nearest DYN_MAP value of (a - offset) / absmax2 (ties to the lower index); a zero block codes 0.
fn dyn_code(x: f32) -> u32 {
  var lo = 0u;
  var hi = 255u;
  while (hi - lo > 1u) {
    let mid = (lo + hi) >> 1u;
    if (DYN_MAP[mid] <= x) { lo = mid; } else { hi = mid; }
  }
  return select(hi, lo, x - DYN_MAP[lo] <= DYN_MAP[hi] - x);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let b = g.x + g.y * p.row;
  let nb2 = (p.L + 255u) / 256u;
  if (b >= nb2) { return; }
  let off = total[0] / f32(p.L);
  if (b == 0u) { offset[0] = off; }
  let i0 = b * 256u;
  let i1 = min(p.L, i0 + 256u);
  var m = 0.0;
  for (var i = i0; i < i1; i++) { m = max(m, abs(a[i] - off)); }
  absmax2[b] = m;
  for (var w = i0 / 4u; w < (i1 + 3u) / 4u; w++) {
    var word = 0u;
    for (var e = 0u; e < 4u; e++) {
      let i = 4u * w + e;
      if (i < i1) {
        var c = dyn_code(0.0);
        if (m > 0.0) { c = dyn_code((a[i] - off) / m); }
        word |= c << (8u * e);
      }
    }
    codes[w] = word;
  }
}
