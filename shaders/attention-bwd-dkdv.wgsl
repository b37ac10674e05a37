// attention-bwd-dkdv: FlashAttention-2 backward, the pass over K/V blocks. One workgroup owns BC keys of one
// kv head and loops over the q heads of its group (grouped-query attention) and over the query blocks that
// can see its keys, accumulating in registers (fixed order, no atomics):
//   P  = exp(S - lse)  (masked entries 0),  dP = dO V^T,  dS = P * (dP - delta) * S'
// with S = cap(scale * Q K^T) (cap(x) = softcap * tanh(x / softcap) with soft-capping, else x) and S' its
// derivative 1 - tanh^2 (1 without capping): attn_score of attention-mask.wgsl.
//   dV = sum P^T dO,   dK = scale * sum dS^T Q
// Bindings:
//   q     read f32|f16|bf16 [B, T, Hq, D]     k, v  read f32|f16|bf16 [B, S, Hkv, D]
//   dout  read f32|f16|bf16 [B, T, Hq, D]     lse   read f32 [B, Hq, T]      delta read f32 [B, Hq, T]
//   mask  read i32|u32 [B, S] (1 = keep; a 1-element dummy when hasMask = 0)
//   dk_out, dv_out rw f32 [B, S, Hkv, D]
// Params: T, S, Hq, Hkv, G (= Hq / Hkv), qOffset (i32), causal, window (0 = none), hasMask, scale,
//   scale2 (= scale * log2 e), capin (= scale / softcap), capmul (= softcap * log2 e; 0 = no soft-capping). Visibility by position: attn_visible of attention-mask.wgsl (prepended by the
//   wrapper); query blocks that see none of the workgroup's keys are skipped.
// Template: the wrapper rewrites the `const` lines and expands `//@unroll` blocks (see specialize in common.ts).
// Constants: D, DV = ceil(D / 4), DS (odd vec4 row stride), BC keys per workgroup,
//   BR queries per step, TK = BC / 4 key groups (a thread owns keys tk*4 .. tk*4+3), CQ queries per thread,
//   TQ = BR / CQ threads per key group (a thread owns queries tq + TQ*j, j < CQ, and output chunks
//   tq + TQ*c, c < DC),
//   DC = ceil(DV / TQ), PS = TK + 1 (stride of Ps/dSs in vec4), NT = TK * TQ, NQL = ceil(BR * DV / NT) vec4
//   chunks of a Q/dO block and NQM = ceil(BR / NT) rows of lse/delta that each thread loads.
// Software pipelining: the (q head, query block) steps are one loop, and the next step's Q, dO, lse and delta
// are loaded into registers while the current step is computed.
// Workgroup: NT threads; grid (ceil(S / BC), Hkv, B).
const D: u32 = 64u;
const DV: u32 = 16u;
const DS: u32 = 17u;
const BC: u32 = 32u;
const BR: u32 = 32u;
const TK: u32 = 8u;
const TQ: u32 = 8u;
const CQ: u32 = 4u;
const DC: u32 = 2u;
const PS: u32 = 9u;
const NT: u32 = 64u;
const NQL: u32 = 8u;
const NQM: u32 = 1u;

const LOG2E: f32 = 1.4426950408889634;

var<workgroup> Ks: array<vec4<f32>, BC * DS>;
var<workgroup> Vs: array<vec4<f32>, BC * DS>;
var<workgroup> Qs: array<vec4<f32>, BR * DS + TQ * DC>;
var<workgroup> dOs: array<vec4<f32>, BR * DS + TQ * DC>;
// P and dS, query-major: row r holds BC / 4 vec4 of keys.
var<workgroup> Ps: array<vec4<f32>, BR * PS>;
var<workgroup> dSs: array<vec4<f32>, BR * PS>;
var<workgroup> qL: array<f32, BR>;
var<workgroup> qD: array<f32, BR>;
var<workgroup> kok: array<u32, BC>;

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

fn ld_do(base: u32, c: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  //@unroll e 4
  if (D % 4u == 0u || c * 4u + $e < D) { x[$e] = read_dout(base + $e); }
  //@end
  return x;
}


fn dot4(a: f32, x: vec4<f32>, y: vec4<f32>) -> f32 {
  return fma(x.w, y.w, fma(x.z, y.z, fma(x.y, y.y, fma(x.x, y.x, a))));
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let kh = wid.y;
  let b = wid.z;
  let s0 = wid.x * BC;
  let tq = tid % TQ;
  let tk = tid / TQ;

  for (var e = tid; e < BC * DV; e += NT) {
    let j = e / DV;
    let c = e % DV;
    let s = s0 + j;
    var xk = vec4<f32>(0.0);
    var xv = vec4<f32>(0.0);
    if (s < p.S) {
      let base = ((b * p.S + s) * p.Hkv + kh) * D + c * 4u;
      xk = ld_k(base, c);
      xv = ld_v(base, c);
    }
    Ks[j * DS + c] = xk;
    Vs[j * DS + c] = xv;
  }
  for (var j = tid; j < BC; j += NT) {
    let s = s0 + j;
    var ok = s < p.S;
    if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + s) != 0; }
    kok[j] = select(0u, 1u, ok);
  }

  var dk: array<array<vec4<f32>, DC>, 4>;  // zero-initialised
  var dv: array<array<vec4<f32>, DC>, 4>;

  // Query blocks holding a row that sees one of this workgroup's keys.
  let am = attn_mask(p.causal, p.window);
  let qr = attn_query_range(am, p.qOffset, i32(s0), i32(min(s0 + BC, p.S)) - 1, p.T);
  let qb0 = qr.x / BR;
  let nqb = select(qb0, (qr.y + BR - 1u) / BR, qr.y > qr.x);
  let myKeys = vec4<i32>(i32(s0 + tk * 4u), i32(s0 + tk * 4u + 1u), i32(s0 + tk * 4u + 2u), i32(s0 + tk * 4u + 3u));

  let nq = select(0u, nqb - qb0, nqb > qb0);
  let nsteps = p.G * nq;
  var qreg: array<vec4<f32>, NQL>;
  var oreg: array<vec4<f32>, NQL>;
  var lreg: array<f32, NQM>;
  var dreg: array<f32, NQM>;
  for (var n = 0u; n <= nsteps; n++) {
    // Registers <- step n (q head kh * G + n / nq, query block qb0 + n % nq).
    if (n < nsteps) {
      let hn = kh * p.G + n / nq;
      let tn = (qb0 + n % nq) * BR;
      //@unroll u NQL
      {
        let e = tid + $u * NT;
        var xq = vec4<f32>(0.0);
        var xo = vec4<f32>(0.0);
        if (e < BR * DV && tn + e / DV < p.T) {
          let base = ((b * p.T + tn + e / DV) * p.Hq + hn) * D + (e % DV) * 4u;
          xq = ld_q(base, e % DV);
          xo = ld_do(base, e % DV);
        }
        qreg[$u] = xq;
        oreg[$u] = xo;
      }
      //@end
      //@unroll u NQM
      {
        let r = tid + $u * NT;
        var lv = 3.0e38;
        var dl = 0.0;
        if (r < BR && tn + r < p.T) {
          lv = lse[(b * p.Hq + hn) * p.T + tn + r] * LOG2E;
          dl = delta[(b * p.Hq + hn) * p.T + tn + r];
        }
        lreg[$u] = lv;
        dreg[$u] = dl;
      }
      //@end
    }
    // Compute step n - 1 from workgroup memory (written at the end of the previous iteration) while the loads
    // of step n are in flight.
    if (n > 0u) {
      let t0 = (qb0 + (n - 1u) % nq) * BR;
      // Transposed scores and dP: keys tk*4+i (rows), queries tq + TQ*j (columns).
      var st: array<array<f32, CQ>, 4>;
      var dpt: array<array<f32, CQ>, 4>;
      //@unroll i 4
      //@unroll j CQ
      st[$i][$j] = 0.0;  // explicit: a var in a loop body is not re-zeroed by every toolchain
      dpt[$i][$j] = 0.0;
      //@end
      //@end
      for (var c = 0u; c < DV; c++) {
        //@unroll j CQ
        let q$j = Qs[(tq + $j * TQ) * DS + c];
        let o$j = dOs[(tq + $j * TQ) * DS + c];
        //@end
        //@unroll i 4
        {
          let kk = Ks[(tk * 4u + $i) * DS + c];
          let vv = Vs[(tk * 4u + $i) * DS + c];
          //@unroll j CQ
          st[$i][$j] = dot4(st[$i][$j], kk, q$j);
          dpt[$i][$j] = dot4(dpt[$i][$j], vv, o$j);
          //@end
        }
        //@end
      }
      //@unroll j CQ
      {
        let col = tq + $j * TQ;
        let lq = qL[col];
        let dq = qD[col];
        let qpos = i32(t0 + col) + p.qOffset;
        var pv = vec4<f32>(0.0);
        var dsv = vec4<f32>(0.0);
        //@unroll i 4
        {
          let vis = kok[tk * 4u + $i] != 0u && attn_visible(am, qpos, myKeys[$i]);
          let sd = attn_score(st[$i][$j], p.scale2, p.capin, p.capmul);
          let pp = select(0.0, exp2(sd.x - lq), vis);
          pv[$i] = pp;
          dsv[$i] = pp * (dpt[$i][$j] - dq) * sd.y;
        }
        //@end
        Ps[col * PS + tk] = pv;
        dSs[col * PS + tk] = dsv;
      }
      //@end
      workgroupBarrier();

      for (var r = 0u; r < BR; r++) {
        let pv = Ps[r * PS + tk];
        let sv = dSs[r * PS + tk];
        //@unroll c DC
        {
          let ov = dOs[r * DS + tq + TQ * $c];
          let qv = Qs[r * DS + tq + TQ * $c];
          //@unroll i 4
          dv[$i][$c] = fma(vec4<f32>(pv[$i]), ov, dv[$i][$c]);
          dk[$i][$c] = fma(vec4<f32>(sv[$i]), qv, dk[$i][$c]);
          //@end
        }
        //@end
      }
    }
    // Registers of step n -> workgroup memory, for the next iteration.
    workgroupBarrier();
    //@unroll u NQL
    {
      let e = tid + $u * NT;
      if (e < BR * DV) {
        Qs[(e / DV) * DS + e % DV] = qreg[$u];
        dOs[(e / DV) * DS + e % DV] = oreg[$u];
      }
    }
    //@end
    //@unroll u NQM
    if (tid + $u * NT < BR) {
      qL[tid + $u * NT] = lreg[$u];
      qD[tid + $u * NT] = dreg[$u];
    }
    //@end
    workgroupBarrier();
  }

  //@unroll i 4
  {
    let s = s0 + tk * 4u + $i;
    if (s < p.S) {
      let base = ((b * p.S + s) * p.Hkv + kh) * D;
      //@unroll c DC
      {
        let cc = tq + TQ * $c;
        if (cc < DV) {
          let yk = dk[$i][$c] * p.scale;
          let yv = dv[$i][$c];
          //@unroll e 4
          if (D % 4u == 0u || cc * 4u + $e < D) {
            dk_out[base + cc * 4u + $e] = yk[$e];
            dv_out[base + cc * 4u + $e] = yv[$e];
          }
          //@end
        }
      }
      //@end
    }
  }
  //@end
}
