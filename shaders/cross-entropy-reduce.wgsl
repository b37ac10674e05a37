// cross-entropy reductions, one workgroup each (deterministic order: thread t takes rows t, t + WG, ...,
// four at a time, then the workgroup reduction):
//   count:  cnt[0] = number of rows whose target is not ignoreIndex (as f32), before the main pass
//   finish: loss[0] = sum(rowloss) / cnt[0] (mean) or sum(rowloss) (sum), after it. No targets -> 0/0 = NaN
//           for the mean, as PyTorch.
// Bindings: tgt [rows] (read i32), rowloss [rows] (read f32), cnt [1] (rw f32), loss [1] (rw f32).
// Params: rows, ignoreIndex (i32), mean (u32).
// Prepended: const WG, BI/init_bi, wg_sum.

@compute @workgroup_size(WG)
fn count(b: BI) {
  init_bi(b);
  let t = b.t;
  var c = 0u;
  var r = t;
  // four independent loads per iteration
  for (; r + 3u * WG < p.rows; r += 4u * WG) {
    c += select(0u, 1u, tgt[r] != p.ignoreIndex) + select(0u, 1u, tgt[r + WG] != p.ignoreIndex) +
         select(0u, 1u, tgt[r + 2u * WG] != p.ignoreIndex) + select(0u, 1u, tgt[r + 3u * WG] != p.ignoreIndex);
  }
  for (; r < p.rows; r += WG) { c += select(0u, 1u, tgt[r] != p.ignoreIndex); }
  let total = wg_sum(f32(c), t);
  if (t == 0u) { cnt[0] = total; }
}

@compute @workgroup_size(WG)
fn finish(b: BI) {
  init_bi(b);
  let t = b.t;
  var s = vec4f(0.0);
  var r = t;
  for (; r + 3u * WG < p.rows; r += 4u * WG) {
    s += vec4f(rowloss[r], rowloss[r + WG], rowloss[r + 2u * WG], rowloss[r + 3u * WG]);
  }
  var s1 = 0.0;
  for (; r < p.rows; r += WG) { s1 += rowloss[r]; }
  let total = wg_sum((s.x + s.y) + (s.z + s.w) + s1, t);
  if (t == 0u) {
    if (p.mean == 1u) { loss[0] = total / cnt[0]; } else { loss[0] = total; }
  }
}
