// grad-norm-final: second pass of the global L2 norm: one workgroup sums all partials in a fixed order and
// writes res[0] = clip coefficient = min(1, max_norm / (norm + 1e-6)) (NaN if the norm is NaN, as
// torch.nn.utils.clip_grad_norm_), res[1] = norm = sqrt(sum of squares).
// Bindings: part (read f32 partials), res (rw f32[2]). Params: total (partials), max_norm.
// Workgroup: 256 threads, one workgroup.
var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
  var a0 = 0.0;
  var a1 = 0.0;
  var i = lid;
  while (i + 256u < p.total) {
    a0 += part[i];
    a1 += part[i + 256u];
    i += 512u;
  }
  if (i < p.total) { a0 += part[i]; }
  red[lid] = a0 + a1;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let norm = sqrt(red[0]);
    let nb = bitcast<u32>(norm);
    let is_nan = (nb & 0x7f800000u) == 0x7f800000u && (nb & 0x7fffffu) != 0u;
    let c = min(p.max_norm / (norm + 1e-6), 1.0);
    res[0] = select(c, norm, is_nan);
    res[1] = norm;
  }
}
