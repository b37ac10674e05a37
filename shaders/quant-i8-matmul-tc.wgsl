// quant-i8-matmul-tc (tensor cores): Y [M, N] = (A B^T) * sa[m] * sb[n] (+ bias[n]) for int8 A [M, K] and
//   B [N, K] (layouts as quant-i8-matmul.wgsl), the products on i8 x i8 -> i32 subgroup matrices
//   (`chromium_experimental_subgroup_matrix`), exact i32 accumulation, the scales in the epilogue.
// Bindings: a (read u32 [M, wpr]), b (read u32 [N, wpr]), sa (read f32 [M]), sb (read f32 [N]), bias (read [N],
//   any float; sa again when HAS_BIAS is false), y (rw f32 [M, N]). Where VEC (wpr a multiple of 4) a and b are
//   re-declared as a4 / b4: array<vec4u> on their binding numbers (16-byte loads).
// Params: M, N, wpr.
// Prepended by the wrapper (ops/quant/int8-linear.ts) from the adapter's int8 configuration and the tile, all
//   WGSL consts: SM x SN x SK (one fragment product [SM, SK] x [SK, SN], SK in int8 elements), SG (subgroup
//   size), SGM x SGN subgroups, each owning FM x FN result fragments, BM = SGM * FM * SM, BN = SGN * FN * SN, BK
//   (int8 elements of K staged per step: a multiple of SK and of 16), ST (row stride of a staged slice in bytes:
//   BK + 16), UNIT (bytes per unit of a fragment load's offset and stride: 4, the i32 array's element, or 1),
//   HAS_BIAS; ld_a(r, w) / ld_b(r, w) (16 bytes of row r from word w, zeros past the row or the
//   matrix: one vec4u load where VEC, else four words); the aliases Lm / Rm / Acc; and the unrolled matrix code at //@acc, //@mma and
//   //@epilogue (named accumulators acc_<i>_<j>).
// Grid: x = ceil(N / BN), y = ceil(M / BM). Workgroup: SGM * SGN * SG threads.
// Scheme: per K step the [BM, BK] slice of A and the [BN, BK] slice of B are staged in workgroup memory as
//   stored (rows of ST bytes; out-of-range rows and words are 0) and loaded as row-major left and column-major
//   right fragments; the next slice is fetched into registers while the current one is multiplied (two
//   barriers a step). Results leave through a per-subgroup SM x SN i32 scratch tile: f32(sum) * sa[m] * sb[n].
//   Fragment offsets derive from subgroup_id (the subgroup-matrix builtins need subgroup-uniform arguments).
const WG: u32 = SGM * SGN * SG;
const WM: u32 = FM * SM;
const WN: u32 = FN * SN;
const SW: u32 = ST / 4u;              // staged row stride in u32 words
const KW: u32 = BK / 4u;              // words of K per step
const A_UNITS: u32 = BM * KW / 4u;    // 16-byte units of a slice
const B_UNITS: u32 = BN * KW / 4u;
const PA: u32 = (A_UNITS + WG - 1u) / WG;
const PB: u32 = (B_UNITS + WG - 1u) / WG;

var<workgroup> As: array<i32, BM * SW>;
var<workgroup> Bs: array<i32, BN * SW>;
var<workgroup> Cs: array<i32, SGM * SGN * SM * SN>;
var<private> ra: array<vec4u, PA>;
var<private> rb: array<vec4u, PB>;

fn fetch(m0: u32, n0: u32, w0: u32, lid: u32) {
  for (var l = 0u; l < PA; l++) {
    let u = l * WG + lid;
    ra[l] = select(vec4u(0u), ld_a(m0 + u / (KW / 4u), w0 + (u % (KW / 4u)) * 4u), u < A_UNITS);
  }
  for (var l = 0u; l < PB; l++) {
    let u = l * WG + lid;
    rb[l] = select(vec4u(0u), ld_b(n0 + u / (KW / 4u), w0 + (u % (KW / 4u)) * 4u), u < B_UNITS);
  }
}

fn stash(lid: u32) {
  for (var l = 0u; l < PA; l++) {
    let u = l * WG + lid;
    if (u < A_UNITS) {
      let o = (u / (KW / 4u)) * SW + (u % (KW / 4u)) * 4u;
      As[o] = bitcast<i32>(ra[l].x); As[o + 1u] = bitcast<i32>(ra[l].y);
      As[o + 2u] = bitcast<i32>(ra[l].z); As[o + 3u] = bitcast<i32>(ra[l].w);
    }
  }
  for (var l = 0u; l < PB; l++) {
    let u = l * WG + lid;
    if (u < B_UNITS) {
      let o = (u / (KW / 4u)) * SW + (u % (KW / 4u)) * 4u;
      Bs[o] = bitcast<i32>(rb[l].x); Bs[o + 1u] = bitcast<i32>(rb[l].y);
      Bs[o + 2u] = bitcast<i32>(rb[l].z); Bs[o + 3u] = bitcast<i32>(rb[l].w);
    }
  }
}

// fragment loads from the staged slices: offsets and strides in units of UNIT bytes (see i8Tuning.unit)
fn load_l(m: u32, kk: u32) -> Lm { return subgroupMatrixLoad<Lm, row_major>(&As, (m * ST + kk) / UNIT, ST / UNIT); }
fn load_r(n: u32, kk: u32) -> Rm { return subgroupMatrixLoad<Rm, col_major>(&Bs, (n * ST + kk) / UNIT, ST / UNIT); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let wm0 = (sg / SGN) * WM;
  let wn0 = (sg % SGN) * WN;
  let m0 = wg.y * BM;
  let n0 = wg.x * BN;
  //@acc
  let nt = (p.wpr + KW - 1u) / KW;
  fetch(m0, n0, 0u, lid);
  stash(lid);
  workgroupBarrier();
  for (var t = 0u; t < nt; t++) {
    if (t + 1u < nt) { fetch(m0, n0, (t + 1u) * KW, lid); }
    for (var kk = 0u; kk < BK; kk += SK) {
      //@mma
    }
    workgroupBarrier();
    if (t + 1u < nt) { stash(lid); }
    workgroupBarrier();
  }
  let cs = sg * SM * SN;
  //@epilogue
}

// Write result fragment (i, j) of this subgroup from its scratch tile: bounds, the scales, bias.
fn copy_out(i: u32, j: u32, cs: u32, lane: u32, m0: u32, n0: u32, wm0: u32, wn0: u32) {
  for (var q = lane; q < SM * SN; q += SG) {
    let m = m0 + wm0 + i * SM + q / SN;
    let n = n0 + wn0 + j * SN + q % SN;
    if (m < p.M && n < p.N) {
      var v = f32(Cs[cs + q]) * sa[m] * sb[n];
      if (HAS_BIAS) { v += read_bias(n); }
      y[m * p.N + n] = v;
    }
  }
}
