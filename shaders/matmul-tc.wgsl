// matmul-tc (tensor cores): C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias) (+ C[b] when accumulating), with
// f16 x f16 products accumulated in f32 on subgroup matrices (`chromium_experimental_subgroup_matrix`).
//   op(A) is [M, K]: A stored [M, K] (A_T false) or [K, M] (A_T true).
//   op(B) is [K, N]: B stored [K, N] (B_T false) or [N, K] (B_T true: HF Linear weights [out, in]).
// Bindings: a (read, f16 storage), b (read, f16 storage), bias (read, [N] any float dtype; A again when HAS_BIAS is
//   false), c (rw f32, [batch, M, N]). a and b are re-declared below as vec4u arrays on the same binding numbers
//   (8 packed halves per 16-byte load; the generated scalar declarations stay unused).
// Params: M, N, K, sa, sb (batch strides of a and b in elements; 0 broadcasts), alpha, one (unused here), lda,
//   ldb (row strides of a and b as stored, as in matmul.wgsl).
// Prepended by the wrapper (ops/core/matmul-tc.ts), from the adapter's subgroup-matrix configuration and the tile:
//   SM x SN x SK (one subgroup matrix product: [SM, SK] x [SK, SN]), SG (subgroup size), SGM x SGN subgroups per
//   workgroup, each owning FM x FN result matrices (a WM x WN = FM*SM x FN*SN block of C), BM = SGM*WM,
//   BN = SGN*WN, BK (K-slice per step, a multiple of SK), A_T, B_T, AS_STRIDE / AS_SIZE and BS_STRIDE / BS_SIZE
//   (row stride and size in halves of one staged slice), the aliases Lm / Rm / Acc of the three matrix types,
//   load_l(off) / load_r(off) (subgroupMatrixLoad from As / Bs with the layout the operand's storage needs), and
//   at_a(e) / at_b(e) (one element as f32, for unaligned operands), the matrix code at the //@acc, //@mma,
//   //@direct and //@scratch lines (`tcMatrixCode`: the accumulators as an array indexed in loops, or unrolled
//   into named variables, acc_<i>_<j>), and the flags VEC_A, VEC_B (16-byte global
//   loads: the operand's contiguous dim and batch stride are multiples of 8), HAS_BIAS, ACCUM, DIRECT (store full
//   tiles straight to C when there is no epilogue: alpha 1, no bias, no accumulate). Flags are WGSL consts, not
//   pipeline overrides (see the note on overrides in ops/core/matmul-tc.ts).
// Grid: x = ceil(N / BN), y = ceil(M / BM), z = batch. Workgroup: SGM * SGN * SG threads (SG fixed).
// Scheme: each K-slice of A ([BM, BK], or [BK, BM] when A_T) and of B ([BK, BN], or [BN, BK] when B_T) is
//   staged in workgroup memory exactly as stored (rows padded by 8 halves against bank conflicts) and read
//   with row_major or col_major loads, so transposed operands cost nothing extra. Double buffered: the next
//   slice is fetched into registers while the current one is multiplied, then stored into the other buffer,
//   one barrier per slice. Out-of-range rows and K columns load as 0. Results leave through a per-subgroup
//   SM x SN f32 scratch tile (bounds, alpha, bias, accumulate) unless DIRECT applies to the whole tile.
const WG: u32 = SGM * SGN * SG;
const WM: u32 = FM * SM;
const WN: u32 = FN * SN;
// the staged slices as stored: rows x cols, cols contiguous, in units of 8 halves
const A_ROWS: u32 = select(BM, BK, A_T);
const A_COLS: u32 = select(BK, BM, A_T);
const B_ROWS: u32 = select(BK, BN, B_T);
const B_COLS: u32 = select(BN, BK, B_T);
const A_UNITS: u32 = A_ROWS * A_COLS / 8u;
const B_UNITS: u32 = B_ROWS * B_COLS / 8u;
const PA: u32 = (A_UNITS + WG - 1u) / WG;
const PB: u32 = (B_UNITS + WG - 1u) / WG;

@group(0) @binding(1) var<storage, read> a4: array<vec4u>;
@group(0) @binding(2) var<storage, read> b4: array<vec4u>;

var<workgroup> As: array<f16, 2u * AS_SIZE>;
var<workgroup> Bs: array<f16, 2u * BS_SIZE>;
var<workgroup> Cs: array<f32, SGM * SGN * SM * SN>;
var<private> ra: array<vec4<f16>, 2u * PA>;
var<private> rb: array<vec4<f16>, 2u * PB>;

fn h8(w: vec4u) -> array<vec4<f16>, 2> {
  return array<vec4<f16>, 2>(
    vec4<f16>(bitcast<vec2<f16>>(w.x), bitcast<vec2<f16>>(w.y)),
    vec4<f16>(bitcast<vec2<f16>>(w.z), bitcast<vec2<f16>>(w.w)),
  );
}

// Unit u of a stored slice: row u / (COLS / 8), first column (u % (COLS / 8)) * 8.
fn fetchA(bo: u32, m0: u32, k0: u32, lid: u32) {
  for (var l = 0u; l < PA; l++) {
    let u = l * WG + lid;
    var v = array<vec4<f16>, 2>(vec4<f16>(0.0h), vec4<f16>(0.0h));
    if (u < A_UNITS) {
      let r = u / (A_COLS / 8u);
      let c = (u % (A_COLS / 8u)) * 8u;
      var e: u32;
      var ok: bool;
      var lim: u32;
      if (!A_T) {
        e = bo + (m0 + r) * p.lda + k0 + c;
        ok = m0 + r < p.M;
        lim = select(0u, p.K - k0 - c, k0 + c < p.K);
      } else {
        e = bo + (k0 + r) * p.lda + m0 + c;
        ok = k0 + r < p.K;
        lim = select(0u, p.M - m0 - c, m0 + c < p.M);
      }
      if (ok && lim > 0u) {
        if (VEC_A) {
          v = h8(a4[e >> 3u]);
        } else {
          for (var j = 0u; j < 4u; j++) {
            if (j < lim) { v[0][j] = f16(at_a(e + j)); }
            if (j + 4u < lim) { v[1][j] = f16(at_a(e + 4u + j)); }
          }
        }
      }
    }
    ra[2u * l] = v[0];
    ra[2u * l + 1u] = v[1];
  }
}

fn fetchB(bo: u32, n0: u32, k0: u32, lid: u32) {
  for (var l = 0u; l < PB; l++) {
    let u = l * WG + lid;
    var v = array<vec4<f16>, 2>(vec4<f16>(0.0h), vec4<f16>(0.0h));
    if (u < B_UNITS) {
      let r = u / (B_COLS / 8u);
      let c = (u % (B_COLS / 8u)) * 8u;
      var e: u32;
      var ok: bool;
      var lim: u32;
      if (!B_T) {
        e = bo + (k0 + r) * p.ldb + n0 + c;
        ok = k0 + r < p.K;
        lim = select(0u, p.N - n0 - c, n0 + c < p.N);
      } else {
        e = bo + (n0 + r) * p.ldb + k0 + c;
        ok = n0 + r < p.N;
        lim = select(0u, p.K - k0 - c, k0 + c < p.K);
      }
      if (ok && lim > 0u) {
        if (VEC_B) {
          v = h8(b4[e >> 3u]);
        } else {
          for (var j = 0u; j < 4u; j++) {
            if (j < lim) { v[0][j] = f16(at_b(e + j)); }
            if (j + 4u < lim) { v[1][j] = f16(at_b(e + 4u + j)); }
          }
        }
      }
    }
    rb[2u * l] = v[0];
    rb[2u * l + 1u] = v[1];
  }
}

fn stash(buf: u32, lid: u32) {
  for (var l = 0u; l < PA; l++) {
    let u = l * WG + lid;
    if (u < A_UNITS) {
      let o = buf * AS_SIZE + (u / (A_COLS / 8u)) * AS_STRIDE + (u % (A_COLS / 8u)) * 8u;
      for (var j = 0u; j < 4u; j++) {
        As[o + j] = ra[2u * l][j];
        As[o + 4u + j] = ra[2u * l + 1u][j];
      }
    }
  }
  for (var l = 0u; l < PB; l++) {
    let u = l * WG + lid;
    if (u < B_UNITS) {
      let o = buf * BS_SIZE + (u / (B_COLS / 8u)) * BS_STRIDE + (u % (B_COLS / 8u)) * 8u;
      for (var j = 0u; j < 4u; j++) {
        Bs[o + j] = rb[2u * l][j];
        Bs[o + 4u + j] = rb[2u * l + 1u][j];
      }
    }
  }
}

// Offset in a staged slice of op(A)[m][k] / op(B)[k][n] (slice-local coordinates).
fn a_off(m: u32, k: u32) -> u32 { return select(m * AS_STRIDE + k, k * AS_STRIDE + m, A_T); }
fn b_off(k: u32, n: u32) -> u32 { return select(k * BS_STRIDE + n, n * BS_STRIDE + k, B_T); }

// The subgroup's index and lane come from the subgroup builtins: every subgroup-matrix builtin needs its
// arguments subgroup-uniform, and only values derived from subgroup_id are (lid / SG is not, for the analysis).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let wm0 = (sg / SGN) * WM;
  let wn0 = (sg % SGN) * WN;
  let m0 = wg.y * BM;
  let n0 = wg.x * BN;
  let boa = wg.z * p.sa;
  let bob = wg.z * p.sb;
  //@acc
  let nt = (p.K + BK - 1u) / BK;
  fetchA(boa, m0, 0u, lid);
  fetchB(bob, n0, 0u, lid);
  stash(0u, lid);
  workgroupBarrier();
  for (var t = 0u; t < nt; t++) {
    let cur = t % 2u;
    if (t + 1u < nt) {
      fetchA(boa, m0, (t + 1u) * BK, lid);
      fetchB(bob, n0, (t + 1u) * BK, lid);
    }
    let ab = cur * AS_SIZE;
    let bb = cur * BS_SIZE;
    for (var kk = 0u; kk < BK; kk += SK) {
      //@mma
    }
    if (t + 1u < nt) { stash(1u - cur, lid); }
    workgroupBarrier();
  }
  let cb = wg.z * p.M * p.N;
  if (DIRECT && m0 + BM <= p.M && n0 + BN <= p.N && p.alpha == 1.0) {
    //@direct
    return;
  }
  let cs = sg * SM * SN;
  //@scratch
}

// Copy result matrix (i, j) of this subgroup from its scratch tile Cs[cs ..] to C with bounds, alpha, bias and
// accumulate (every lane of the subgroup takes every SG-th element).
fn copy_out(i: u32, j: u32, cs: u32, lane: u32, m0: u32, n0: u32, wm0: u32, wn0: u32, cb: u32) {
  for (var q = lane; q < SM * SN; q += SG) {
    let m = m0 + wm0 + i * SM + q / SN;
    let n = n0 + wn0 + j * SN + q % SN;
    if (m < p.M && n < p.N) {
      let ci = cb + m * p.N + n;
      var v = p.alpha * Cs[cs + q];
      if (HAS_BIAS) { v += read_bias(n); }
      if (ACCUM) { v += c[ci]; }
      c[ci] = v;
    }
  }
}
