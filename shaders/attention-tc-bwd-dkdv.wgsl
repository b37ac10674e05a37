// attention-tc-bwd-dkdv: FlashAttention-2 backward, the pass over K/V blocks, on tensor cores (subgroup
// matrices): attention-bwd-dkdv.wgsl with S^T = K Q^T, dP^T = V dO^T, dV += P^T dO and dK += dS^T Q as
// f16 x f16 -> f32 subgroup-matrix products. P, dS and lse / delta are f32; P and dS (times scale) are rounded to
// f16 for the two updates. One workgroup owns BC keys of one kv head and loops over the q heads of its group
// (grouped-query attention) and the query blocks that can see its keys (fixed order, no atomics):
//   P = exp(S - lse) (masked 0), dP = dO V^T, dS = P * (dP - delta) * S', dV = sum P^T dO, dK = scale * sum dS^T Q
// Bindings: q read f16 [B, T, Hq, D]; k, v read f16 [B, S, Hkv, D]; dout read f16|f32|bf16 [B, T, Hq, D];
//   lse, delta read f32 [B, Hq, T]; mask read i32|u32 [B, S] (1 = keep; a dummy when hasMask = 0);
//   dk_out, dv_out rw f32 [B, S, Hkv, D]. VEC / VECD: 16-byte loads as in attention-tc-bwd-dq.wgsl.
//   With WDS = 1 also ds rw f16 [B, Hq, S, TP] (TP = T rounded up to 8), written through a vec4u view ds4: each
//   step's dS^T tile (scaled, f16, exactly what dK += dS^T Q reads) for attention-tc-bwd-dq.wgsl with DS = 1,
//   which then computes dQ = dS K without recomputing S and dP (the backward order is then delta, this pass, dQ).
// Params: as attention-bwd-dkdv.wgsl (T, S, Hq, Hkv, G, qOffset, causal, window, hasMask, scale, scale2, capin,
//   capmul).
// Prepended by the wrapper (ops/attention/flash-tc.ts): aliases Lm, Rm, Acc of the adapter's fragment and the
//   loads ld_kl (left: K or V rows, staged through Qs), ld_qt, ld_dot (right: Q^T, dO^T, col_major from Qs /
//   dOs), ld_pds (left: P^T or dS^T from PdS), ld_do, ld_q (right: dO, Q row_major), and
//   unit_q / unit_k / unit_v / unit_do.
// Scheme: NSG subgroups own SM keys each (BC = NSG * SM), K and V (staged one after the other through Qs) kept in
//   registers as left matrices, dK and dV in DP/SN accumulators each for the whole pass. Per step (q head, block
//   of BR queries; the next step's Q, dO, lse, delta fetched one step ahead): S^T -> Ss; each thread (key row r,
//   query columns j*TPR + cp) keeps P in registers and writes it to PdS (f16); dV += P^T dO and dP^T -> Ss;
//   dS^T * scale -> PdS (the same rows: each subgroup reads only its own); dK += dS^T Q.
// Template: `const` lines and `//@unroll` blocks are rewritten by the wrapper (specialize in common.ts).
// Constants: D, DP, BC, BR, NSG, SG, SM, SN, SK, TPR (= SG / SM); QROWS = max(BR, BC) rows of Qs (BR of dOs);
//   QSTR row stride of Qs / dOs, PSTR of PdS (halves), SSTR of Ss (floats); NDK = DP/SK, NBN = BR/SN,
//   NBK = BR/SK, NDN = DP/SN; CPT = BR/TPR, OPT = DP/TPR; NQU = ceil(BR*DP/8/NT) units of a Q or dO block per
//   thread, NQM = ceil(BR/NT) rows of lse / delta per thread; WDS (1: store dS, see Bindings).
// Workgroup: NT = NSG * SG threads; grid (ceil(S / BC), Hkv, B).
const D: u32 = 64u;
const DP: u32 = 64u;
const BC: u32 = 64u;
const BR: u32 = 32u;
const NSG: u32 = 4u;
const SG: u32 = 32u;
const SM: u32 = 16u;
const SN: u32 = 16u;
const SK: u32 = 16u;
const TPR: u32 = 2u;
const QROWS: u32 = 64u;
const QSTR: u32 = 72u;
const PSTR: u32 = 40u;
const SSTR: u32 = 68u;
const NDK: u32 = 4u;
const NBN: u32 = 2u;
const NBK: u32 = 2u;
const NDN: u32 = 4u;
const CPT: u32 = 16u;
const OPT: u32 = 32u;
const NQU: u32 = 2u;
const NQM: u32 = 1u;
const VEC: u32 = 1u;
const VECD: u32 = 1u;
const WDS: u32 = 0u;

const NT: u32 = NSG * SG;
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> Qs: array<f16, QROWS * QSTR>;
var<workgroup> dOs: array<f16, BR * QSTR>;
var<workgroup> PdS: array<f16, BC * PSTR>;
var<workgroup> Ss: array<f32, BC * SSTR>;
var<workgroup> qL: array<f32, BR>;
var<workgroup> qD: array<f32, BR>;

var<private> qreg: array<array<vec2<f16>, 4>, NQU>;
var<private> oreg: array<array<vec2<f16>, 4>, NQU>;
var<private> lreg: array<f32, NQM>;
var<private> dreg: array<f32, NQM>;

fn put_qs(o: u32, x: array<vec2<f16>, 4>) {
  //@unroll j 4
  Qs[o + 2u * $j] = x[$j].x;
  Qs[o + 2u * $j + 1u] = x[$j].y;
  //@end
}

fn put_dos(o: u32, x: array<vec2<f16>, 4>) {
  //@unroll j 4
  dOs[o + 2u * $j] = x[$j].x;
  dOs[o + 2u * $j + 1u] = x[$j].y;
  //@end
}

// Q, dO, lse (log2 units) and delta of q head hn, queries tn .. tn + BR - 1 into registers.
fn fetch_q(hn: u32, tn: u32, b: u32, lid: u32) {
  //@unroll u NQU
  {
    let e = lid + $u * NT;
    let row = e / (DP / 8u);
    let c = (e % (DP / 8u)) * 8u;
    var n = 0u;
    if (e < BR * (DP / 8u) && tn + row < p.T && c < D) { n = D - c; }
    let g = ((b * p.T + tn + row) * p.Hq + hn) * D + c;
    qreg[$u] = unit_q(g, n);
    oreg[$u] = unit_do(g, n);
  }
  //@end
  //@unroll u NQM
  {
    let rr = lid + $u * NT;
    var lv = 3.0e38;  // queries past T: P = 0
    var dl = 0.0;
    if (rr < BR && tn + rr < p.T) {
      lv = lse[(b * p.Hq + hn) * p.T + tn + rr] * LOG2E;
      dl = delta[(b * p.Hq + hn) * p.T + tn + rr];
    }
    lreg[$u] = lv;
    dreg[$u] = dl;
  }
  //@end
}

fn stash_q(lid: u32) {
  //@unroll u NQU
  {
    let e = lid + $u * NT;
    if (e < BR * (DP / 8u)) {
      let o = (e / (DP / 8u)) * QSTR + (e % (DP / 8u)) * 8u;
      put_qs(o, qreg[$u]);
      put_dos(o, oreg[$u]);
    }
  }
  //@end
  //@unroll u NQM
  if (lid + $u * NT < BR) {
    qL[lid + $u * NT] = lreg[$u];
    qD[lid + $u * NT] = dreg[$u];
  }
  //@end
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let kh = wid.y;
  let b = wid.z;
  let s0 = wid.x * BC;
  let vt = sg * SG + lane;
  let r = vt / TPR;
  let cp = vt % TPR;
  let rb = sg * SM;

  // K, then V -> Qs (zero rows past S, zero columns past D), each into registers as left matrices.
  for (var u = lid; u < BC * (DP / 8u); u += NT) {
    let row = u / (DP / 8u);
    let c = (u % (DP / 8u)) * 8u;
    var n = 0u;
    if (s0 + row < p.S && c < D) { n = D - c; }
    put_qs(row * QSTR + c, unit_k(((b * p.S + s0 + row) * p.Hkv + kh) * D + c, n));
  }
  workgroupBarrier();
  //@unroll i NDK
  let k$i = ld_kl(rb * QSTR + $i * SK);
  //@end
  workgroupBarrier();
  for (var u = lid; u < BC * (DP / 8u); u += NT) {
    let row = u / (DP / 8u);
    let c = (u % (DP / 8u)) * 8u;
    var n = 0u;
    if (s0 + row < p.S && c < D) { n = D - c; }
    put_qs(row * QSTR + c, unit_v(((b * p.S + s0 + row) * p.Hkv + kh) * D + c, n));
  }
  workgroupBarrier();
  //@unroll i NDK
  let v$i = ld_kl(rb * QSTR + $i * SK);
  //@end

  // this thread's key: in range and not masked
  let s = s0 + r;
  var kvis = s < p.S;
  if (kvis && p.hasMask != 0u) { kvis = read_mask(b * p.S + s) != 0; }

  let am = attn_mask(p.causal, p.window);
  let qr = attn_query_range(am, p.qOffset, i32(s0), i32(min(s0 + BC, p.S)) - 1, p.T);
  let qb0 = qr.x / BR;
  let nqb = select(qb0, (qr.y + BR - 1u) / BR, qr.y > qr.x);
  let nq = select(0u, nqb - qb0, nqb > qb0);
  let nsteps = p.G * nq;

  var zacc: Acc;
  //@unroll n NDN
  var dk$n = zacc;
  var dv$n = zacc;
  //@end

  if (nsteps > 0u) { fetch_q(kh * p.G, qb0 * BR, b, lid); }
  for (var st = 0u; st < nsteps; st++) {
    let t0 = (qb0 + st % nq) * BR;
    workgroupBarrier();  // the previous step's reads of Qs, dOs, PdS (or the K / V loads) are done
    stash_q(lid);
    workgroupBarrier();
    if (st + 1u < nsteps) { fetch_q(kh * p.G + (st + 1u) / nq, (qb0 + (st + 1u) % nq) * BR, b, lid); }

    // S^T = K Q^T (keys x queries) -> Ss
    //@unroll j NBN
    {
      var s$j = zacc;
      //@unroll i NDK
      s$j = subgroupMatrixMultiplyAccumulate(k$i, ld_qt($j * SN * QSTR + $i * SK), s$j);
      //@end
      subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $j * SN, s$j, SSTR);
    }
    //@end
    workgroupBarrier();

    let edge = !attn_all_visible(am, p.qOffset + i32(t0), p.qOffset + i32(t0 + BR) - 1, i32(s0), i32(s0 + BC) - 1);
    var pv: array<f32, CPT>;
    var cd: array<f32, CPT>;
    //@unroll j CPT
    {
      let c = $j * TPR + cp;
      let vis = kvis && (!edge || attn_visible(am, p.qOffset + i32(t0 + c), i32(s)));
      let sd = attn_score(Ss[r * SSTR + c], p.scale2, p.capin, p.capmul);
      let pp = select(0.0, exp2(sd.x - qL[c]), vis);
      pv[$j] = pp;
      cd[$j] = sd.y * p.scale;
      PdS[r * PSTR + c] = f16(pp);
    }
    //@end
    workgroupBarrier();

    // dV += P^T dO; dP^T = V dO^T -> Ss
    //@unroll n NDN
    //@unroll k NBK
    dv$n = subgroupMatrixMultiplyAccumulate(ld_pds(rb * PSTR + $k * SK), ld_do($k * SK * QSTR + $n * SN), dv$n);
    //@end
    //@end
    //@unroll j NBN
    {
      var d$j = zacc;
      //@unroll i NDK
      d$j = subgroupMatrixMultiplyAccumulate(v$i, ld_dot($j * SN * QSTR + $i * SK), d$j);
      //@end
      subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $j * SN, d$j, SSTR);
    }
    //@end
    workgroupBarrier();

    //@unroll j CPT
    {
      let c = $j * TPR + cp;
      PdS[r * PSTR + c] = f16(pv[$j] * (Ss[r * SSTR + c] - qD[c]) * cd[$j]);
    }
    //@end
    workgroupBarrier();

    // dS^T of q head kh * G + st / nq -> ds rows s0 .. s0 + BC - 1, queries t0 .. t0 + BR - 1 (8 per store)
    //@unroll w WDS
    {
      let hd = kh * p.G + st / nq;
      let TP = (p.T + 7u) & ~7u;
      for (var u = lid; u < BC * (BR / 8u); u += NT) {
        let row = u / (BR / 8u);
        let c = (u % (BR / 8u)) * 8u;
        if (s0 + row < p.S && t0 + c < p.T) {
          let o = row * PSTR + c;
          ds4[(((b * p.Hq + hd) * p.S + s0 + row) * TP + t0 + c) >> 3u] = vec4u(
            bitcast<u32>(vec2<f16>(PdS[o], PdS[o + 1u])), bitcast<u32>(vec2<f16>(PdS[o + 2u], PdS[o + 3u])),
            bitcast<u32>(vec2<f16>(PdS[o + 4u], PdS[o + 5u])), bitcast<u32>(vec2<f16>(PdS[o + 6u], PdS[o + 7u])));
        }
      }
    }
    //@end

    // dK += dS^T Q (already scaled)
    //@unroll n NDN
    //@unroll k NBK
    dk$n = subgroupMatrixMultiplyAccumulate(ld_pds(rb * PSTR + $k * SK), ld_q($k * SK * QSTR + $n * SN), dk$n);
    //@end
    //@end
  }

  // dK, then dV -> Ss rows of this subgroup -> dk_out / dv_out
  let base = ((b * p.S + s) * p.Hkv + kh) * D;
  workgroupBarrier();
  //@unroll n NDN
  subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $n * SN, dk$n, SSTR);
  //@end
  workgroupBarrier();
  if (s < p.S) {
    //@unroll j OPT
    {
      let c = $j * TPR + cp;
      if (c < D) { dk_out[base + c] = Ss[r * SSTR + c]; }
    }
    //@end
  }
  workgroupBarrier();
  //@unroll n NDN
  subgroupMatrixStore<row_major>(&Ss, rb * SSTR + $n * SN, dv$n, SSTR);
  //@end
  workgroupBarrier();
  if (s < p.S) {
    //@unroll j OPT
    {
      let c = $j * TPR + cp;
      if (c < D) { dv_out[base + c] = Ss[r * SSTR + c]; }
    }
    //@end
  }
}
