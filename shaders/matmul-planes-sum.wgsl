// matmul-planes-sum: the epilogue of an exact f32 product on f16 tensor cores (ops/core/matmul-f16-images.ts):
// the J partial products part [J, R, N] (J = chunks of K x planes, [chunk][plane]: a plane of A times B's f16 image
// over one chunk of K, f32 accumulation) summed in that order, unscaled by 2^-(e_r + eb) (e_r: row r's exponent
// from matmul-rows-split.wgsl, eb: B's image exponent; applied as two powers of two, each within f32's exponent
// range, so the intermediate lies between the sum and the result), then alpha, bias and accumulate as in
// matmul.wgsl: c = alpha * (...) (+ bias[n]) (+ c).
// Bindings: part read f32 [J, R, N]; rexp read i32 [R]; bias read [N] (any float dtype; part again without
//   HAS_BIAS); c rw f32 [R, N]; the wrapper also declares part4 and c4: array<vec4f> on their binding numbers
//   (entry point main uses those, main1 the scalar arrays).
// Params: n (R * N), row (threads per grid row), N, J, eb (i32), alpha (f32).
// Consts (prepended): HAS_BIAS, ACCUM.
// Workgroup: 256 threads; grid 2-D (grid.ts).

// 2^c for c in [-126, 127], built from its bits (exact; one integer op instead of an ldexp per element)
fn pow2(c: i32) -> f32 { return bitcast<f32>(u32(c + 127) << 23u); }

// The row's two unscaling factors: c2 = -(e_r + eb) in [-252, 252], split in halves within f32's normal range.
fn factors(r: u32) -> vec2f {
  let c2 = -(rexp[r] + p.eb);
  let c1 = c2 / 2;
  return vec2f(pow2(c1), pow2(c2 - c1));
}

fn unscale(v: f32, f: vec2f) -> f32 { return v * f.x * f.y * p.alpha; }

// Entry point main (N a multiple of 4): a thread takes 4 elements of one row through the vec4f views.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x + gid.y * p.row;
  let q = p.n / 4u;
  if (t >= q) { return; }
  let i = 4u * t;
  let r = i / p.N;
  var s = part4[t];
  for (var j = 1u; j < p.J; j++) { s += part4[j * q + t]; }
  let f = factors(r);
  var v = vec4f(unscale(s.x, f), unscale(s.y, f), unscale(s.z, f), unscale(s.w, f));
  if (HAS_BIAS) {
    let n = i % p.N;
    v += vec4f(read_bias(n), read_bias(n + 1u), read_bias(n + 2u), read_bias(n + 3u));
  }
  if (ACCUM) { v += c4[t]; }
  c4[t] = v;
}

// Entry point main1: one element per thread.
@compute @workgroup_size(256)
fn main1(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x + gid.y * p.row;
  if (t >= p.n) { return; }
  let r = t / p.N;
  var s = part[t];
  for (var j = 1u; j < p.J; j++) { s += part[j * p.n + t]; }
  var v = unscale(s, factors(r));
  if (HAS_BIAS) { v += read_bias(t % p.N); }
  if (ACCUM) { v += c[t]; }
  c[t] = v;
}
