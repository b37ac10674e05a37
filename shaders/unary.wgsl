// unary: y[i] = f(x[i]) for one of the elementwise ops below, computed in f32.
// Bindings: x (read, f32/f16/bf16 via read_x), y (rw f32, same element count).
// Params: n (elements), row (threads per grid row: i = gid.x + gid.y * row), alpha (scalar of scale/addScalar).
// Constants: OP (op code, see the switch below; the TypeScript wrapper `UNARY_OPS` holds the same table).
// Workgroup: 256 threads, one element each.

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

fn sigmoid(v: f32) -> f32 {
  return 1.0 / (1.0 + exp(-v));
}

fn apply(v: f32) -> f32 {
  switch (OP) {
    case 0u: { return -v; }                          // neg
    case 1u: { return exp(v); }                      // exp
    case 2u: { return log(v); }                      // log
    case 3u: { return sqrt(v); }                     // sqrt
    case 4u: { return inverseSqrt(v); }              // rsqrt
    case 5u: { return abs(v); }                      // abs
    case 6u: { return max(v, 0.0); }                 // relu
    case 7u: {                                       // gelu, tanh form: 0.5 v (1 + tanh(u)) = v * sigmoid(2u)
      let u = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v);
      return v * sigmoid(2.0 * u);
    }
    case 8u: { return v * sigmoid(v); }              // silu
    case 9u: { return sigmoid(v); }                  // sigmoid
    case 10u: { return tanh(clamp(v, -15.0, 15.0)); } // tanh (clamped: some tanh lowerings overflow)
    case 11u: { return v * v; }                      // square
    case 12u: { return p.alpha * v; }                // scale
    case 13u: { return v + p.alpha; }                // addScalar
    default: { return v; }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  y[i] = apply(read_x(i));
}
