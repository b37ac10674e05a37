// adamw: one AdamW step in place, torch.optim.AdamW semantics (amsgrad=False, non-fused formulation):
//   g  = grad * gmul * gscale[0]
//   x  = param * (1 - lr*wd)                        (decoupled weight decay, applied first)
//   m  = lerp(m, g, 1 - beta1);  v = beta2*v + (1 - beta2)*g*g
//   param = x - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc1 = 1 - beta1^t, bc2 = 1 - beta2^t
// Bindings: param (rw f32), m (rw f32, exp_avg), v (rw f32, exp_avg_sq), g (read: f32/f16/bf16 via read_g),
//   then the optional gscale, skip, stepst of optim-common.wgsl (which is prepended), and for the
//   multi-tensor entry point (optim-multi.wgsl, appended) `table`.
// Params: n (elements), row (threads per grid row), lr, wd, gmul, beta1, beta2, omb1 (= 1-beta1 rounded from
//   f64), omb2 (= 1-beta2), eps, inv_bc1 (1/bc1), inv_sqrt_bc2 (1/sqrt(bc2)), aux (multi: table word of chunk 0).
//   With STEP_BUF the bias corrections come from stepst[1], stepst[2] instead of inv_bc1, inv_sqrt_bc2.
// Entry points: `main` (one tensor) in optim-common.wgsl, `multi` in optim-multi.wgsl.

fn opt_info() -> vec4f {
  if (STEP_BUF) {
    return vec4f(1.0 / bitcast<f32>(stepst[1]), inverseSqrt(bitcast<f32>(stepst[2])), 0.0, 0.0);
  }
  return vec4f(p.inv_bc1, p.inv_sqrt_bc2, 0.0, 0.0);
}

// Loaded state of element i: (param, grad, m, v). Split from opt_apply so that the multi-tensor loop can issue
// the loads of several elements before their stores (more memory requests in flight).
fn opt_load(i: u32) -> vec4f {
  return vec4f(param[i], read_g(i), m[i], v[i]);
}

fn opt_apply(i: u32, s: vec4f, lr: f32, wd: f32, gs: f32, info: vec4f) {
  let gi = s.y * gs;
  let x = s.x * (1.0 - lr * wd);
  let mo = s.z;
  // torch.lerp: start + w*(end-start) for w < 0.5, else end - (end-start)*(1-w)
  let mn = select(gi - (gi - mo) * p.beta1, mo + p.omb1 * (gi - mo), p.omb1 < 0.5);
  let vn = p.beta2 * s.w + p.omb2 * gi * gi;
  m[i] = mn;
  v[i] = vn;
  param[i] = x - (lr * info.x) * mn / (sqrt(vn) * info.y + p.eps);
}
