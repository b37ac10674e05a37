// act-silu: the SiLU activation of the gated kernels (gated-act*.wgsl; SwiGLU = silu(gate) * up), forward
// and derivative side by side, f32 arithmetic on V (f32 or vec2f, prepended):
//   act(g) = g * s,  s = sigmoid(g) = 1 / (1 + exp(-g));  act'(g) = s + g * s * (1 - s).
// Saturates without NaN: exp(-g) overflowing to +inf gives s = 0.
// No bindings or params.

struct ActGrad {
  y: V,
  d: V,
}

fn act(g: V) -> V {
  return g / (V(1.0) + exp(-g));
}

fn act_grad(g: V) -> ActGrad {
  let s = V(1.0) / (V(1.0) + exp(-g));
  let gs = g * s;
  return ActGrad(gs, s + gs * (V(1.0) - s));
}
