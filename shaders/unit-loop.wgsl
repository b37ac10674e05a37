// unit-loop: the entry point of the kernels that map units independently (gated-act.wgsl,
// gated-act-backward.wgsl, embedding.wgsl), appended after them. Thread t of workgroup w handles units
// w*WG*UPT + t + j*WG, j < UPT (coalesced); where all of the workgroup's units are in range a thread issues all
// its loads before its stores, else it takes one unit at a time with a range check.
// The kernel defines: const WG, UPT (prelude constants); the type U (what one unit loads);
//   fn load_unit(un: u32) -> U; fn store_unit(un: u32, x: U).
// Params used: units. No bindings of its own. Grid: workgroup wid.x + wid.y * nwg.x.

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) t: u32) {
  let b0 = (wid.x + wid.y * nwg.x) * WG * UPT;
  if (b0 + WG * UPT <= p.units) {
    var x: array<U, UPT>;
    for (var j = 0u; j < UPT; j++) { x[j] = load_unit(b0 + t + j * WG); }
    for (var j = 0u; j < UPT; j++) { store_unit(b0 + t + j * WG, x[j]); }
  } else {
    for (var j = 0u; j < UPT; j++) {
      let un = b0 + t + j * WG;
      if (un < p.units) { store_unit(un, load_unit(un)); }
    }
  }
}
