// lowrank-outer: partial sums of C[q, j] = sum_t Y[t, q] * Z[t, j] over chunks of t for a small rank R (LoRA's
// weight gradients dB = dY^T u and dA^T = x^T v), streaming Y once with every thread's loads in flight together;
// lowrank-outer-finish adds the chunks. (v1, one 2-byte Y element per thread per row, ran 56 us per product in the
// 1.1B LoRA step on an H100 against this kernel's 42.)
// Bindings: y (read, [T, Q], any float dtype via read_y), z (read, [T, R], any float dtype), part (rw f32,
// [S, Q, R]: chunk s's sums).
// Params: T, Q, tiles (TT-row tiles per chunk), nq (64-column blocks), row (workgroups per grid row).
// Constants R, RV = ceil(R / 4), TT (rows per tile: 64, or 32 where workgroup memory is short), PROBE (0;
// benchmarks only, results wrong: 1 leaves the sums out, 2 the loads of Y) (`consts`); pair_y(o) reads elements
// o, o + 1 (o even) in one load (generated per dtype). Workgroup 256 = 64 columns x 4 groups of rank columns: group g
// accumulates the vec4 columns g and g + 4 (the second only when RV > 4) of its column q. Per tile, Y [TT x 64]
// is read in pairs of neighbours (one 32-bit word of a 16-bit Y: TT / 8 loads per thread, issued for the next tile
// before the current one is summed) into workgroup memory as f32, and Z [TT x RV vec4] beside it. Deterministic.
const TQ: u32 = 64u;
const NP: u32 = TT / 8u;

var<workgroup> ys: array<f32, TT * TQ>;
var<workgroup> zs: array<vec4f, TT * RV>;

// pair e (elements 2e, 2e + 1 of the [TT x TQ] tile at rows t0.., columns q0..), 0 outside Y or the chunk
fn yload(e: u32, t0: u32, t1: u32, q0: u32) -> vec2f {
  let rr = (2u * e) / TQ;
  let cc = (2u * e) % TQ;
  let t = t0 + rr;
  let q = q0 + cc;
  var v = vec2f(0.0);
  if (PROBE == 2u) { return vec2f(1.0); }
  if (t < t1) {
    let o = t * p.Q + q;
    if (q + 1u < p.Q && (o & 1u) == 0u) {
      v = pair_y(o);
    } else {
      if (q < p.Q) { v.x = read_y(o); }
      if (q + 1u < p.Q) { v.y = read_y(o + 1u); }
    }
  }
  return v;
}

fn ystore(e: u32, v: vec2f) {
  ys[2u * e] = v.x;
  ys[2u * e + 1u] = v.y;
}

fn zstage(lid: u32, t0: u32, t1: u32) {
  for (var e = lid; e < TT * RV * 4u; e += 256u) {
    let rr = e / (RV * 4u);
    let j = e % (RV * 4u);
    var v = 0.0;
    if (t0 + rr < t1 && j < R) { v = read_z((t0 + rr) * R + j); }
    zs[rr * RV + j / 4u][j % 4u] = v;
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let qb = wid % p.nq;
  let s = wid / p.nq;
  let q0 = qb * TQ;
  let c = lid % TQ;
  let g = lid / TQ;
  let tc0 = s * p.tiles * TT;
  let tc1 = min(tc0 + p.tiles * TT, p.T);
  var a0 = vec4f(0.0);
  var a1 = vec4f(0.0);
  // straight-line staging registers (NP of them used: 4 or 8)
  var y0 = yload(lid, tc0, tc1, q0);
  var y1 = yload(lid + 256u, tc0, tc1, q0);
  var y2 = yload(lid + 512u, tc0, tc1, q0);
  var y3 = yload(lid + 768u, tc0, tc1, q0);
  var y4 = vec2f(0.0);
  var y5 = vec2f(0.0);
  var y6 = vec2f(0.0);
  var y7 = vec2f(0.0);
  if (NP > 4u) { y4 = yload(lid + 1024u, tc0, tc1, q0); }
  if (NP > 4u) { y5 = yload(lid + 1280u, tc0, tc1, q0); }
  if (NP > 4u) { y6 = yload(lid + 1536u, tc0, tc1, q0); }
  if (NP > 4u) { y7 = yload(lid + 1792u, tc0, tc1, q0); }
  for (var t0 = tc0; t0 < tc1; t0 += TT) {
    ystore(lid, y0);
    ystore(lid + 256u, y1);
    ystore(lid + 512u, y2);
    ystore(lid + 768u, y3);
    if (NP > 4u) { ystore(lid + 1024u, y4); }
    if (NP > 4u) { ystore(lid + 1280u, y5); }
    if (NP > 4u) { ystore(lid + 1536u, y6); }
    if (NP > 4u) { ystore(lid + 1792u, y7); }
    zstage(lid, t0, tc1);
    workgroupBarrier();
    // the next tile's loads go out before this tile is summed (none past the chunk: they return zeros unread)
    let tn = t0 + TT;
    if (tn < tc1) {
      y0 = yload(lid, tn, tc1, q0);
      y1 = yload(lid + 256u, tn, tc1, q0);
      y2 = yload(lid + 512u, tn, tc1, q0);
      y3 = yload(lid + 768u, tn, tc1, q0);
      if (NP > 4u) { y4 = yload(lid + 1024u, tn, tc1, q0); }
      if (NP > 4u) { y5 = yload(lid + 1280u, tn, tc1, q0); }
      if (NP > 4u) { y6 = yload(lid + 1536u, tn, tc1, q0); }
      if (NP > 4u) { y7 = yload(lid + 1792u, tn, tc1, q0); }
    }
    if (g < RV && PROBE != 1u) {
      for (var rr = 0u; rr < TT; rr++) {
        let yv = ys[rr * TQ + c];
        a0 += yv * zs[rr * RV + g];
        if (RV > 4u && g + 4u < RV) { a1 += yv * zs[rr * RV + g + 4u]; }
      }
    }
    workgroupBarrier();
  }
  let q = q0 + c;
  if (q < p.Q && g < RV) {
    let o = (s * p.Q + q) * R;
    for (var i = 0u; i < 4u; i++) {
      if (4u * g + i < R) { part[o + 4u * g + i] = a0[i]; }
      if (RV > 4u && 4u * (g + 4u) + i < R) { part[o + 4u * (g + 4u) + i] = a1[i]; }
    }
  }
}
