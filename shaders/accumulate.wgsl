// accumulate: y[i] = beta * y[i] + alpha * x[i] (in place on y; beta == 0 copies without reading y). Autograd uses it to add gradients into
// leaf .grad buffers and optimizers to scale. Bindings: x (read, any float dtype), y (rw f32).
// Params: n (elements), row (threads per grid row), alpha, beta. Workgroup 256, one element per thread.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  let x = p.alpha * read_x(i);
  // beta == 0 overwrites without reading y (which may hold garbage or NaN)
  y[i] = select(p.beta * y[i] + x, x, p.beta == 0.0);
}
