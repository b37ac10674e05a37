// scale: y[i] = alpha * y[i] in place. Bindings: y (rw f32). Params: n, row (threads per grid row), alpha.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  y[i] = p.alpha * y[i];
}
