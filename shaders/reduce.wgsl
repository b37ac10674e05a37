// reduce: y[o, s, i] = scale * op_{r in chunk s} x[o, r, i], the input viewed as [outer, R, inner]
// (op = sum or max; mean is sum with scale = 1/R). S > 1 splits R into chunks for a second pass.
// Bindings: x (read, f32/f16/bf16 via read_x), y (rw f32, [outer, S, inner]).
// Params: outer, R, inner, S (chunks), chunk (rows of R per chunk), nx (workgroups along inner),
//   row (workgroups per grid row: wid = wg.x + wg.y * row), scale.
// Constants: OP (0 sum, 1 max), WX (threads along inner), WY (threads along R); WX * WY = 256.
// Workgroup: WX x WY threads own WX outputs. Thread (lx, ly) reduces rows ly, ly + WY, ... of its chunk
// (sums in blocks of 64 rows, then the block sums), then the WY partials meet in a tree in workgroup memory.
// Deterministic: no atomics; the grouping does not depend on timing.

var<workgroup> part: array<f32, 256>;

fn combine(a: f32, b: f32) -> f32 {
  if (OP == 1u) { return max(a, b); }
  return a + b;
}

fn identity() -> f32 {
  if (OP == 1u) { return bitcast<f32>(0xff800000u + min(p.R, 0u)); }  // -inf (at run time: a constant inf is an error)
  return 0.0;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let lx = lid % WX;
  let ly = lid / WX;
  let ix = wid % p.nx;
  let os = wid / p.nx;              // o * S + s
  let s = os % p.S;
  let o = os / p.S;
  let i = ix * WX + lx;
  let live = o < p.outer && i < p.inner;
  var acc = identity();
  if (live) {
    let r0 = s * p.chunk;
    let r1 = min(p.R, r0 + p.chunk);
    let base = o * p.R * p.inner + i;
    var r = r0 + ly;
    while (r < r1) {
      // a block of up to 64 rows per thread, folded into acc (pairwise-ish: error grows with blocks, not rows)
      var blk = identity();
      let end = min(r1, r + 64u * WY);
      while (r < end) {
        blk = combine(blk, read_x(base + r * p.inner));
        r += WY;
      }
      acc = combine(acc, blk);
    }
  }
  part[lid] = acc;
  workgroupBarrier();
  var h = WY / 2u;
  while (h > 0u) {
    if (ly < h) { part[lid] = combine(part[lid], part[lid + h * WX]); }
    workgroupBarrier();
    h = h / 2u;
  }
  if (ly == 0u && live) {
    y[os * p.inner + i] = part[lx] * p.scale;
  }
}
