// attention-tc-bwd-dq: FlashAttention-2 backward, the pass over Q blocks, on tensor cores (subgroup matrices):
// attention-bwd-dq.wgsl with S = Q K^T, dP = dO V^T and dQ += dS K as f16 x f16 -> f32 subgroup-matrix
// products. P, dS and the statistics (lse, delta) are f32; dS (times scale) is rounded to f16 for dS K. It also
// computes the row term delta = rowsum(dO * O) (attention-bwd-pre.wgsl's job) and writes it for the dK/dV pass,
// which therefore runs after this one.
//   P = exp(S - lse) (masked entries 0),  dP = dO V^T,  dS = P * (dP - delta) * S',  dQ = scale * dS K
// with S = cap(scale * Q K^T) and S' its derivative (attn_score of attention-mask.wgsl).
// With DS = 1 (RC = 0) it reads dS instead: the dK/dV pass (attention-tc-bwd-dkdv.wgsl with WDS = 1) stored it,
// already scaled and rounded to f16 from the same f32 terms, so only dQ += dS K runs (S, P, dP and delta are not
// recomputed; the two modes differ only in summation order). Bindings then: k, ds read f16 [B, Hq, S, TP] (TP = T
// rounded up to 8; row s of head h holds dS[t, s] for every query t; read as vec4u ds4, 8 queries per load),
// dq_out; delta comes from attention-bwd-pre.wgsl. dS entries of pairs the mask rule hides may never have been
// written (the dK/dV pass only visits the query blocks its keys see): tiles with such pairs are masked per
// element while staging, so garbage never reaches a product.
// Bindings: q read f16 [B, T, Hq, D]; k, v read f16 [B, S, Hkv, D]; dout read f16|f32|bf16 [B, T, Hq, D];
//   lse read f32 [B, Hq, T]; mask read i32|u32 [B, S] (1 = keep; a dummy when hasMask = 0); out read
//   f32|f16|bf16 [B, T, Hq, D] (the forward's output); delta rw f32 [B, Hq, T]; dq_out rw f32 [B, T, Hq, D]. With VEC = 1 (D % 8 == 0) q, k, v are also read as vec4u (q4,
//   k4, v4), with VECD = 1 (f16 dout too) dout as dout4. unit_* / at_do read through those views.
// Params: T, S, Hq, Hkv, G, qOffset (i32), causal, window (0 = none), hasMask, scale, scale2 (= scale * log2 e),
//   capin (= scale / softcap), capmul (= softcap * log2 e; 0 = none): the params of attention-bwd-dq.wgsl.
// Prepended by the wrapper (ops/attention/flash-tc.ts): aliases Lm, Rm, Acc of the adapter's fragment
//   (SM x SN x SK), the loads ld_q, ld_do (left, from Ks / Vs where Q / dO are staged), ld_kt, ld_vt (right,
//   K^T / V^T: col_major from Ks / Vs), ld_ds (left, from Ps: row_major, or col_major with DS where Ps holds dS
//   as keys x queries), ld_k (right, from Ks), and unit_q / unit_k / unit_v / unit_do (8 halves from global
//   memory) and at_do (one element of dout as f32); with DS only ld_ds, ld_k, unit_k and the ds4 view.
// Scheme: as attention-tc-fwd.wgsl: NSG subgroups own SM query rows each (BR = NSG * SM), Q and dO kept in
//   registers as left matrices; per key tile (K, V staged as f16, next tile fetched one tile ahead): S -> Ss,
//   each thread turns its row's columns into P (kept in registers), then dP -> Ss, dS * scale -> Ps (f16),
//   dQ += dS K in DP/SN accumulators that live in registers for the whole pass; at the end they go through
//   Ss to dq_out.
// Template: `const` lines and `//@unroll` blocks are rewritten by the wrapper (specialize in common.ts).
// Constants: as attention-tc-fwd.wgsl (LTPR = log2 TPR); KROWS = max(BR, BC) rows of Ks and Vs; CPT = BC / TPR,
//   OPT = DP / TPR; DS and RC = 1 - DS (unroll counts of the two modes' blocks); PROWS rows of Ps (BR, or BC
//   with DS); NSU = ceil(BC * BR / 8 / NT) 8-half units of a dS tile per thread (DS).
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
const VECD: u32 = 1u;
const DS: u32 = 0u;
const RC: u32 = 1u;
const PROWS: u32 = 64u;
const NSU: u32 = 4u;

const NT: u32 = NSG * SG;
const NEG: f32 = -1.0e30;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> Ks: array<f16, KROWS * KSTR>;
var<workgroup> Vs: array<f16, KROWS * KSTR>;
var<workgroup> Ps: array<f16, PROWS * PSTR>;
var<workgroup> Ss: array<f32, BR * SSTR>;
var<workgroup> kbias: array<f32, BC>;

var<private> kreg: array<array<vec2<f16>, 4>, NKU>;
var<private> vreg: array<array<vec2<f16>, 4>, NKU>;
var<private> mreg: array<f32, NKM>;
//@unroll z DS
var<private> sreg: array<vec4u, NSU>;
//@end

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

// K (and V) rows s1 .. s1 + BC - 1 of kv head kh into registers (zero past S and D), with RC the key flags, with
// DS the dS tile of q head h for those keys and queries t0 .. t0 + BR - 1 (zero past S and T).
fn fetch_kv(s1: u32, b: u32, kh: u32, h: u32, t0: u32, lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    let row = e / (DP / 8u);
    let c = (e % (DP / 8u)) * 8u;
    var n = 0u;
    if (e < BC * (DP / 8u) && s1 + row < p.S && c < D) { n = D - c; }
    let g = ((b * p.S + s1 + row) * p.Hkv + kh) * D + c;
    kreg[$u] = unit_k(g, n);
    //@unroll z RC
    vreg[$u] = unit_v(g, n);
    //@end
  }
  //@end
  //@unroll z DS
  //@unroll u NSU
  {
    let e = lid + $u * NT;
    let row = e / (BR / 8u);
    let c = (e % (BR / 8u)) * 8u;
    var w = vec4u();
    if (e < BC * (BR / 8u) && s1 + row < p.S && t0 + c < p.T) { w = ds4[(((b * p.Hq + h) * p.S + s1 + row) * ((p.T + 7u) & ~7u) + t0 + c) >> 3u]; }
    sreg[$u] = w;
  }
  //@end
  //@end
  //@unroll z RC
  //@unroll u NKM
  {
    let j = s1 + lid + $u * NT;
    var ok = j < p.S;
    if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
    mreg[$u] = select(NEG, 0.0, ok);
  }
  //@end
  //@end
}

// The fetched tile into Ks (Vs, kbias; with DS Ps, where pairs the mask rule hides are zeroed on `edge` tiles:
// they may be unwritten).
fn stash_kv(s1: u32, qa: i32, edge: bool, am: AttnMask, lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    if (e < BC * (DP / 8u)) {
      let o = (e / (DP / 8u)) * KSTR + (e % (DP / 8u)) * 8u;
      put_ks(o, kreg[$u]);
      //@unroll z RC
      put_vs(o, vreg[$u]);
      //@end
    }
  }
  //@end
  //@unroll z RC
  //@unroll u NKM
  if (lid + $u * NT < BC) { kbias[lid + $u * NT] = mreg[$u]; }
  //@end
  //@end
  //@unroll z DS
  //@unroll u NSU
  {
    let e = lid + $u * NT;
    if (e < BC * (BR / 8u)) {
      let row = e / (BR / 8u);
      let c = (e % (BR / 8u)) * 8u;
      let w = sreg[$u];
      let x = array<vec2<f16>, 4>(bitcast<vec2<f16>>(w.x), bitcast<vec2<f16>>(w.y), bitcast<vec2<f16>>(w.z), bitcast<vec2<f16>>(w.w));
      //@unroll j 8
      {
        var y = x[$j / 2u][$j % 2u];
        if (edge && !attn_visible(am, qa + i32(c + $j), i32(s1 + row))) { y = 0.0h; }
        Ps[row * PSTR + c + $j] = y;
      }
      //@end
    }
  }
  //@end
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
  let t = t0 + r;

  //@unroll z RC
  // Q -> Ks and dO -> Vs (zero rows past T, zero columns past D), then into registers as left matrices.
  for (var u = lid; u < BR * (DP / 8u); u += NT) {
    let row = u / (DP / 8u);
    let c = (u % (DP / 8u)) * 8u;
    var n = 0u;
    if (t0 + row < p.T && c < D) { n = D - c; }
    let g = ((b * p.T + t0 + row) * p.Hq + h) * D + c;
    put_ks(row * KSTR + c, unit_q(g, n));
    put_vs(row * KSTR + c, unit_do(g, n));
  }
  workgroupBarrier();
  //@unroll i NDK
  let q$i = ld_q(rb * KSTR + $i * SK);
  let o$i = ld_do(rb * KSTR + $i * SK);
  //@end

  // delta of row t = rowsum(dO * O) from the stored values (f32), summed by the TPR threads of the row in a fixed
  // order, and written for the dK/dV pass
  var lrow = 3.0e38;  // rows past T: P = 0
  var drow = 0.0;
  if (t < p.T) {
    let base = ((b * p.T + t) * p.Hq + h) * D;
    for (var d = cp; d < D; d += TPR) { drow = fma(at_do(base + d), read_out(base + d), drow); }
  }
  //@unroll z LTPR
  drow += subgroupShuffleXor(drow, 1u << $z);
  //@end
  if (t < p.T) {
    lrow = lse[(b * p.Hq + h) * p.T + t] * LOG2E;
    if (cp == 0u) { delta[(b * p.Hq + h) * p.T + t] = drow; }
  }
  //@end

  let am = attn_mask(p.causal, p.window);
  let qa = p.qOffset + i32(t0);
  let kt = attn_key_tiles(am, p.qOffset, t0, BR, p.T, p.S, BC);
  let kt0 = kt.x;
  let nTiles = kt.y;

  var zacc: Acc;
  //@unroll n NDN
  var g$n = zacc;
  //@end

  if (nTiles > kt0) { fetch_kv(kt0 * BC, b, kh, h, t0, lid); }
  for (var kt = kt0; kt < nTiles; kt++) {
    let s0 = kt * BC;
    let edge = !attn_all_visible(am, qa, qa + i32(BR) - 1, i32(s0), i32(s0 + BC) - 1);
    workgroupBarrier();
    stash_kv(s0, qa, edge, am, lid);
    workgroupBarrier();
    if (kt + 1u < nTiles) { fetch_kv(s0 + BC, b, kh, h, t0, lid); }

    //@unroll z RC
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

    let qpos = qa + i32(r);
    var pv: array<f32, CPT>;
    var cd: array<f32, CPT>;
    //@unroll j CPT
    {
      let c = $j * TPR + cp;
      let vis = kbias[c] == 0.0 && (!edge || attn_visible(am, qpos, i32(s0 + c)));
      let sd = attn_score(Ss[r * SSTR + c], p.scale2, p.capin, p.capmul);
      pv[$j] = select(0.0, exp2(sd.x - lrow), vis);
      cd[$j] = sd.y * p.scale;
    }
    //@end
    workgroupBarrier();

    //@unroll j NBN
    {
      var d$j = zacc;
      //@unroll i NDK
      d$j = subgroupMatrixMultiplyAccumulate(o$i, ld_vt($j * SN * KSTR + $i * SK), d$j);
      //@end
      subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $j * SN, d$j, SSTR);
    }
    //@end
    workgroupBarrier();

    //@unroll j CPT
    {
      let c = $j * TPR + cp;
      Ps[r * PSTR + c] = f16(pv[$j] * (Ss[r * SSTR + c] - drow) * cd[$j]);
    }
    //@end
    workgroupBarrier();
    //@end

    // dQ += dS K (dS in Ps: queries x keys, or keys x queries with DS)
    //@unroll n NDN
    //@unroll k NBK
    g$n = subgroupMatrixMultiplyAccumulate(ld_ds(select(rb * PSTR + $k * SK, $k * SK * PSTR + rb, DS == 1u)), ld_k($k * SK * KSTR + $n * SN), g$n);
    //@end
    //@end
  }

  // dQ (already scaled) -> Ss rows of this subgroup -> dq_out
  workgroupBarrier();
  //@unroll n NDN
  subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $n * SN, g$n, SSTR);
  //@end
  workgroupBarrier();
  if (t < p.T) {
    let base = ((b * p.T + t) * p.Hq + h) * D;
    //@unroll j OPT
    {
      let c = $j * TPR + cp;
      if (c < D) { dq_out[base + c] = Ss[r * SSTR + c]; }
    }
    //@end
  }
}
