// attention-decode: one new query per sequence against a KV cache, split-K. The query sits at position
// len - 1 and sees the keys [s0, len) that attn_key_range of attention-mask.wgsl (prepended by the wrapper)
// gives: all of 0 .. len - 1, or the last `window` of them. Workgroup (c, h, b) handles the keys
// [s0 + c * CH, min(len, s0 + (c + 1) * CH)) of head h of sequence b: scores (one thread per key), the chunk's
// softmax statistics (fixed-order reductions), then the weighted sum of V rows (threads over head-dim
// chunks and key subsets, partial sums added in a fixed order). With one chunk it writes the normalised
// output; otherwise the unnormalised partial (acc, max, sum) that attention-decode-combine merges.
// Bindings:
//   q    read f32|f16|bf16 [B, Hq, D] (the single query of each sequence: [B, 1, Hq, D])
//   k, v read f32|f16|bf16 [B, Smax, Hkv, D] (positions >= len are ignored)
//   mask read i32|u32 [B, Smax] (1 = keep; a 1-element dummy when hasMask = 0)
//   o    rw f32 [B, Hq, D]   (written when nChunks == 1)
//   part rw f32 [B, Hq, nChunks, DV * 4 + 2]: acc (DV * 4), max (log2 units), sum (written when nChunks > 1)
// Params: Smax, len, Hq, Hkv, G (= Hq / Hkv), CH (keys per chunk, <= CHMAX), nChunks, hasMask,
//   window (sliding window, 0 = none), scale2 (q is multiplied by it: scale * log2 e, or scale / softcap with
//   soft-capping), capmul (softcap * log2 e, 0 = none: the score is attn_cap(scale2 * q.k) of
//   attention-mask.wgsl).
// A row with no visible key writes zeros.
// Template: the wrapper rewrites the `const` lines and expands `//@unroll` blocks (see specialize in common.ts).
// Constants: D, DV = ceil(D / 4), NT threads, CHMAX, NP = NT / DV key subsets.
// Workgroup: NT threads; grid (nChunks, Hq, B).
const D: u32 = 64u;
const DV: u32 = 16u;
const NT: u32 = 128u;
const CHMAX: u32 = 1024u;
const NP: u32 = 8u;

const NEG: f32 = -1.0e30;

var<workgroup> qs: array<vec4<f32>, DV>;
var<workgroup> sc: array<f32, CHMAX>;
var<workgroup> red: array<f32, NT>;
var<workgroup> accs: array<vec4<f32>, NT>;

fn ld_q(base: u32, c: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  //@unroll e 4
  if (D % 4u == 0u || c * 4u + $e < D) { x[$e] = read_q(base + $e); }
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

// Workgroup max / sum: every thread reads all NT partials in the same order (no loop around a barrier,
// deterministic, and every thread gets the same value).
fn wg_max(tid: u32, x: f32) -> f32 {
  red[tid] = x;
  workgroupBarrier();
  var r = red[0];
  for (var u = 1u; u < NT; u++) { r = max(r, red[u]); }
  workgroupBarrier();
  return r;
}

fn wg_sum(tid: u32, x: f32) -> f32 {
  red[tid] = x;
  workgroupBarrier();
  var r = red[0];
  for (var u = 1u; u < NT; u++) { r += red[u]; }
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let c = wid.x;
  let h = wid.y;
  let b = wid.z;
  let kh = h / p.G;
  let kr = attn_key_range(attn_mask(1u, p.window), i32(p.len) - 1, i32(p.len) - 1, p.len);
  let sBeg = kr.x + c * p.CH;
  let sEnd = min(kr.y, sBeg + p.CH);
  let n = select(0u, sEnd - sBeg, sEnd > sBeg);

  for (var e = tid; e < DV; e += NT) { qs[e] = ld_q((b * p.Hq + h) * D + e * 4u, e) * p.scale2; }
  workgroupBarrier();

  var lmax = NEG;
  for (var j = tid; j < n; j += NT) {
    let s = sBeg + j;
    var ok = true;
    if (p.hasMask != 0u) { ok = read_mask(b * p.Smax + s) != 0; }
    var x = NEG;
    if (ok) {
      let base = ((b * p.Smax + s) * p.Hkv + kh) * D;
      var a = 0.0;
      // A plain scalar loop: the vec4 form compiles ~10x slower on lavapipe for the same memory traffic.
      for (var d = 0u; d < D; d++) { a = fma(qs[d / 4u][d % 4u], read_k(base + d), a); }
      x = attn_cap(a, p.capmul);
    }
    sc[j] = x;
    lmax = max(lmax, x);
  }
  let m = wg_max(tid, lmax);
  let msafe = select(m, 0.0, m == NEG);
  var lsum = 0.0;
  for (var j = tid; j < n; j += NT) {
    let pp = select(exp2(sc[j] - msafe), 0.0, sc[j] == NEG);
    sc[j] = pp;
    lsum += pp;
  }
  let l = wg_sum(tid, lsum);

  // acc[chunk] over key subset `sub`: keys sub, sub + NP, ...
  let chunk = tid % DV;
  let sub = tid / DV;
  var acc = vec4<f32>(0.0);
  if (sub < NP) {
    for (var j = sub; j < n; j += NP) {
      let s = sBeg + j;
      let vv = ld_v(((b * p.Smax + s) * p.Hkv + kh) * D + chunk * 4u, chunk);
      acc = fma(vec4<f32>(sc[j]), vv, acc);
    }
  }
  accs[tid] = acc;
  workgroupBarrier();
  if (tid < DV) {
    var y = accs[tid];
    for (var u = 1u; u < NP; u++) { y = y + accs[u * DV + tid]; }
    if (p.nChunks == 1u) {
      let inv = select(1.0 / l, 0.0, l == 0.0);
      let base = (b * p.Hq + h) * D + tid * 4u;
      for (var e = 0u; e < 4u; e++) { if (D % 4u == 0u || tid * 4u + e < D) { o[base + e] = y[e] * inv; } }
    } else {
      let pb = ((b * p.Hq + h) * p.nChunks + c) * (DV * 4u + 2u);
      part[pb + tid * 4u] = y.x;
      part[pb + tid * 4u + 1u] = y.y;
      part[pb + tid * 4u + 2u] = y.z;
      part[pb + tid * 4u + 3u] = y.w;
      if (tid == 0u) {
        part[pb + DV * 4u] = m;
        part[pb + DV * 4u + 1u] = l;
      }
    }
  }
}
