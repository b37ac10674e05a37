// attention-tc-fwd: fused attention forward on tensor cores (subgroup matrices): the FlashAttention-2 forward of
// attention-fwd.wgsl with S = Q K^T and O += P V as f16 x f16 -> f32 subgroup-matrix products. Softmax
// statistics (row max, row sum, lse) and the output accumulators stay f32; P is rounded to f16 for the P V
// product (as FlashAttention does).
//   o[b, t, h, :] = sum_s softmax_s(cap(scale * q[b,t,h,:] . k[b,s,kh,:]) + mask) v[b,s,kh,:],  kh = h / G
//   lse[b, h, t]  = log sum_s exp(cap(scale * q . k))  over visible keys (natural log; -inf for a row with none)
// Bindings (row-major, contiguous): q read f16 [B, T, Hq, D]; k, v read f16 [B, S, Hkv, D];
//   mask read i32|u32 [B, S] (1 = keep; a 1-element dummy when hasMask = 0); o rw f32 [B, T, Hq, D];
//   lse rw f32 [B, Hq, T]. With VEC = 1 (D % 8 == 0) q, k, v are also read as vec4u (q4, k4, v4: 8 halves).
// Params: as attention-fwd.wgsl: T, S, Hq, Hkv, G, qOffset (i32), causal, window (0 = none), hasMask, scale2
//   (multiplies the raw dot product: scale * log2 e, or scale / softcap with soft-capping), capmul.
// Visibility and soft-capping: attention-mask.wgsl (prepended). Key tiles no row of the workgroup sees are skipped.
// Prepended by the wrapper (ops/attention/flash-tc.ts): the subgroup-matrix aliases Lm (left, SM x SK), Rm
//   (right, SK x SN), Acc (result f32, SM x SN) and the loads ld_q, ld_kt, ld_p, ld_v (subgroupMatrixLoad from Ks,
//   Ps, Vs), and the 8-half unit loaders unit_q / unit_k / unit_v. The fragment SM x SN x SK and the subgroup size
//   SG come from the adapter's reported configuration, never a constant of this file.
// Scheme: NSG subgroups; subgroup sg owns query rows [sg*SM, sg*SM + SM) of the BR = NSG*SM rows: Q is staged
//   through Ks once and kept in registers as DP/SK left matrices. Per key tile of BC keys (K, V staged in
//   workgroup memory as f16, the next tile's global loads issued one tile ahead): S = Q K^T (BC/SN
//   accumulators) -> Ss (f32); each thread owns one row r and the columns j*TPR + cp (TPR = SG / SM threads per
//   row, row max reduced by subgroup shuffles) and does the online softmax in f32, writing P (f16) to Ps and
//   rescaling its f32 output registers (the same columns of D); then P V (DP/SN accumulators) -> Ss and every
//   thread adds its part. Thread v = sg * SG + lane (subgroup builtins: every subgroup-matrix argument must be
//   subgroup-uniform, which Tint proves only for values derived from subgroup_id).
// Template: the wrapper rewrites the `const` lines and expands `//@unroll` blocks (specialize in common.ts).
// Constants: D head dim; DP = D padded to the fragment (zero columns); BR, BC; NSG subgroups; SG subgroup size;
//   SM, SN, SK fragment; TPR threads per row, LTPR = log2 TPR; KROWS = max(BR, BC) rows of Ks; KSTR row stride
//   of Ks/Vs (halves), PSTR of Ps (halves), SSTR of Ss (floats); NDK = DP/SK, NBN = BC/SN, NBK = BC/SK,
//   NDN = DP/SN; CPT = BC/TPR score and OPT = DP/TPR output columns per thread; NKU = ceil(BC*DP/8/NT) 8-half
//   units per thread of a K or V tile, NKM = ceil(BC/NT) key flags; VEC (1: 16-byte global loads).
// Workgroup: NT = NSG * SG threads; grid (ceil(T / BR), Hq, B).
const D: u32 = 64u;
const DP: u32 = 64u;
const BR: u32 = 64u;
const BC: u32 = 64u;
const NSG: u32 = 4u;
const SG: u32 = 32u;
const SM: u32 = 16u;
const SN: u32 = 16u;
const SK: u32 = 16u;
const TPR: u32 = 2u;
const LTPR: u32 = 1u;
const KROWS: u32 = 64u;
const KSTR: u32 = 72u;
const PSTR: u32 = 72u;
const SSTR: u32 = 68u;
const NDK: u32 = 4u;
const NBN: u32 = 4u;
const NBK: u32 = 4u;
const NDN: u32 = 4u;
const CPT: u32 = 32u;
const OPT: u32 = 32u;
const NKU: u32 = 4u;
const NKM: u32 = 1u;
const VEC: u32 = 1u;

const NT: u32 = NSG * SG;
const NEG: f32 = -1.0e30;
// -inf bits, read at run time (a constant -inf is not a valid WGSL value).
var<private> NEG_INF_BITS: u32 = 0xff800000u;

var<workgroup> Ks: array<f16, KROWS * KSTR>;
var<workgroup> Vs: array<f16, BC * KSTR>;
var<workgroup> Ps: array<f16, BR * PSTR>;
var<workgroup> Ss: array<f32, BR * SSTR>;
var<workgroup> kbias: array<f32, BC>;

// The next K / V tile and key flags, fetched one tile ahead.
var<private> kreg: array<array<vec2<f16>, 4>, NKU>;
var<private> vreg: array<array<vec2<f16>, 4>, NKU>;
var<private> mreg: array<f32, NKM>;

fn put_ks(o: u32, x: array<vec2<f16>, 4>) {
  //@unroll j 4
  Ks[o + 2u * $j] = x[$j].x;
  Ks[o + 2u * $j + 1u] = x[$j].y;
  //@end
}

fn put_vs(o: u32, x: array<vec2<f16>, 4>) {
  //@unroll j 4
  Vs[o + 2u * $j] = x[$j].x;
  Vs[o + 2u * $j + 1u] = x[$j].y;
  //@end
}

fn fetch_kv(s1: u32, b: u32, kh: u32, lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    let row = e / (DP / 8u);
    let c = (e % (DP / 8u)) * 8u;
    var n = 0u;
    if (e < BC * (DP / 8u) && s1 + row < p.S && c < D) { n = D - c; }
    let g = ((b * p.S + s1 + row) * p.Hkv + kh) * D + c;
    kreg[$u] = unit_k(g, n);
    vreg[$u] = unit_v(g, n);
  }
  //@end
  //@unroll u NKM
  {
    let j = s1 + lid + $u * NT;
    var ok = j < p.S;
    if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
    mreg[$u] = select(NEG, 0.0, ok);
  }
  //@end
}

fn stash_kv(lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    if (e < BC * (DP / 8u)) {
      let o = (e / (DP / 8u)) * KSTR + (e % (DP / 8u)) * 8u;
      put_ks(o, kreg[$u]);
      put_vs(o, vreg[$u]);
    }
  }
  //@end
  //@unroll u NKM
  if (lid + $u * NT < BC) { kbias[lid + $u * NT] = mreg[$u]; }
  //@end
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = wid.y;
  let b = wid.z;
  let kh = h / p.G;
  let t0 = (nwg.x - 1u - wid.x) * BR;  // last row blocks (the most keys under causal masking) first
  let vt = sg * SG + lane;
  let r = vt / TPR;
  let cp = vt % TPR;
  let rb = sg * SM;

  // Q tile -> Ks (zero rows past T, zero columns past D), then into registers as left matrices.
  for (var u = lid; u < BR * (DP / 8u); u += NT) {
    let row = u / (DP / 8u);
    let c = (u % (DP / 8u)) * 8u;
    var n = 0u;
    if (t0 + row < p.T && c < D) { n = D - c; }
    put_ks(row * KSTR + c, unit_q(((b * p.T + t0 + row) * p.Hq + h) * D + c, n));
  }
  workgroupBarrier();
  //@unroll i NDK
  let q$i = ld_q(rb * KSTR + $i * SK);
  //@end

  let am = attn_mask(p.causal, p.window);
  let qa = p.qOffset + i32(t0);
  let kt = attn_key_tiles(am, p.qOffset, t0, BR, p.T, p.S, BC);
  let kt0 = kt.x;
  let nTiles = kt.y;

  var zacc: Acc;  // zero: the first accumulator of every product
  var m = NEG;
  var l = 0.0;
  var acc: array<f32, OPT>;  // row r, columns j * TPR + cp of D
  //@unroll j OPT
  acc[$j] = 0.0;
  //@end

  fetch_kv(kt0 * BC, b, kh, lid);
  for (var kt = kt0; kt < nTiles; kt++) {
    let s0 = kt * BC;
    workgroupBarrier();  // the previous tile's reads of Ks, Vs and Ss (or the Q loads) are done
    stash_kv(lid);
    workgroupBarrier();
    if (kt + 1u < nTiles) { fetch_kv(s0 + BC, b, kh, lid); }

    // S = Q K^T for this subgroup's rows -> Ss
    //@unroll j NBN
    {
      var s$j = zacc;
      //@unroll i NDK
      s$j = subgroupMatrixMultiplyAccumulate(q$i, ld_kt($j * SN * KSTR + $i * SK), s$j);
      //@end
      subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $j * SN, s$j, SSTR);
    }
    //@end
    workgroupBarrier();

    // Online softmax of row r over this tile (f32), P -> Ps as f16.
    let edge = !attn_all_visible(am, qa, qa + i32(BR) - 1, i32(s0), i32(s0 + BC) - 1);
    let qpos = qa + i32(r);
    var x: array<f32, CPT>;
    var mx = NEG;
    //@unroll j CPT
    {
      let c = $j * TPR + cp;
      var y = attn_cap(Ss[r * SSTR + c] * p.scale2, p.capmul) + kbias[c];
      if (edge && !attn_visible(am, qpos, i32(s0 + c))) { y = NEG; }
      x[$j] = y;
      mx = max(mx, y);
    }
    //@end
    //@unroll z LTPR
    mx = max(mx, subgroupShuffleXor(mx, 1u << $z));
    //@end
    let mnew = max(m, mx);
    let msafe = select(mnew, 0.0, mnew == NEG);
    let alpha = exp2(m - msafe);
    m = mnew;
    var ps = 0.0;
    //@unroll j CPT
    {
      let pp = exp2(x[$j] - msafe);
      ps += pp;
      Ps[r * PSTR + $j * TPR + cp] = f16(pp);
    }
    //@end
    l = l * alpha + ps;
    //@unroll j OPT
    acc[$j] = acc[$j] * alpha;
    //@end
    workgroupBarrier();

    // P V for this subgroup's rows -> Ss, then every thread adds its part.
    //@unroll n NDN
    {
      var a$n = zacc;
      //@unroll k NBK
      a$n = subgroupMatrixMultiplyAccumulate(ld_p(rb * PSTR + $k * SK), ld_v($k * SK * KSTR + $n * SN), a$n);
      //@end
      subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $n * SN, a$n, SSTR);
    }
    //@end
    workgroupBarrier();
    //@unroll j OPT
    acc[$j] += Ss[r * SSTR + $j * TPR + cp];
    //@end
  }

  var lt = l;
  //@unroll z LTPR
  lt += subgroupShuffleXor(lt, 1u << $z);
  //@end
  let inv = select(1.0 / lt, 0.0, lt == 0.0);
  let t = t0 + r;
  if (t < p.T) {
    let base = ((b * p.T + t) * p.Hq + h) * D;
    //@unroll j OPT
    {
      let c = $j * TPR + cp;
      if (c < D) { o[base + c] = acc[$j] * inv; }
    }
    //@end
    if (cp == 0u) {
      // natural-log logsumexp of the scaled scores: (m + log2 l) * ln 2
      lse[(b * p.Hq + h) * p.T + t] = select((m + log2(lt)) * 0.6931471805599453, bitcast<f32>(NEG_INF_BITS), lt == 0.0);
    }
  }
}
