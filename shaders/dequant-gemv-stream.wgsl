// dequant-gemv-stream: entry point main_stream of the decode GEMV (appended to dequant-gemv-sg.wgsl, whose
//   bindings, params, decoders and prelude it shares; GemvSetting.stream): Y [1, N] = X [1, K] W^T (+ bias) for one
//   row of X, X stationary and W streamed.
// Prepended consts (ops/quant/gemv.ts) besides dequant-gemv-sg's: LPR (lanes per row of W: a power of two, a
//   multiple of SG, dividing WG), CPR (chunks of a row each lane takes: chunks j, j + LPR, ... < nc), RPS = WG / LPR
//   (rows in flight per step), STEPS = R / RPS (steps per workgroup), PF (steps whose words are loaded ahead), and
//   the generated code at //@sx (lane j's CPR chunks of X into registers, once; zero past K, so that a row's
//   padding codes add nothing), //@spre (the words and scales of the first PF steps), //@sload (this step's
//   words and scales, from the registers loaded PF steps ago, which then load step s + PF: rows clamped to N - 1)
//   and //@sdot (acc: the lane's chunks of its row dequantized, dotted with X, scaled).
// Grid: ceil(N / R) workgroups (x + y * gx). Workgroup: WG threads; lane j = li % LPR of row slot q = li / LPR.
// Scheme: in step s the workgroup reads rows n0 + s * RPS + q: a contiguous run of RPS rows, consecutive lanes
//   on consecutive 16-byte chunks (one load instruction of a subgroup reads 512 contiguous bytes). Each step's
//   dot products are summed over the subgroup (subgroupAdd) into workgroup memory (row slot, subgroup of the row);
//   after the last step every output adds its LPR / SG partial sums in a fixed order (deterministic).
var<workgroup> spart: array<f32, R * (LPR / SG)>;

@compute @workgroup_size(WG)
fn main_stream(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32,
               @builtin(subgroup_invocation_id) lane: u32) {
  let n0 = (wg.x + wg.y * p.gx) * R;
  if (!FLOAT_W && FMT == 2u) {
    if (li < 16u) { lut[li] = NF4_CODE[li]; }
    workgroupBarrier();
  }
  let j = li % LPR;
  let q = li / LPR;
  //@sx
  //@spre
  for (var s = 0u; s < STEPS; s++) {
    //@sload
    var acc = 0.0;
    //@sdot
    let z = subgroupAdd(acc);
    if (lane == 0u) { spart[(s * RPS + q) * (LPR / SG) + j / SG] = z; }
  }
  workgroupBarrier();
  for (var o = li; o < R; o += WG) {
    let n = n0 + o;
    if (n < p.N) {
      var v = 0.0;
      for (var i = 0u; i < LPR / SG; i++) { v += spart[o * (LPR / SG) + i]; }
      if (HAS_BIAS) { v += read_bias(n); }
      y[n] = v;
    }
  }
}
