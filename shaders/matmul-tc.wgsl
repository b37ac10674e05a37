// matmul-tc (tensor cores): C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias) (+ C[b] when accumulating), with
// f16 x f16 products accumulated in f32 on subgroup matrices (`chromium_experimental_subgroup_matrix`).
//   op(A) is [M, K]: A stored [M, K] (A_T false) or [K, M] (A_T true).
//   op(B) is [K, N]: B stored [K, N] (B_T false) or [N, K] (B_T true: HF Linear weights [out, in]).
// Bindings: a (read, f16 storage), b (read, f16 storage), bias (read, [N] any float dtype; A again when HAS_BIAS is
//   false), c (rw f32, [batch, M, N]); with GSCALE also gs (read u32 [514]: words 512, 513 are f32 factors the
//   product is multiplied by, the 1 / sA and 1 / sB of ops/core/matmul-f16x3.ts). The wrapper re-declares a and b on the same binding numbers as the view the
//   variant reads (`a4`/`b4`: array<vec4u>, 8 packed halves per 16-byte load; or, for CM variants, `ah`/`bh`:
//   array<f16>); the generated scalar declarations stay unused (one view per binding is used by the entry point).
// Params: M, N, K, sa, sb (batch strides of a and b in elements; 0 broadcasts), alpha, one (unused here), lda,
//   ldb (row strides of a and b as stored, as in matmul.wgsl).
// Prepended by the wrapper (ops/core/matmul-tc.ts, `tcSource`), from the adapter's subgroup-matrix configuration
//   and the variant (a `TcTile`):
//   SM x SN x SK (one subgroup matrix product: [SM, SK] x [SK, SN]), SG (subgroup size), SGM x SGN subgroups per
//   workgroup, each owning FM x FN result matrices (a WM x WN = FM*SM x FN*SN block of C), BM = SGM*WM,
//   BN = SGN*WN, BK (K-slice per step, a multiple of SK), NBUF (workgroup buffers per operand: 2 = the next slice
//   is stored into the other buffer, one barrier per step; 1 = two barriers per step, half the memory), PF
//   (slices held in registers ahead of the staged one: 1 = the next slice is fetched while the current one is
//   multiplied; 2 = two register sets, slice t + 2 is fetched while slice t is multiplied), VW
//   (halves per global load and per staged unit: 8 = one 16-byte load, 2 = one 32-bit word), A_T, B_T,
//   CSLOTS (subgroups whose SM x SN f32 scratch tiles exist at once: with fewer than all, the epilogue runs in
//   rounds, subgroup sg in round sg / CSLOTS), AS_STRIDE / AS_SIZE and BS_STRIDE / BS_SIZE (row stride and size
//   in halves of one staged slice), the
//   aliases Lm / Rm / Acc of the three matrix types (and CmT, the SM x SK block that CM variants copy), the
//   load type UV (vec4u or u32), load_l(off) / load_r(off) (subgroupMatrixLoad from As / Bs with the layout the
//   operand's storage needs), the workgroup memory (the staged slices As / Bs, f16, and the epilogue scratch Cs,
//   f32, as three arrays; or, for BV variants, one `smem` buffer (WGSL buffer_view) whose typed views these
//   functions use: 16-byte unit stores, and the scratch over the slices, which are done with by then) and
//   cs_get(i) (scratch element i), at_a(e) / at_b(e) (one element as f32, for unaligned operands), fetch_a / fetch_b
//   (one unit of a slice from global memory) and put_a / put_b (one unit into workgroup memory), and the flags
//   VEC_A, VEC_B (vector loads: the operand's contiguous dim and batch stride are multiples of 8), HAS_BIAS,
//   ACCUM, DIRECT (store full tiles straight to C when there is no epilogue: alpha 1, no bias, no accumulate),
//   GSCALE (see Bindings; never with DIRECT), and gscale() (the two factors' product, or 1 without GSCALE).
//   The straight-line code at the //@ lines (`tcMatrixCode`): //@raster the workgroup's tile origin m0, n0 (row
//   by row, or grouped: `gm` tile rows per column step), its batch bz and its K range [kb, ke) (the whole K, or
//   with TAIL one chunk of a tail tile: see below), //@acc the accumulators (named acc_<i>_<j>, or an
//   array in the reference "array" form), //@regs the staging registers, //@fetch0 / //@fetch the global loads
//   of a slice at K offset kn into registers (with PF 2, //@fetch1 loads slice 1 into the second set and
//   //@fetch picks the set by t % 2), //@stash0 / //@stash their stores into buffer sb, //@mma the fragment
//   loads and multiply-accumulates of every SK step of buffer (ab, bb), //@direct and //@scratch the stores of C. CM variants fetch interior slices as CmT blocks (subgroupMatrixLoad from storage) and stash
//   them with subgroupMatrixStore; edge slices take the element path.
// Grid: x = ceil(N / BN), y = ceil(M / BM), z = batch. Workgroup: SGM * SGN * SG threads (SG fixed).
// TAIL (a split tail, ops/core/matmul-tc.ts `tcTail`): params full, tiles, chunks, slices and a binding `part`
//   (rw f32) follow. The grid is 1-D over x then y (linear workgroup index g), batch folded into the tile index
//   (batch, tile row, tile column): workgroups g < full compute whole tiles as above; the next tiles * chunks
//   compute chunk g' % chunks (slices BK-slices of K) of tile full + g' / chunks (g' = g - full) and store their
//   raw accumulators to part [g', BM, BN] (//@part), which shaders/matmul-tc-tail.wgsl sums into C.
// Scheme: each K-slice of A ([BM, BK], or [BK, BM] when A_T) and of B ([BK, BN], or [BN, BK] when B_T) is
//   staged in workgroup memory exactly as stored (rows padded by 8 halves against bank conflicts) and read
//   with row_major or col_major loads, so transposed operands cost nothing extra. The next slice is fetched
//   into registers while the current one is multiplied. Out-of-range rows and K columns load as 0. Results leave
//   through a per-subgroup SM x SN f32 scratch tile (bounds, alpha, bias, accumulate) unless DIRECT applies to
//   the whole tile (then straight from the accumulators to C); SD variants (`sd`) store a full tile through
//   workgroup memory instead, one band of SM rows per subgroup at a time, written to C along the rows by the lanes
//   (whole lines per store: about 10% of the kernel on an H100 where fragments went straight to C), and with
//   `sde` every other tile too, with the epilogue.
const WG: u32 = SGM * SGN * SG;
const NSG: u32 = SGM * SGN;
const WM: u32 = FM * SM;
const WN: u32 = FN * SN;
// the staged slices as stored: rows x cols, cols contiguous; units of VW halves
const A_ROWS: u32 = select(BM, BK, A_T);
const A_COLS: u32 = select(BK, BM, A_T);
const B_ROWS: u32 = select(BK, BN, B_T);
const B_COLS: u32 = select(BN, BK, B_T);
const A_UPR: u32 = A_COLS / VW;
const B_UPR: u32 = B_COLS / VW;
const A_UNITS: u32 = A_ROWS * A_UPR;
const B_UNITS: u32 = B_ROWS * B_UPR;

// A unit of a stored slice: global element offset e and how many of its VW elements are in range (0: none).
struct Unit {
  e: u32,
  lim: u32,
}

// Unit u of A's slice at K offset k0: row u / A_UPR, first column (u % A_UPR) * VW.
fn unit_a(bo: u32, m0: u32, k0: u32, u: u32) -> Unit {
  let r = u / A_UPR;
  let c = (u % A_UPR) * VW;
  if (!A_T) {
    let lim = select(0u, p.K - k0 - c, k0 + c < p.K);
    return Unit(bo + (m0 + r) * p.lda + k0 + c, select(0u, lim, m0 + r < p.M));
  }
  let lim = select(0u, p.M - m0 - c, m0 + c < p.M);
  return Unit(bo + (k0 + r) * p.lda + m0 + c, select(0u, lim, k0 + r < p.K));
}

fn unit_b(bo: u32, n0: u32, k0: u32, u: u32) -> Unit {
  let r = u / B_UPR;
  let c = (u % B_UPR) * VW;
  if (!B_T) {
    let lim = select(0u, p.N - n0 - c, n0 + c < p.N);
    return Unit(bo + (k0 + r) * p.ldb + n0 + c, select(0u, lim, k0 + r < p.K));
  }
  let lim = select(0u, p.K - k0 - c, k0 + c < p.K);
  return Unit(bo + (n0 + r) * p.ldb + k0 + c, select(0u, lim, n0 + r < p.N));
}

// Halves j and j + 1 of a unit as one packed word, 0 where out of range (element path).
fn pk_a(q: Unit, j: u32) -> u32 {
  var x = 0.0;
  var y = 0.0;
  if (j < q.lim) { x = at_a(q.e + j); }
  if (j + 1u < q.lim) { y = at_a(q.e + j + 1u); }
  return pack2x16float(vec2f(x, y));
}

fn pk_b(q: Unit, j: u32) -> u32 {
  var x = 0.0;
  var y = 0.0;
  if (j < q.lim) { x = at_b(q.e + j); }
  if (j + 1u < q.lim) { y = at_b(q.e + j + 1u); }
  return pack2x16float(vec2f(x, y));
}

// Workgroup-memory offset of unit u in buffer buf.
fn sa_off(buf: u32, u: u32) -> u32 { return buf * AS_SIZE + (u / A_UPR) * AS_STRIDE + (u % A_UPR) * VW; }
fn sb_off(buf: u32, u: u32) -> u32 { return buf * BS_SIZE + (u / B_UPR) * BS_STRIDE + (u % B_UPR) * VW; }

// Offset in a staged slice of op(A)[m][k] / op(B)[k][n] (slice-local coordinates).
fn a_off(m: u32, k: u32) -> u32 { return select(m * AS_STRIDE + k, k * AS_STRIDE + m, A_T); }
fn b_off(k: u32, n: u32) -> u32 { return select(k * BS_STRIDE + n, n * BS_STRIDE + k, B_T); }

// CM variants: global offset of SM x SK block blk of A's / B's slice at k0, and its offset in a staged buffer.
fn cm_a(bo: u32, m0: u32, k0: u32, blk: u32) -> u32 {
  let r = (blk / (A_COLS / SK)) * SM;
  let c = (blk % (A_COLS / SK)) * SK;
  return select(bo + (m0 + r) * p.lda + k0 + c, bo + (k0 + r) * p.lda + m0 + c, A_T);
}
fn cm_b(bo: u32, n0: u32, k0: u32, blk: u32) -> u32 {
  let r = (blk / (B_COLS / SK)) * SM;
  let c = (blk % (B_COLS / SK)) * SK;
  return select(bo + (k0 + r) * p.ldb + n0 + c, bo + (n0 + r) * p.ldb + k0 + c, B_T);
}
fn cms_a(buf: u32, blk: u32) -> u32 { return buf * AS_SIZE + (blk / (A_COLS / SK)) * SM * AS_STRIDE + (blk % (A_COLS / SK)) * SK; }
fn cms_b(buf: u32, blk: u32) -> u32 { return buf * BS_SIZE + (blk / (B_COLS / SK)) * SM * BS_STRIDE + (blk % (B_COLS / SK)) * SK; }

// The subgroup's index and lane come from the subgroup builtins: every subgroup-matrix builtin needs its
// arguments subgroup-uniform, and only values derived from subgroup_id are (lid / SG is not, for the analysis).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let wm0 = (sg / SGN) * WM;
  let wn0 = (sg % SGN) * WN;
  //@raster
  let boa = bz * p.sa;
  let bob = bz * p.sb;
  //@acc
  //@regs
  let nt = (ke - kb + BK - 1u) / BK;
  var kn = kb;
  //@fetch0
  {
    let sb = 0u;
    //@stash0
  }
  workgroupBarrier();
  if (PF == 2u && nt > 1u) {
    kn = kb + BK;
    //@fetch1
  }
  for (var t = 0u; t < nt; t++) {
    let cur = select(0u, t % 2u, NBUF == 2u);
    let more = t + 1u < nt;
    let par = t % 2u;
    kn = kb + (t + PF) * BK;
    if (t + PF < nt) {
      //@fetch
    }
    let ab = cur * AS_SIZE;
    let bb = cur * BS_SIZE;
    //@mma
    if (NBUF == 1u) { workgroupBarrier(); }
    if (more) {
      let sb = select(0u, 1u - cur, NBUF == 2u);
      //@stash
    }
    workgroupBarrier();
  }
  //@part
  let cb = bz * p.M * p.N;
  if (DIRECT && m0 + BM <= p.M && n0 + BN <= p.N && p.alpha == 1.0) {
    //@direct
    return;
  }
  let cs = (sg % CSLOTS) * SM * SN;
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
      var v = p.alpha * gscale() * cs_get(cs + q);
      if (HAS_BIAS) { v += read_bias(n); }
      if (ACCUM) { v += c[ci]; }
      c[ci] = v;
    }
  }
}
