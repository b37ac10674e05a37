// binary: y[i] = f(a[ia], b[ib]) with NumPy broadcasting, computed in f32.
// Bindings: a, b (read, f32/f16/bf16 via read_a/read_b), y (rw f32, contiguous, n elements).
// Params: n (output elements), row (threads per grid row: i = gid.x + gid.y * row),
//   d0..d5 (output dims, outermost first, padded with 1 on the left after merging contiguous dims),
//   sa0..sa5, sb0..sb5 (element strides of a and b along those dims; 0 where broadcast).
// Constants: OP (0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow), RANK (dims in use, 1..6: the innermost).
// Workgroup: 256 threads, one output element each.

fn powf(x: f32, e: f32) -> f32 {
  // NumPy semantics for real results: negative bases need an integral exponent (else NaN).
  if (e == 0.0) { return 1.0; }
  let r = pow(abs(x), e);
  if (x >= 0.0) { return r; }
  // a runtime NaN (a constant NaN is a WGSL shader-creation error)
  if (trunc(e) != e) { return bitcast<f32>(0x7fc00000u + min(p.n, 0u)); }
  let odd = (trunc(e * 0.5) * 2.0) != e;
  return select(r, -r, odd);
}

fn apply(x: f32, z: f32) -> f32 {
  switch (OP) {
    case 0u: { return x + z; }
    case 1u: { return x - z; }
    case 2u: { return x * z; }
    case 3u: { return x / z; }
    case 4u: { return max(x, z); }
    case 5u: { return min(x, z); }
    case 6u: { return powf(x, z); }
    default: { return x; }
  }
}

// One dim of the index decomposition: peel coordinate c off r along a dim of size d.
fn peel(r: ptr<function, u32>, d: u32, sa: u32, sb: u32, ia: ptr<function, u32>, ib: ptr<function, u32>) {
  let q = *r / d;
  let c = *r - q * d;
  *r = q;
  *ia += c * sa;
  *ib += c * sb;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  var r = i;
  var ia = 0u;
  var ib = 0u;
  if (RANK == 1u) {
    ia = i * p.sa5;
    ib = i * p.sb5;
  } else {
    peel(&r, p.d5, p.sa5, p.sb5, &ia, &ib);
    if (RANK > 2u) { peel(&r, p.d4, p.sa4, p.sb4, &ia, &ib); }
    if (RANK > 3u) { peel(&r, p.d3, p.sa3, p.sb3, &ia, &ib); }
    if (RANK > 4u) { peel(&r, p.d2, p.sa2, p.sb2, &ia, &ib); }
    if (RANK > 5u) { peel(&r, p.d1, p.sa1, p.sb1, &ia, &ib); }
    // the outermost dim in use takes what is left
    let top = 6u - RANK;
    switch (top) {
      case 0u: { ia += r * p.sa0; ib += r * p.sb0; }
      case 1u: { ia += r * p.sa1; ib += r * p.sb1; }
      case 2u: { ia += r * p.sa2; ib += r * p.sb2; }
      case 3u: { ia += r * p.sa3; ib += r * p.sb3; }
      default: { ia += r * p.sa4; ib += r * p.sb4; }
    }
  }
  y[i] = apply(read_a(ia), read_b(ib));
}
