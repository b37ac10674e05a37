// loss-scale-update: torch.cuda.amp.GradScaler.update on the GPU (as _amp_update_scale_), then clears the flag:
//   found-inf: scale *= backoff, tracker = 0
//   else: tracker + 1 == interval ? (scale *= growth unless that overflows to inf; tracker = 0) : tracker += 1
// Bindings: state (rw u32[2]: scale as f32 bits, growth tracker), found (rw u32 flag; reset to 0 here).
// Params: growth, backoff, interval. Workgroup: 1 thread.
@compute @workgroup_size(1)
fn main() {
  let scale = bitcast<f32>(state[0]);
  if (found[0] != 0u) {
    state[0] = bitcast<u32>(scale * p.backoff);
    state[1] = 0u;
  } else {
    let n = state[1] + 1u;
    if (n == p.interval) {
      let ns = scale * p.growth;
      if ((bitcast<u32>(ns) & 0x7f800000u) != 0x7f800000u) { state[0] = bitcast<u32>(ns); }
      state[1] = 0u;
    } else {
      state[1] = n;
    }
  }
  found[0] = 0u;
}
