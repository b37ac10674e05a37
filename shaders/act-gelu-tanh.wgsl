// act-gelu-tanh: the tanh-approximated GELU of the gated kernels (gated-act*.wgsl; Gemma's MLP is
// gelu_tanh(gate) * up), forward and derivative side by side, f32 arithmetic on V (f32 or vec2f, prepended):
//   act(g) = 0.5 g (1 + tanh(z)),  z = sqrt(2 / pi) (g + 0.044715 g^3)      (PyTorch gelu(approximate='tanh'))
// computed as g * s with s = 0.5 (1 + tanh(z)) = sigmoid(2z) = 1 / (1 + exp(-2z)), which is the same function
// without the cancellation of 1 + tanh(z) for negative z, and saturates without NaN (exp overflowing to +inf
// gives s = 0);  act'(g) = s + g * 2 s (1 - s) z',  z' = sqrt(2 / pi) (1 + 3 * 0.044715 g^2).
// No bindings or params.

const GELU_C: f32 = 0.7978845608028654;  // sqrt(2 / pi)
const GELU_K: f32 = 0.044715;

struct ActGrad {
  y: V,
  d: V,
}

fn gelu_s(g: V) -> V {
  let z2 = (2.0 * GELU_C) * (g + GELU_K * g * g * g);
  return V(1.0) / (V(1.0) + exp(-z2));
}

fn act(g: V) -> V {
  return g * gelu_s(g);
}

fn act_grad(g: V) -> ActGrad {
  let s = gelu_s(g);
  let dz2 = (2.0 * GELU_C) * (V(1.0) + (3.0 * GELU_K) * g * g);
  return ActGrad(g * s, s + g * s * (V(1.0) - s) * dz2);
}
