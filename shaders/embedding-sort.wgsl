// embedding backward, step 1: sort the (id, position) pairs on the GPU with a bitonic network, so that the
// gradient rows of each id can be summed in position order (deterministic, no atomics).
// Keys: ids[i] for valid ids (0 <= id < vocab, id != pad), 0xffffffff for out-of-range ids, the padding row
// `pad` (PyTorch's padding_idx: its row gets no gradient) and the padding up to P (a power of two); values:
// the position i. Pairs compare by (key, val): all distinct, so the sorted result is
// unique.
// Bindings: ids [N] (read i32), keys [P] (rw u32), vals [P] (rw u32).
// Params: n, P, vocab, k (merge size), j (compare distance), pad (0xffffffff: none).
// Prepended: const WG (threads), B (elements per block in workgroup memory, a power of two >= 2 WG).
// Entry points:
//   sort_local    one workgroup per block of B: builds the pairs from ids, every stage with k <= B
//   merge_global  one thread per pair (P / 2 threads): stage (k, j) with j >= B
//   merge_local   one workgroup per block: stages j = B/2 .. 1 of merge size k > B

var<workgroup> sk: array<u32, B>;
var<workgroup> sv: array<u32, B>;

fn lin(wid: vec3u, nwg: vec3u) -> u32 { return wid.x + wid.y * nwg.x; }

// the sort key of position i: its id when valid, else 0xffffffff (also for the padding past n)
fn key_of(i: u32) -> u32 {
  if (i < p.n) {
    let id = ids[i];
    if (id >= 0 && id < i32(p.vocab) && u32(id) != p.pad) { return u32(id); }
  }
  return 0xffffffffu;
}

// compare-exchange of local slots l < r; ascending when `up`
fn cx_local(l: u32, r: u32, up: bool) {
  let kl = sk[l];
  let kr = sk[r];
  let vl = sv[l];
  let vr = sv[r];
  let greater = kl > kr || (kl == kr && vl > vr);
  if (greater == up) {
    sk[l] = kr;
    sk[r] = kl;
    sv[l] = vr;
    sv[r] = vl;
  }
}

fn store_block(base: u32, t: u32) {
  workgroupBarrier();
  for (var i = t; i < B; i += WG) {
    keys[base + i] = sk[i];
    vals[base + i] = sv[i];
  }
}

// one stage (k, j < B) over the block: B / 2 pairs, B / (2 WG) per thread
fn stage_local(base: u32, t: u32, k: u32, j: u32) {
  for (var q = t; q < B / 2u; q += WG) {
    let l = 2u * j * (q / j) + (q % j);
    cx_local(l, l + j, ((base + l) & k) == 0u);
  }
  workgroupBarrier();
}

@compute @workgroup_size(WG)
fn sort_local(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
              @builtin(local_invocation_index) t: u32) {
  let base = lin(wid, nwg) * B;
  if (base >= p.P) { return; }
  for (var i = t; i < B; i += WG) {
    sk[i] = key_of(base + i);
    sv[i] = base + i;
  }
  workgroupBarrier();
  for (var k = 2u; k <= B; k = k << 1u) {
    for (var j = k >> 1u; j > 0u; j = j >> 1u) { stage_local(base, t, k, j); }
  }
  store_block(base, t);
}

@compute @workgroup_size(WG)
fn merge_local(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
               @builtin(local_invocation_index) t: u32) {
  let base = lin(wid, nwg) * B;
  if (base >= p.P) { return; }
  for (var i = t; i < B; i += WG) {
    sk[i] = keys[base + i];
    sv[i] = vals[base + i];
  }
  workgroupBarrier();
  for (var j = B >> 1u; j > 0u; j = j >> 1u) { stage_local(base, t, p.k, j); }
  store_block(base, t);
}

@compute @workgroup_size(WG)
fn merge_global(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
                @builtin(local_invocation_index) t: u32) {
  let q = lin(wid, nwg) * WG + t;
  if (q >= p.P / 2u) { return; }
  let l = 2u * p.j * (q / p.j) + (q % p.j);
  let r = l + p.j;
  let kl = keys[l];
  let kr = keys[r];
  let vl = vals[l];
  let vr = vals[r];
  let greater = kl > kr || (kl == kr && vl > vr);
  if (greater == ((l & p.k) == 0u)) {
    keys[l] = kr;
    keys[r] = kl;
    vals[l] = vr;
    vals[r] = vl;
  }
}
