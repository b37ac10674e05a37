// lowrank-outer-finish: C = alpha * sum_s part[s] (+ C when acc == 1) for lowrank-outer and lowrank-rows (chunk sums
// [S, Q, R]), stored [Q, R] (ct == 0: dB, x A^T, dY B) or transposed
// [R, Q] (ct == 1: dA from dA^T). One thread per output element, the chunks summed in order (deterministic).
// Bindings: part (read f32, [S, Q, R] from lowrank-outer), c (rw f32). Params: Q, S, ct, acc, row (threads per
// grid row), alpha. Constant R (`consts`). Workgroup 256.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.Q * R) { return; }
  var sum = 0.0;
  for (var s = 0u; s < p.S; s++) { sum += read_part(s * p.Q * R + i); }
  let q = i / R;
  let j = i % R;
  let o = select(i, j * p.Q + q, p.ct == 1u);
  let v = p.alpha * sum;
  c[o] = select(v, c[o] + v, p.acc == 1u);
}
