// matmul-rows-split: the f32 operand A [R, K] of an exact f32 product on f16 tensor cores
// (ops/core/matmul-f16-images.ts) as P f16 planes [P, R, K] (P = 3: hi, mid, lo; P = 2: hi, mid), row by row:
//   s_r = 2^e_r brings the row's largest finite |x| into [2^13, 2^14) (e_r = 0 for a row of zeros),
//   y = s_r x,  hi = f16(y),  mid = f16(y - hi),  lo = f16(y - hi - mid)   (each difference exact in f32)
// Three planes hold every bit of x for elements of at least 2^-15 of the row's maximum (|y| >= 1/2: the last bit
// of y, which lo holds, is then at least f16's smallest, 2^-24); smaller ones keep an absolute error under
// 2^-25 / s_r (2^-38 of the row's maximum). Two planes keep 22 bits (the 'high' precision).
// Each f16 x f16 product of a plane and the f16 image of B is exact in f32. The row exponents go to rexp for
// matmul-planes-sum.wgsl, which undoes the scale. round16: shaders/round-f16.wgsl, prepended.
// Bindings: x read f32 [R, K] (redeclared as x2: array<vec2f>, K even); planes rw u32 [P, R, K / 2] (f16 pairs);
//   rexp rw i32 [R].
// Params: R, K, P.
// Workgroup: 256 threads per row (a grid-stride loop over the row's pairs, twice: max, then split); grid 2-D
//   (workgroup index wid.x + wid.y * nwg.x = the row).
var<workgroup> red: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) tid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.R) { return; }
  let kh = p.K / 2u;
  let base = r * kh;
  // the largest finite |x| of the row (non-finite elements: no scale from them)
  var m = 0u;
  for (var j = tid; j < kh; j += 256u) {
    let b = bitcast<vec2u>(x2[base + j]) & vec2u(0x7fffffffu);
    let f = select(b, vec2u(0u), b >= vec2u(0x7f800000u));
    m = max(m, max(f.x, f.y));
  }
  red[tid] = m;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (tid < h) { red[tid] = max(red[tid], red[tid + h]); }
    workgroupBarrier();
  }
  let mb = red[0];
  var e = 0;
  if (mb != 0u) { e = clamp(14 - frexp(bitcast<f32>(mb)).exp, -126, 126); }
  if (tid == 0u) { rexp[r] = e; }
  let s = ldexp(1.0, e);
  let plane = p.R * kh;
  for (var j = tid; j < kh; j += 256u) {
    let y = x2[base + j] * s;
    // inf and NaN (tested on the bits: a compiler may assume no NaN in float comparisons) go whole into the hi
    // plane, the others get 0: the products see them as the portable kernels do
    let nf = (bitcast<vec2u>(y) & vec2u(0x7f800000u)) == vec2u(0x7f800000u);
    let hi = select(vec2f(round16(y.x), round16(y.y)), y, nf);
    let r1 = select(y - hi, vec2f(0.0), nf);
    let mid = vec2f(round16(r1.x), round16(r1.y));
    planes[base + j] = pack2x16float(hi);
    planes[plane + base + j] = pack2x16float(mid);
    if (p.P == 3u) {
      let r2 = r1 - mid;
      planes[2u * plane + base + j] = pack2x16float(vec2f(round16(r2.x), round16(r2.y)));
    }
  }
}
