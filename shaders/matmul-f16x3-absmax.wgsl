// matmul-f16x3-absmax: the first operand pass of an f32 matmul on f16 tensor cores at "high" precision
// (ops/core/matmul-f16x3.ts, which says why), for both operands in one dispatch: workgroup w of operand o (o = 0
// for A: workgroups [0, GA); o = 1 for B: [GA, GA + GB)) writes part[o * 256 + w'] = the bits of the largest |x|
// of its grid-stride share (w' = its index within the operand). Non-negative floats order as their bits, so the
// maximum of the parts is the bits of max |x| (a NaN's bits exceed +inf's: a NaN wins). The split pass reduces
// the parts; nothing needs zeroing first.
// Bindings: xa, xb read f32; part rw u32 [2 * 256 + 2] (words 512, 513: the split pass's 1 / sA, 1 / sB).
// Prepended by the wrapper: VEC (both element counts multiples of 4), ld4(isb, i) (elements 4i .. 4i + 3 of xb
//   or xa, through a vec4f view when VEC) and ld1(isb, i) (element i).
// Params: na, nb (elements), ga, gb (workgroups per operand, 1 .. 256).
// Workgroup: 256 threads; grid (ga + gb).
var<workgroup> red: array<u32, 256>;

fn bits_abs(v: f32) -> u32 { return bitcast<u32>(abs(v)); }
fn max4(v: vec4f) -> u32 { return max(max(bits_abs(v.x), bits_abs(v.y)), max(bits_abs(v.z), bits_abs(v.w))); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let isb = wid.x >= p.ga;
  let w = select(wid.x, wid.x - p.ga, isb);
  let g = select(p.ga, p.gb, isb);
  let n = select(p.na, p.nb, isb);
  var m = 0u;
  if (VEC) {
    for (var i = w * 256u + tid; i < n / 4u; i += g * 256u) { m = max(m, max4(ld4(isb, i))); }
  } else {
    for (var i = w * 256u + tid; i < n; i += g * 256u) { m = max(m, bits_abs(ld1(isb, i))); }
  }
  red[tid] = m;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (tid < h) { red[tid] = max(red[tid], red[tid + h]); }
    workgroupBarrier();
  }
  if (tid == 0u) { part[select(0u, 256u, isb) + w] = red[0]; }
}
