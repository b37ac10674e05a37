// optim-common: helpers shared by the optimizer kernels (adamw.wgsl, sgd.wgsl, optim-multi.wgsl), and the
// per-tensor entry point `main` over the functions every optimizer shader defines (opt_info, opt_load, opt_apply):
// 256 threads, one element each, element gid.x + gid.y * p.row of p.n.
// The optional inputs below are storage bindings when the caller passes the buffer; otherwise the wrapper
// declares a one-element `var<private>` array of the same name in front of this file (defaults in brackets):
//   gscale: array<f32>  element 0 multiplies every gradient inside the step (clip coefficient, 1/loss-scale) [1.0]
//   skip:   array<u32>  element 0 non-zero: the whole step is a no-op (found-inf from loss-scale.wgsl) [0]
//   stepst: array<u32>  GPU step state [t, bc1 bits, bc2 bits, 0] advanced by optim-step.wgsl [0, 0, 0, 0]
// Params used here: gmul (host-side gradient multiplier: -1 for maximize, accumulation factors).
// Constants: STEP_BUF = true: step count / bias corrections come from `stepst`, else from params.

fn grad_mult() -> f32 {
  return p.gmul * gscale[0];
}

// A found-inf flag skips the step; so does a GPU step state that was never advanced (t = 0: no bias correction
// exists yet, and a no-op is safer than NaN parameters).
fn skipped() -> bool {
  return skip[0] != 0u || (STEP_BUF && stepst[0] == 0u);
}

fn opt_update(i: u32, lr: f32, wd: f32, gs: f32, info: vec4f) {
  opt_apply(i, opt_load(i), lr, wd, gs, info);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x + gid.y * p.row;
  if (i >= p.n || skipped()) { return; }
  opt_update(i, p.lr, p.wd, grad_mult(), opt_info());
}
