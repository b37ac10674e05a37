// matmul-planes-sum: the epilogue of an exact f32 product on f16 tensor cores (ops/core/matmul-f16-images.ts):
// the P plane products part [P, R, N] (plane j: A's plane j times B's f16 image, f32 accumulation) summed in plane
// order, unscaled by 2^-(e_r + eb) (e_r: row r's exponent from matmul-rows-split.wgsl, eb: B's image exponent;
// applied as two powers of two, each within f32's exponent range, so the intermediate lies between the sum and the
// result), then alpha, bias and accumulate as in matmul.wgsl: c = alpha * (...) (+ bias[n]) (+ c).
// Bindings: part read f32 [P, R, N]; rexp read i32 [R]; bias read [N] (any float dtype; part again without
//   HAS_BIAS); c rw f32 [R, N].
// Params: n (R * N), row (threads per grid row), N, P, eb (i32), alpha (f32).
// Consts (prepended): HAS_BIAS, ACCUM.
// Workgroup: 256 threads, one element each; grid 2-D (grid.ts).
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x + gid.y * p.row;
  if (i >= p.n) { return; }
  let r = i / p.N;
  var v = part[i] + part[p.n + i];
  if (p.P == 3u) { v += part[2u * p.n + i]; }
  let c2 = -(rexp[r] + p.eb);
  let c1 = c2 / 2;
  v = ldexp(ldexp(v, c1), c2 - c1) * p.alpha;
  if (HAS_BIAS) { v += read_bias(i % p.N); }
  if (ACCUM) { v += c[i]; }
  c[i] = v;
}
