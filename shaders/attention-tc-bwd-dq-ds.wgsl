// attention-tc-bwd-dq-ds: the dQ pass of the tensor-core attention backward when the dK/dV pass stored dS
// (attention-tc-bwd-dkdv.wgsl with WDS = 1): dQ = dS K as f16 x f16 -> f32 subgroup-matrix products over the key
// tiles a query block sees, reading dS instead of recomputing S = Q K^T, P and dP = dO V^T (two of the three
// products of attention-tc-bwd-dq.wgsl). dS is already multiplied by scale and rounded to f16 by the dK/dV pass,
// from the same f32 terms attention-tc-bwd-dq.wgsl rounds, so the two dQ passes differ only in summation order.
//   dQ[t, :] = sum_s dS[t, s] K[s, :]   over the keys s visible to query t
// Bindings: k read f16 [B, S, Hkv, D] (also read as vec4u k4 when VEC = 1, D % 8 == 0); ds read f16
//   [B, Hq, S, TP] with TP = T rounded up to 8 (row s of head h holds dS[t, s] for every query t; read as
//   vec4u ds4: 8 queries per load); dq_out rw f32 [B, T, Hq, D].
// dS entries of pairs no query-key rule lets see each other may never have been written (the dK/dV pass only
//   visits the query blocks its keys can see): tiles with such pairs are masked per element while staging, so
//   garbage never reaches a product.
// Params: T, S, Hq, Hkv, G, qOffset (i32), causal, window: the first eight of attention-tc-bwd-dq.wgsl's (the
//   rest unused here).
// Prepended by the wrapper (ops/attention/flash-tc.ts): aliases Lm, Rm, Acc of the adapter's fragment; the loads
//   ld_dst (left: dS as queries x keys, col_major from Ps, which holds keys x queries) and ld_k (right: K,
//   row_major from Ks); unit_k (8 halves of K from global memory).
// Scheme: NSG subgroups own SM query rows each (BR = NSG * SM); per key tile of BC keys (K and the BC x BR dS
//   tile staged as f16, the next tile's global loads issued one tile ahead), dQ += dS K in DP/SN accumulators
//   that live in registers for the whole pass; at the end they go through Ss to dq_out.
// Template: `const` lines and `//@unroll` blocks are rewritten by the wrapper (specialize in common.ts).
// Constants: D, DP (D padded to the fragment), BR, BC, NSG, SG, SM, SN, SK, TPR (= SG / SM); KSTR row stride
//   of Ks, PSTR of Ps (halves), SSTR of Ss (floats); NBK = BC/SK, NDN = DP/SN, OPT = DP/TPR output columns
//   per thread; NKU = ceil(BC*DP/8/NT) and NSU = ceil(BC*BR/8/NT) 8-half units of a K and a dS tile per thread.
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
const KSTR: u32 = 72u;
const PSTR: u32 = 72u;
const SSTR: u32 = 68u;
const NBK: u32 = 4u;
const NDN: u32 = 4u;
const OPT: u32 = 32u;
const NKU: u32 = 4u;
const NSU: u32 = 4u;
const VEC: u32 = 1u;

const NT: u32 = NSG * SG;

var<workgroup> Ks: array<f16, BC * KSTR>;
var<workgroup> Ps: array<f16, BC * PSTR>;
var<workgroup> Ss: array<f32, BR * SSTR>;

var<private> kreg: array<array<vec2<f16>, 4>, NKU>;
var<private> sreg: array<vec4u, NSU>;

fn put_ks(o: u32, x: array<vec2<f16>, 4>) {
  //@unroll j 4
  Ks[o + 2u * $j] = x[$j].x;
  Ks[o + 2u * $j + 1u] = x[$j].y;
  //@end
}

// K rows s1 .. s1 + BC - 1 of kv head kh and dS of q head h for those keys and queries t0 .. t0 + BR - 1 into
// registers (zero past S, T and D).
fn fetch(s1: u32, t0: u32, b: u32, h: u32, kh: u32, TP: u32, lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    let row = e / (DP / 8u);
    let c = (e % (DP / 8u)) * 8u;
    var n = 0u;
    if (e < BC * (DP / 8u) && s1 + row < p.S && c < D) { n = D - c; }
    kreg[$u] = unit_k(((b * p.S + s1 + row) * p.Hkv + kh) * D + c, n);
  }
  //@end
  //@unroll u NSU
  {
    let e = lid + $u * NT;
    let row = e / (BR / 8u);
    let c = (e % (BR / 8u)) * 8u;
    var w = vec4u();
    if (e < BC * (BR / 8u) && s1 + row < p.S && t0 + c < p.T) { w = ds4[(((b * p.Hq + h) * p.S + s1 + row) * TP + t0 + c) >> 3u]; }
    sreg[$u] = w;
  }
  //@end
}

// The fetched tile into Ks and Ps; with `edge`, pairs the mask rule hides are zeroed (they may be unwritten).
fn stash(s1: u32, qa: i32, edge: bool, am: AttnMask, lid: u32) {
  //@unroll u NKU
  {
    let e = lid + $u * NT;
    if (e < BC * (DP / 8u)) { put_ks((e / (DP / 8u)) * KSTR + (e % (DP / 8u)) * 8u, kreg[$u]); }
  }
  //@end
  //@unroll u NSU
  {
    let e = lid + $u * NT;
    if (e < BC * (BR / 8u)) {
      let row = e / (BR / 8u);
      let c = (e % (BR / 8u)) * 8u;
      let w = sreg[$u];
      let x = array<vec2<f16>, 4>(bitcast<vec2<f16>>(w.x), bitcast<vec2<f16>>(w.y), bitcast<vec2<f16>>(w.z), bitcast<vec2<f16>>(w.w));
      let o = row * PSTR + c;
      //@unroll j 8
      {
        var y = x[$j / 2u][$j % 2u];
        if (edge && !attn_visible(am, qa + i32(c + $j), i32(s1 + row))) { y = 0.0h; }
        Ps[o + $j] = y;
      }
      //@end
    }
  }
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
  let TP = (p.T + 7u) & ~7u;

  let am = attn_mask(p.causal, p.window);
  let qa = p.qOffset + i32(t0);
  let kt = attn_key_tiles(am, p.qOffset, t0, BR, p.T, p.S, BC);

  var zacc: Acc;
  //@unroll n NDN
  var g$n = zacc;
  //@end

  if (kt.y > kt.x) { fetch(kt.x * BC, t0, b, h, kh, TP, lid); }
  for (var j = kt.x; j < kt.y; j++) {
    let s0 = j * BC;
    workgroupBarrier();  // the previous tile's reads of Ks and Ps are done
    stash(s0, qa, !attn_all_visible(am, qa, qa + i32(BR) - 1, i32(s0), i32(s0 + BC) - 1), am, lid);
    workgroupBarrier();
    if (j + 1u < kt.y) { fetch(s0 + BC, t0, b, h, kh, TP, lid); }

    //@unroll n NDN
    //@unroll k NBK
    g$n = subgroupMatrixMultiplyAccumulate(ld_dst($k * SK * PSTR + rb), ld_k($k * SK * KSTR + $n * SN), g$n);
    //@end
    //@end
  }

  // dQ -> Ss rows of this subgroup -> dq_out (rows with no visible key get 0)
  workgroupBarrier();
  //@unroll n NDN
  subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $n * SN, g$n, SSTR);
  //@end
  workgroupBarrier();
  let t = t0 + r;
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
