// sgd: one SGD step in place, torch.optim.SGD semantics:
//   d = grad * gmul * gscale[0];  if wd != 0: d += wd * param          (L2 weight decay added to the gradient)
//   momentum: buf = d on the first step, else momentum*buf + (1 - dampening)*d;  d = nesterov ? d + momentum*buf : buf
//   param -= lr * d
// Bindings: param (rw f32), mom (rw f32 momentum buffer; a private dummy when HAS_MOMENTUM is false),
//   g (read: f32/f16/bf16 via read_g), then the optional gscale, skip, stepst of optim-common.wgsl (prepended),
//   and for the multi-tensor entry point (optim-multi.wgsl, appended) `table`.
// Params: n, row, lr, wd, gmul, momentum, omd (= 1 - dampening), first (1 on the first step), aux (multi only).
//   With STEP_BUF the first step is stepst[0] == 1 instead of `first`.
// Constants: HAS_MOMENTUM, NESTEROV.
// Entry points: `main` (one tensor) in optim-common.wgsl, `multi` in optim-multi.wgsl.

fn opt_info() -> vec4f {
  var first = p.first != 0u;
  if (STEP_BUF) { first = stepst[0] == 1u; }
  return vec4f(select(0.0, 1.0, first), 0.0, 0.0, 0.0);
}

// Loaded state of element i: (param, grad, momentum buffer or 0, 0); see adamw.wgsl's opt_load.
fn opt_load(i: u32) -> vec4f {
  var b = 0.0;
  if (HAS_MOMENTUM) { b = mom[i]; }
  return vec4f(param[i], read_g(i), b, 0.0);
}

fn opt_apply(i: u32, s: vec4f, lr: f32, wd: f32, gs: f32, info: vec4f) {
  let x = s.x;
  var d = s.y * gs;
  if (wd != 0.0) { d = d + wd * x; }
  if (HAS_MOMENTUM) {
    var b = d;
    if (info.x == 0.0) { b = p.momentum * s.z + p.omd * d; }
    mom[i] = b;
    if (NESTEROV) { d = d + p.momentum * b; } else { d = b; }
  }
  param[i] = x - lr * d;
}
