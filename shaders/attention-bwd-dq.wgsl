// attention-bwd-dq: FlashAttention-2 backward, the pass over Q blocks. One workgroup owns BR query rows of one
// head and loops over the key blocks they can see (fixed order, no atomics):
//   P = exp(S - lse) (masked entries 0),  dP = dO V^T,  dS = P * (dP - delta) * S',  dQ = scale * dS K
// with S = cap(scale * Q K^T) (cap(x) = softcap * tanh(x / softcap) with soft-capping, else x) and S' its
// derivative 1 - tanh^2 (1 without capping): attn_score of attention-mask.wgsl.
// Bindings:
//   q     read f32|f16|bf16 [B, T, Hq, D]     k, v  read f32|f16|bf16 [B, S, Hkv, D]
//   dout  read f32|f16|bf16 [B, T, Hq, D]     lse   read f32 [B, Hq, T]      delta read f32 [B, Hq, T]
//   mask  read i32|u32 [B, S] (1 = keep; a 1-element dummy when hasMask = 0)
//   dq_out rw f32 [B, T, Hq, D]
// Params: T, S, Hq, Hkv, G (= Hq / Hkv), qOffset (i32), causal, window (0 = none), hasMask, scale,
//   scale2 (= scale * log2 e), capin (= scale / softcap), capmul (= softcap * log2 e; 0 = no soft-capping). Visibility by position: attn_visible of attention-mask.wgsl (prepended by the
//   wrapper); key blocks that none of the workgroup's rows sees are skipped.
// Template: the wrapper rewrites the `const` lines and expands `//@unroll` blocks (see specialize in common.ts).
// Constants: D, DV = ceil(D / 4), DS (odd vec4 row stride), BR query rows per
//   workgroup, BC keys per step, TR = BR / 4 row groups (a thread owns rows ty*4 .. ty*4+3), CK keys per
//   thread, TC = BC / CK threads per row group (a thread owns keys tx + TC*j, j < CK, and output chunks
//   tx + TC*c, c < DC),
//   DC = ceil(DV / TC), PS = TR + 1 (stride of dSs in vec4), NT = TR * TC, NKL = ceil(BC * DV / NT) vec4
//   chunks of a K/V block and NKM = ceil(BC / NT) key flags that each thread loads.
// Software pipelining: the next K/V block is loaded into registers while the current one is computed.
// Workgroup: NT threads; grid (ceil(T / BR), Hq, B).
const D: u32 = 64u;
const DV: u32 = 16u;
const DS: u32 = 17u;
const BR: u32 = 32u;
const BC: u32 = 32u;
const TR: u32 = 8u;
const TC: u32 = 8u;
const CK: u32 = 4u;
const DC: u32 = 2u;
const PS: u32 = 9u;
const NT: u32 = 64u;
const NKL: u32 = 4u;
const NKM: u32 = 1u;

const LOG2E: f32 = 1.4426950408889634;

var<workgroup> Qs: array<vec4<f32>, BR * DS>;
var<workgroup> dOs: array<vec4<f32>, BR * DS>;
var<workgroup> Ks: array<vec4<f32>, BC * DS + TC * DC>;
var<workgroup> Vs: array<vec4<f32>, BC * DS>;
// dS transposed: row j (key) holds BR / 4 vec4 of query rows.
var<workgroup> dSs: array<vec4<f32>, BC * PS>;
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
  let h = wid.y;
  let b = wid.z;
  let kh = h / p.G;
  let t0 = wid.x * BR;
  let tx = tid % TC;
  let ty = tid / TC;

  for (var e = tid; e < BR * DV; e += NT) {
    let r = e / DV;
    let c = e % DV;
    let t = t0 + r;
    var xq = vec4<f32>(0.0);
    var xo = vec4<f32>(0.0);
    if (t < p.T) {
      let base = ((b * p.T + t) * p.Hq + h) * D + c * 4u;
      xq = ld_q(base, c);
      xo = ld_do(base, c);
    }
    Qs[r * DS + c] = xq;
    dOs[r * DS + c] = xo;
  }
  // Own rows' lse (log2 units) and delta; rows past T get a huge lse so that P = 0.
  var lrow = vec4<f32>(3.0e38);
  var drow = vec4<f32>(0.0);
  //@unroll i 4
  {
    let t = t0 + ty * 4u + $i;
    if (t < p.T) {
      lrow[$i] = lse[(b * p.Hq + h) * p.T + t] * LOG2E;
      drow[$i] = delta[(b * p.Hq + h) * p.T + t];
    }
  }
  //@end

  let am = attn_mask(p.causal, p.window);
  let qa = p.qOffset + i32(t0);
  let kt = attn_key_tiles(am, p.qOffset, t0, BR, p.T, p.S, BC);
  let kb0 = kt.x;
  let nkb = kt.y;

  var dq: array<array<vec4<f32>, DC>, 4>;  // zero-initialised

  var kreg: array<vec4<f32>, NKL>;
  var vreg: array<vec4<f32>, NKL>;
  var mreg: array<u32, NKM>;
  // Prologue: key block kb0 into registers.
  let sk = kb0 * BC;
  //@unroll u NKL
  {
    let e = tid + $u * NT;
    var xk = vec4<f32>(0.0);
    var xv = vec4<f32>(0.0);
    if (e < BC * DV && sk + e / DV < p.S) {
      let base = ((b * p.S + sk + e / DV) * p.Hkv + kh) * D + (e % DV) * 4u;
      xk = ld_k(base, e % DV);
      xv = ld_v(base, e % DV);
    }
    kreg[$u] = xk;
    vreg[$u] = xv;
  }
  //@end
  //@unroll u NKM
  {
    let j = sk + tid + $u * NT;
    var ok = j < p.S;
    if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
    mreg[$u] = select(0u, 1u, ok);
  }
  //@end

  for (var kb = kb0; kb < nkb; kb++) {
    let s0 = kb * BC;
    workgroupBarrier();
    //@unroll u NKL
    {
      let e = tid + $u * NT;
      if (e < BC * DV) {
        Ks[(e / DV) * DS + e % DV] = kreg[$u];
        Vs[(e / DV) * DS + e % DV] = vreg[$u];
      }
    }
    //@end
    //@unroll u NKM
    if (tid + $u * NT < BC) { kok[tid + $u * NT] = mreg[$u]; }
    //@end
    workgroupBarrier();
    // Next key block into registers: lands during this block's matmuls.
    if (kb + 1u < nkb) {
      let s1 = s0 + BC;
      //@unroll u NKL
      {
        let e = tid + $u * NT;
        var xk = vec4<f32>(0.0);
        var xv = vec4<f32>(0.0);
        if (e < BC * DV && s1 + e / DV < p.S) {
          let base = ((b * p.S + s1 + e / DV) * p.Hkv + kh) * D + (e % DV) * 4u;
          xk = ld_k(base, e % DV);
          xv = ld_v(base, e % DV);
        }
        kreg[$u] = xk;
        vreg[$u] = xv;
      }
      //@end
      //@unroll u NKM
      {
        let j = s1 + tid + $u * NT;
        var ok = j < p.S;
        if (ok && p.hasMask != 0u) { ok = read_mask(b * p.S + j) != 0; }
        mreg[$u] = select(0u, 1u, ok);
      }
      //@end
    }

    var sc: array<array<f32, CK>, 4>;
    var dp: array<array<f32, CK>, 4>;
    //@unroll i 4
    //@unroll j CK
    sc[$i][$j] = 0.0;  // explicit: a var in a loop body is not re-zeroed by every toolchain
    dp[$i][$j] = 0.0;
    //@end
    //@end
    for (var c = 0u; c < DV; c++) {
      //@unroll j CK
      let k$j = Ks[(tx + $j * TC) * DS + c];
      let v$j = Vs[(tx + $j * TC) * DS + c];
      //@end
      //@unroll i 4
      {
        let qq = Qs[(ty * 4u + $i) * DS + c];
        let oo = dOs[(ty * 4u + $i) * DS + c];
        //@unroll j CK
        sc[$i][$j] = dot4(sc[$i][$j], qq, k$j);
        dp[$i][$j] = dot4(dp[$i][$j], oo, v$j);
        //@end
      }
      //@end
    }
    //@unroll j CK
    {
      let col = tx + $j * TC;
      let key = i32(s0 + col);
      let ok = kok[col] != 0u;
      var dsv = vec4<f32>(0.0);
      //@unroll i 4
      {
        let vis = ok && attn_visible(am, qa + i32(ty * 4u + $i), key);
        let sd = attn_score(sc[$i][$j], p.scale2, p.capin, p.capmul);
        let pp = select(0.0, exp2(sd.x - lrow[$i]), vis);
        dsv[$i] = pp * (dp[$i][$j] - drow[$i]) * sd.y;
      }
      //@end
      dSs[col * PS + ty] = dsv;
    }
    //@end
    workgroupBarrier();

    for (var j = 0u; j < BC; j++) {
      let sv = dSs[j * PS + ty];
      //@unroll c DC
      {
        let kv = Ks[j * DS + tx + TC * $c];
        //@unroll i 4
        dq[$i][$c] = fma(vec4<f32>(sv[$i]), kv, dq[$i][$c]);
        //@end
      }
      //@end
    }
  }

  //@unroll i 4
  {
    let t = t0 + ty * 4u + $i;
    if (t < p.T) {
      let base = ((b * p.T + t) * p.Hq + h) * D;
      //@unroll c DC
      {
        let cc = tx + TC * $c;
        if (cc < DV) {
          let y = dq[$i][$c] * p.scale;
          //@unroll e 4
          if (D % 4u == 0u || cc * 4u + $e < D) { dq_out[base + cc * 4u + $e] = y[$e]; }
          //@end
        }
      }
      //@end
    }
  }
  //@end
}
