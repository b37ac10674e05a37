// optim-step: advance an optimizer's GPU step state unless the step is skipped (found-inf), so that a
// skipped step does not count, as in PyTorch where GradScaler never calls optimizer.step() then.
// Bindings: stepst (rw u32[4]: t, bc1 = 1-beta1^t as f32 bits, bc2 = 1-beta2^t as f32 bits, unused),
//   skip (read u32, element 0 non-zero = skipped; a private zero when the caller has no flag).
// Params: beta1, beta2, omb1 (= 1-beta1 from f64), omb2. The bias corrections follow c_t = beta*c_{t-1} + (1-beta)
// (= 1 - beta^t with no cancellation). Workgroup: 1 thread.
@compute @workgroup_size(1)
fn main() {
  if (skip[0] != 0u) { return; }
  stepst[0] = stepst[0] + 1u;
  stepst[1] = bitcast<u32>(p.beta1 * bitcast<f32>(stepst[1]) + p.omb1);
  stepst[2] = bitcast<u32>(p.beta2 * bitcast<f32>(stepst[2]) + p.omb2);
}
