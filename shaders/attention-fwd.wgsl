// attention-fwd: fused scaled-dot-product attention forward, flash style (online softmax), f32 math.
//   o[b, t, h, :] = sum_s softmax_s(cap(scale * q[b,t,h,:] . k[b,s,kh,:]) + mask) v[b,s,kh,:],  kh = h / G
//   lse[b, h, t]  = log sum_s exp(cap(scale * q . k))  over visible keys (natural log; -inf for a row with none)
//   cap(x) = softcap * tanh(x / softcap) with soft-capping, else x
// The [T, S] score matrix is never written to memory: each workgroup keeps BR query rows and streams K/V
// through workgroup memory in tiles of BC keys, with a running row maximum and sum.
//
// Bindings (layouts row-major, contiguous):
//   q    read  f32|f16|bf16  [B, T, Hq, D]
//   k    read  f32|f16|bf16  [B, S, Hkv, D]
//   v    read  f32|f16|bf16  [B, S, Hkv, D]
//   mask read  i32|u32       [B, S]  key padding, 1 = keep, 0 = masked (a 1-element dummy when hasMask = 0)
//   o    rw    f32           [B, T, Hq, D]
//   lse  rw    f32           [B, Hq, T]
// Params: T, S, Hq, Hkv, G (= Hq / Hkv), qOffset (i32: query t sits at absolute position qOffset + t),
//   causal, window (sliding window, 0 = none), hasMask, scale2 (q is multiplied by it: scale * log2(e), as
//   exp2 is used; with soft-capping scale / softcap), capmul (soft-capping: softcap * log2(e), 0 = none; the
//   score is then tanh(scale2 * q.k) * capmul: attn_cap of attention-mask.wgsl).
// Visibility: a key is visible iff s < S, mask[b, s] != 0 (when hasMask) and attn_visible(qOffset + t, s)
//   (attention-mask.wgsl, prepended by the wrapper: causal and sliding window). Key tiles that no row of the
//   workgroup sees are skipped. A row with no visible key writes zeros and lse = -inf.
// This is a template: the wrapper rewrites the `const` lines below per configuration and expands the
// `//@unroll i N` ... `//@end` blocks (body repeated with `$i` = 0u, 1u, ...; see specialize in common.ts).
// Constants:
//   D head dim; DV = ceil(D / 4) vec4 chunks; DS row stride of Qs/KV in vec4 (odd: conflict-free reads);
//   BR query rows per workgroup; BC keys per tile; TR = BR / 4 row groups (each thread owns 4 contiguous
//   rows); CN keys per thread; TC = BC / CN threads per row group (each owns keys tx + TC * j, j < CN,
//   and output vec4 chunks tx + TC * c, c < DC); DC = ceil(DV / TC); PS = TR + 1 stride of Ps in vec4;
//   NT = TR * TC threads; NKL = ceil(BC * DV / NT) vec4 chunks of a K or V tile that each thread loads,
//   NKM = ceil(BC / NT) key flags.
// Software pipelining: the global loads of the next K (or V) tile are issued into registers one compute
// phase ahead and stored to workgroup memory after it, so their latency overlaps the matmuls.
// Workgroup: NT threads; grid (ceil(T / BR), Hq, B).
const D: u32 = 64u;
const DV: u32 = 16u;
const DS: u32 = 17u;
const BR: u32 = 64u;
const BC: u32 = 32u;
const TR: u32 = 16u;
const TC: u32 = 8u;
const CN: u32 = 4u;
const DC: u32 = 2u;
const PS: u32 = 17u;
const NT: u32 = 128u;
const NKL: u32 = 4u;
const NKM: u32 = 1u;

const NEG: f32 = -1.0e30;
// -inf bits, read at run time (a constant -inf is not a valid WGSL value).
var<private> NEG_INF_BITS: u32 = 0xff800000u;

var<workgroup> Qs: array<vec4<f32>, BR * DS>;
// K tile (for the scores), then V tile (for P V); padded so that the last row's extra chunks stay in bounds.
var<workgroup> KV: array<vec4<f32>, BC * DS + TC * DC>;
// P transposed: row j (key) holds BR / 4 vec4 of query rows.
var<workgroup> Ps: array<vec4<f32>, BC * PS>;
var<workgroup> red: array<vec4<f32>, TC * PS>;
var<workgroup> kbias: array<f32, BC>;

fn ld_q(base: u32, c: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  //@unroll e 4
  if (D % 4u == 0u || c * 4u + $e < D) { x[$e] = read_q(base + $e); }
  //@end
  return x;
}

fn ld_k(base: u32, c: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  //@unroll e 4
  if (D % 4u == 0u || c * 4u + $e < D) { x[$e] = read_k(base + $e); }
  //@end
  return x;
}

fn ld_v(base: u32, c: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  //@unroll e 4
  if (D % 4u == 0u || c * 4u + $e < D) { x[$e] = read_v(base + $e); }
  //@end
  return x;
}


fn dot4(a: f32, x: vec4<f32>, y: vec4<f32>) -> f32 {
  return fma(x.w, y.w, fma(x.z, y.z, fma(x.y, y.y, fma(x.x, y.x, a))));
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let h = wid.y;
  let b = wid.z;
  let kh = h / p.G;
  let t0 = wid.x * BR;
  let tx = tid % TC;
  let ty = tid / TC;

  // Q tile, pre-scaled by scale * log2(e).
  for (var e = tid; e < BR * DV; e += NT) {
    let r = e / DV;
    let c = e % DV;
    let t = t0 + r;
    var x = vec4<f32>(0.0);
    if (t < p.T) { x = ld_q(((b * p.T + t) * p.Hq + h) * D + c * 4u, c); }
    Qs[r * DS + c] = x * p.scale2;
  }

  // Key tiles this workgroup needs: those holding a key that one of its rows sees (attention-mask.wgsl).
  let am = attn_mask(p.causal, p.window);
  let qa = p.qOffset + i32(t0);
  let kt = attn_key_tiles(am, p.qOffset, t0, BR, p.T, p.S, BC);
  let kt0 = kt.x;
  let nTiles = kt.y;

  var m = vec4<f32>(NEG);
  var lsum = vec4<f32>(0.0);
  var acc: array<array<vec4<f32>, DC>, 4>;  // zero-initialised
  var kreg: array<vec4<f32>, NKL>;
  var vreg: array<vec4<f32>, NKL>;
  var mreg: array<f32, NKM>;

  // Prologue: K tile kt0 (and its key flags) into registers.
  let sk = kt0 * BC;
  //@unroll u NKL
  {
    let e = tid + $u * NT;
    var x = vec4<f32>(0.0);
    if (e < BC * DV && sk + e / DV < p.S) { x = ld_k(((b * p.S + sk + e / DV) * p.Hkv + kh) * D + (e % DV) * 4u, e % DV); }
    kreg[$u] = x;
  }
  //@end
  //@unroll u NKM
  {
    let j = sk + tid + $u * NT;
    var ok = j < p.S;
    if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
    mreg[$u] = select(NEG, 0.0, ok);
  }
  //@end

  for (var kt = kt0; kt < nTiles; kt++) {
    let s0 = kt * BC;
    workgroupBarrier();
    //@unroll u NKL
    {
      let e = tid + $u * NT;
      if (e < BC * DV) { KV[(e / DV) * DS + e % DV] = kreg[$u]; }
    }
    //@end
    //@unroll u NKM
    if (tid + $u * NT < BC) { kbias[tid + $u * NT] = mreg[$u]; }
    //@end
    // V tile kt into registers: lands while the scores are computed.
    //@unroll u NKL
    {
      let e = tid + $u * NT;
      var x = vec4<f32>(0.0);
      if (e < BC * DV && s0 + e / DV < p.S) { x = ld_v(((b * p.S + s0 + e / DV) * p.Hkv + kh) * D + (e % DV) * 4u, e % DV); }
      vreg[$u] = x;
    }
    //@end
    workgroupBarrier();

    // Scores: rows ty*4+i, keys tx + TC*j.
    var sc: array<array<f32, CN>, 4>;
    //@unroll i 4
    //@unroll j CN
    sc[$i][$j] = 0.0;  // explicit: a var in a loop body is not re-zeroed by every toolchain
    //@end
    //@end
    for (var c = 0u; c < DV; c++) {
      //@unroll j CN
      let k$j = KV[(tx + $j * TC) * DS + c];
      //@end
      //@unroll i 4
      {
        let qq = Qs[(ty * 4u + $i) * DS + c];
        //@unroll j CN
        sc[$i][$j] = dot4(sc[$i][$j], qq, k$j);
        //@end
      }
      //@end
    }
    // Tiles that every row sees whole skip the per-score visibility test.
    let edge = !attn_all_visible(am, qa, qa + i32(BR) - 1, i32(s0), i32(s0 + BC) - 1);
    var rmax = vec4<f32>(NEG);
    //@unroll j CN
    {
      let kb = kbias[tx + $j * TC];
      let key = i32(s0 + tx + $j * TC);
      //@unroll i 4
      {
        var x = attn_cap(sc[$i][$j], p.capmul) + kb;
        if (edge && !attn_visible(am, qa + i32(ty * 4u + $i), key)) { x = NEG; }
        sc[$i][$j] = x;
        rmax[$i] = max(rmax[$i], x);
      }
      //@end
    }
    //@end
    red[tx * PS + ty] = rmax;
    workgroupBarrier();

    // KV is free: store the V tile, then start loading the next K tile (lands during softmax and P V).
    //@unroll u NKL
    {
      let e = tid + $u * NT;
      if (e < BC * DV) { KV[(e / DV) * DS + e % DV] = vreg[$u]; }
    }
    //@end
    if (kt + 1u < nTiles) {
      let s1 = s0 + BC;
      //@unroll u NKL
      {
        let e = tid + $u * NT;
        var x = vec4<f32>(0.0);
        if (e < BC * DV && s1 + e / DV < p.S) { x = ld_k(((b * p.S + s1 + e / DV) * p.Hkv + kh) * D + (e % DV) * 4u, e % DV); }
        kreg[$u] = x;
      }
      //@end
      //@unroll u NKM
      {
        let j = s1 + tid + $u * NT;
        var ok = j < p.S;
        if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
        mreg[$u] = select(NEG, 0.0, ok);
      }
      //@end
    }
    var mx = red[ty];
    for (var u = 1u; u < TC; u++) { mx = max(mx, red[u * PS + ty]); }
    let mnew = max(m, mx);
    let msafe = select(mnew, vec4<f32>(0.0), mnew == vec4<f32>(NEG));
    let alpha = exp2(m - msafe);
    m = mnew;
    var pr: array<array<f32, CN>, 4>;
    //@unroll i 4
    {
      var ps = 0.0;
      //@unroll j CN
      {
        let pp = exp2(sc[$i][$j] - msafe[$i]);
        pr[$i][$j] = pp;
        ps += pp;
      }
      //@end
      lsum[$i] = lsum[$i] * alpha[$i] + ps;
      //@unroll c DC
      acc[$i][$c] = acc[$i][$c] * alpha[$i];
      //@end
    }
    //@end
    //@unroll j CN
    Ps[(tx + $j * TC) * PS + ty] = vec4<f32>(pr[0][$j], pr[1][$j], pr[2][$j], pr[3][$j]);
    //@end
    workgroupBarrier();

    for (var j = 0u; j < BC; j++) {
      let pv = Ps[j * PS + ty];
      //@unroll c DC
      {
        let vv = KV[j * DS + tx + TC * $c];
        acc[0][$c] = fma(vec4<f32>(pv.x), vv, acc[0][$c]);
        acc[1][$c] = fma(vec4<f32>(pv.y), vv, acc[1][$c]);
        acc[2][$c] = fma(vec4<f32>(pv.z), vv, acc[2][$c]);
        acc[3][$c] = fma(vec4<f32>(pv.w), vv, acc[3][$c]);
      }
      //@end
    }
  }

  // Row sums: combine the TC partial sums of each row (reads of red in the loop ended before its last barrier).
  red[tx * PS + ty] = lsum;
  workgroupBarrier();
  var l = red[ty];
  for (var u = 1u; u < TC; u++) { l = l + red[u * PS + ty]; }
  let inv = select(vec4<f32>(1.0) / l, vec4<f32>(0.0), l == vec4<f32>(0.0));
  //@unroll i 4
  {
    let t = t0 + ty * 4u + $i;
    if (t < p.T) {
      let base = ((b * p.T + t) * p.Hq + h) * D;
      //@unroll c DC
      {
        let cc = tx + TC * $c;
        if (cc < DV) {
          let y = acc[$i][$c] * inv[$i];
          //@unroll e 4
          if (D % 4u == 0u || cc * 4u + $e < D) { o[base + cc * 4u + $e] = y[$e]; }
          //@end
        }
      }
      //@end
      if (tx == 0u) {
        // natural-log logsumexp of the scaled scores: (m + log2 l) * ln 2
        lse[(b * p.Hq + h) * p.T + t] = select((m[$i] + log2(l[$i])) * 0.6931471805599453, bitcast<f32>(NEG_INF_BITS), l[$i] == 0.0);
      }
    }
  }
  //@end
}
