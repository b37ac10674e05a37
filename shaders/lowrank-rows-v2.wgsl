// lowrank-rows v2: partial sums of C[t, j] = sum_k X[t, k] * W(j, k) over chunks of K for a small rank R (LoRA's
// x A^T and dY B), streaming X once with every thread's loads in flight together; lowrank-outer-finish adds the
// chunks. v1 (lowrank-rows.wgsl) read one 2-byte X element per load in 32-wide K steps.
// Bindings: x (read, [T, K], any float dtype via read_x), w (read, any float dtype: wt == 0 stores W as [R, K]
// (element j * K + k, LoRA's A), wt == 1 as [K, R] (element k * R + j, LoRA's B)), part (rw f32, [S, T, R]).
// Params: T, K, wt, tiles (64-wide K tiles per chunk), nt (64-row blocks), row (workgroups per grid row).
// Constants R, RV = ceil(R / 4), PROBE (0; benchmarks only, results wrong: 1 leaves the sums out, 2 the loads of X)
// (`consts`); pair_x(o) reads elements o, o + 1 (o even) in one load (generated per dtype). Workgroup 256 = 64 rows x 4 groups of rank columns: group g
// accumulates the vec4 columns g and g + 4 (the second only when RV > 4) of its row t. Per 64-wide K tile, X
// [64 x 64] is read in pairs of neighbours (8 loads per thread, issued for the next tile before the current one is
// summed) into workgroup memory as f32 (rows padded to 65 against bank conflicts), W [64 x RV vec4] beside it.
// Deterministic.
const TM: u32 = 64u;
const TK: u32 = 64u;
const XS: u32 = TK + 1u;

var<workgroup> xs: array<f32, TM * XS>;
var<workgroup> ws: array<vec4f, TK * RV>;

// pair e (elements 2e, 2e + 1 of the [TM x TK] tile at rows t0.., columns kb..), 0 outside X or the chunk
fn xload(e: u32, t0: u32, kb: u32, k1: u32) -> vec2f {
  let rr = (2u * e) / TK;
  let kk = (2u * e) % TK;
  let t = t0 + rr;
  let k = kb + kk;
  var v = vec2f(0.0);
  if (PROBE == 2u) { return vec2f(1.0); }
  if (t < p.T) {
    let o = t * p.K + k;
    if (k + 1u < k1 && (o & 1u) == 0u) {
      v = pair_x(o);
    } else {
      if (k < k1) { v.x = read_x(o); }
      if (k + 1u < k1) { v.y = read_x(o + 1u); }
    }
  }
  return v;
}

fn xstore(e: u32, v: vec2f) {
  let rr = (2u * e) / TK;
  let kk = (2u * e) % TK;
  xs[rr * XS + kk] = v.x;
  xs[rr * XS + kk + 1u] = v.y;
}

fn wstage(lid: u32, kb: u32, k1: u32) {
  for (var e = lid; e < TK * RV * 4u; e += 256u) {
    var j: u32;
    var kk: u32;
    if (p.wt == 0u) { j = e / TK; kk = e % TK; } else { kk = e / (RV * 4u); j = e % (RV * 4u); }
    var v = 0.0;
    if (kb + kk < k1 && j < R) {
      if (p.wt == 0u) { v = read_w(j * p.K + kb + kk); } else { v = read_w((kb + kk) * R + j); }
    }
    ws[kk * RV + j / 4u][j % 4u] = v;
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let tb = wid % p.nt;
  let s = wid / p.nt;
  let t0 = tb * TM;
  let k0 = s * p.tiles * TK;
  let k1 = min(k0 + p.tiles * TK, p.K);
  let r = lid / 4u;
  let g = lid % 4u;
  var a0 = vec4f(0.0);
  var a1 = vec4f(0.0);
  var x0 = xload(lid, t0, k0, k1);
  var x1 = xload(lid + 256u, t0, k0, k1);
  var x2 = xload(lid + 512u, t0, k0, k1);
  var x3 = xload(lid + 768u, t0, k0, k1);
  var x4 = xload(lid + 1024u, t0, k0, k1);
  var x5 = xload(lid + 1280u, t0, k0, k1);
  var x6 = xload(lid + 1536u, t0, k0, k1);
  var x7 = xload(lid + 1792u, t0, k0, k1);
  for (var kb = k0; kb < k1; kb += TK) {
    xstore(lid, x0);
    xstore(lid + 256u, x1);
    xstore(lid + 512u, x2);
    xstore(lid + 768u, x3);
    xstore(lid + 1024u, x4);
    xstore(lid + 1280u, x5);
    xstore(lid + 1536u, x6);
    xstore(lid + 1792u, x7);
    wstage(lid, kb, k1);
    workgroupBarrier();
    let kn = kb + TK;
    if (kn < k1) {
      x0 = xload(lid, t0, kn, k1);
      x1 = xload(lid + 256u, t0, kn, k1);
      x2 = xload(lid + 512u, t0, kn, k1);
      x3 = xload(lid + 768u, t0, kn, k1);
      x4 = xload(lid + 1024u, t0, kn, k1);
      x5 = xload(lid + 1280u, t0, kn, k1);
      x6 = xload(lid + 1536u, t0, kn, k1);
      x7 = xload(lid + 1792u, t0, kn, k1);
    }
    if (g < RV && PROBE != 1u) {
      for (var kk = 0u; kk < TK; kk++) {
        let xv = xs[r * XS + kk];
        a0 += xv * ws[kk * RV + g];
        if (RV > 4u && g + 4u < RV) { a1 += xv * ws[kk * RV + g + 4u]; }
      }
    }
    workgroupBarrier();
  }
  let t = t0 + r;
  if (t < p.T && g < RV) {
    let o = (s * p.T + t) * R;
    for (var i = 0u; i < 4u; i++) {
      if (4u * g + i < R) { part[o + 4u * g + i] = a0[i]; }
      if (RV > 4u && 4u * (g + 4u) + i < R) { part[o + 4u * (g + 4u) + i] = a1[i]; }
    }
  }
}
