// lowrank-rows: partial sums of C[t, j] = sum_k X[t, k] * W(j, k) over chunks of K, for a small R (the LoRA
// products x A^T and dY B: [tokens, K] times a rank-R factor); lowrank-outer-finish adds the chunks (alpha,
// accumulate). Bandwidth-bound on X, which is read once; W is read once per 64-row block.
// Bindings: x (read, [T, K], any float dtype via read_x), w (read, any float dtype: wt == 0 stores W as [R, K]
// (element j * K + k, LoRA's A), wt == 1 as [K, R] (element k * R + j, LoRA's B)), part (rw f32, [S, T, R]).
// Params: T, K, wt, kchunk (K per chunk, a multiple of 32), nt (64-row blocks), row (workgroups per grid row).
// Constant R (`consts`). The //@ lines are straight-line code the wrapper writes for R:
// //@decl the RG = ceil(R / 4) accumulators a_i of a thread (columns cg + 4 i), //@fma their updates from one X
// value, //@store their writes (straight-line as in matmul-tc, whose indexed-array form ran 2-3.5x slower on an H200).
// Workgroup 256 = 64 rows x 4 column groups; per 32-wide K step the X tile [64 x 32] and the W tile [32 x R] are
// staged in workgroup memory (rows padded to 33 against bank conflicts; 8.4 KB + 4.2 KB at R = 32). Deterministic.
const TM: u32 = 64u;
const TK: u32 = 32u;

var<workgroup> xs: array<f32, TM * (TK + 1u)>;
var<workgroup> ws: array<f32, R * (TK + 1u)>;

// element e of the [TM x TK] X tile at rows t0.., columns kb.. (0 outside X or the chunk)
fn xload(e: u32, t0: u32, kb: u32, k1: u32) -> f32 {
  let rr = e / TK;
  let kk = e % TK;
  var v = 0.0;
  if (t0 + rr < p.T && kb + kk < k1) { v = read_x((t0 + rr) * p.K + kb + kk); }
  return v;
}

fn xstore(e: u32, v: f32) {
  xs[(e / TK) * (TK + 1u) + e % TK] = v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let tb = wid % p.nt;
  let s = wid / p.nt;
  let t0 = tb * TM;
  let k0 = s * p.kchunk;
  let k1 = min(k0 + p.kchunk, p.K);
  let r = lid / 4u;
  let cg = lid % 4u;
  //@decl
  for (var kb = k0; kb < k1; kb += TK) {
    // the X tile: 8 elements per thread, all 8 loads in flight before the stores
    let x0 = xload(lid, t0, kb, k1);
    let x1 = xload(lid + 256u, t0, kb, k1);
    let x2 = xload(lid + 512u, t0, kb, k1);
    let x3 = xload(lid + 768u, t0, kb, k1);
    let x4 = xload(lid + 1024u, t0, kb, k1);
    let x5 = xload(lid + 1280u, t0, kb, k1);
    let x6 = xload(lid + 1536u, t0, kb, k1);
    let x7 = xload(lid + 1792u, t0, kb, k1);
    xstore(lid, x0);
    xstore(lid + 256u, x1);
    xstore(lid + 512u, x2);
    xstore(lid + 768u, x3);
    xstore(lid + 1024u, x4);
    xstore(lid + 1280u, x5);
    xstore(lid + 1536u, x6);
    xstore(lid + 1792u, x7);
    for (var e = lid; e < R * TK; e += 256u) {
      var j: u32;
      var kk: u32;
      if (p.wt == 0u) { j = e / TK; kk = e % TK; } else { kk = e / R; j = e % R; }
      var v = 0.0;
      if (kb + kk < k1) {
        if (p.wt == 0u) { v = read_w(j * p.K + kb + kk); } else { v = read_w((kb + kk) * R + j); }
      }
      ws[j * (TK + 1u) + kk] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      let xv = xs[r * (TK + 1u) + kk];
      //@fma
    }
    workgroupBarrier();
  }
  let t = t0 + r;
  if (t < p.T) {
    let o = (s * p.T + t) * R + cg;
    //@store
  }
}
