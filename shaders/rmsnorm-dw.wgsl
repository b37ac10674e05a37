// rmsnorm dw: dw[d] = sum over c of dwp[c, d], summed in a fixed order (deterministic, no atomics).
// Bindings: dwp [chunks, D] (read f32), dw [D] (rw f32). Params: chunks, D.
// Prepended: const WG (a multiple of 32). Workgroup = 32 columns x SL = WG / 32 slices: slice s sums chunks
// s, s + SL, ... (coalesced along the columns); the SL slice sums are then added in slice order.
// Workgroups: ceil(D / 32).

const SL: u32 = WG / 32u;
var<workgroup> part: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) t: u32) {
  let col = wid.x * 32u + (t & 31u);
  let slice = t >> 5u;
  var a = 0.0;
  if (col < p.D) {
    for (var c = slice; c < p.chunks; c += SL) { a += dwp[c * p.D + col]; }
  }
  part[t] = a;
  workgroupBarrier();
  if (t < 32u && col < p.D) {
    var s = 0.0;
    for (var k = 0u; k < SL; k++) { s += part[k * 32u + t]; }
    dw[col] = s;
  }
}
