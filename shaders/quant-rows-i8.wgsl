// quant-rows-i8: quantize each row of X [M, K] to int8 on the fly, symmetric with one f32 scale per row:
//   s[m] = max_k |x[m, k]| / 127, code = clamp(round(x / s), -127, 127) (round half to even; a zero row gets
//   scale 0 and codes 0). The codes use the int8 weight layout of ops/quant/formats.ts: four per u32 word,
//   element k in byte k % 4 (two's complement), rows of wpr = ceil(K / 4) words, padding bytes 0.
// Bindings: x (read f32, f16 or bf16 [M, K]), q (rw u32 [M, wpr]), s (rw f32 [M]).
// Params: M, K, wpr, gx (workgroups per grid row).
// Workgroup: 256 threads per row (row = workgroup x + y * gx): absmax by a tree in workgroup memory, then thread
//   t encodes words t, t + 256, ...
const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let m = wg.x + wg.y * p.gx;
  let ok = m < p.M;
  let row = select(0u, m, ok) * p.K;
  var amax = 0.0;
  if (ok) {
    for (var k = li; k < p.K; k += WG) { amax = max(amax, abs(read_x(row + k))); }
  }
  red[li] = amax;
  workgroupBarrier();
  for (var st = WG / 2u; st > 0u; st >>= 1u) {
    if (li < st) { red[li] = max(red[li], red[li + st]); }
    workgroupBarrier();
  }
  if (!ok) { return; }
  let sc = red[0] / 127.0;
  if (li == 0u) { s[m] = sc; }
  for (var w = li; w < p.wpr; w += WG) {
    var word = 0u;
    for (var e = 0u; e < 4u; e++) {
      let k = 4u * w + e;
      if (k < p.K && sc > 0.0) {
        let c = i32(clamp(round(read_x(row + k) / sc), -127.0, 127.0));
        word |= (bitcast<u32>(c) & 0xffu) << (8u * e);
      }
    }
    q[m * p.wpr + w] = word;
  }
}
