// matmul-f16-image: the f16 image of a frozen f32 matrix for exact f32 products on f16 tensor cores
// (ops/core/matmul-f16-images.ts): img = f16(s w) with s = 2^e (e from max |w|, chosen by the wrapper), and a
// count of the elements the image does not hold exactly (img / s != w: bits below f16's precision, subnormal
// underflow, inf or NaN). Only an image with a count of 0 is used, so a product with it is the product with w.
// round16 (shaders/round-f16.wgsl, prepended) rounds to the nearest f16, ties to even.
// Bindings: w read f32 [n]; img rw u32 [ceil(n / 2)] (f16 pairs); bad rw atomic u32 [slots] (zeroed by the
//   wrapper; one word per weight of a batch).
// Params: n, row (threads per grid row), s, inv (1 / s), slot (this weight's word of bad).
// Workgroup: 256 threads, thread t takes elements 2t and 2t + 1; grid 2-D (grid.ts).
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x + gid.y * p.row;
  if (2u * t >= p.n) { return; }
  var h = vec2f();
  var miss = 0u;
  for (var k = 0u; k < 2u; k++) {
    let i = 2u * t + k;
    if (i >= p.n) { break; }
    let v = w[i];
    let r = round16(v * p.s);
    // |r| > 65504 would not survive the pack; abs(r) <= 65504 is false for NaN too
    if (!(abs(r) <= 65504.0) || r * p.inv != v) { miss += 1u; }
    h[k] = r;
  }
  img[t] = pack2x16float(h);
  if (miss != 0u) { atomicAdd(&bad[p.slot], miss); }
}
