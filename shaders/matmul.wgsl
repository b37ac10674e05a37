// matmul (register-tiled): C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias) (+ C[b] when accumulating), f32 math.
//   op(A) is [M, K]: A stored [M, K] (TRANS_A false) or [K, M] (TRANS_A true).
//   op(B) is [K, N]: B stored [K, N] (TRANS_B false) or [N, K] (TRANS_B true: HF Linear weights [out, in]).
// Bindings: a (read: f32, f16 or bf16), b (read: f32, f16 or bf16), bias (read, [N] any float dtype; A again
//   when HAS_BIAS is false), c (rw f32, [batch, M, N]). a, b and c are re-declared below as vec4 arrays on
//   the same binding numbers (the generated scalar declarations stay unused): 16-byte loads and stores.
// Params: M, N, K, sa, sb (batch strides of a and b in elements; 0 broadcasts), alpha, one (1: see DYN), lda,
//   ldb (row strides of a and b as stored, in elements: K or M for A, N or K for B when contiguous; larger for
//   split-K chunks and other views).
// Tile constants, prepended by the TypeScript wrapper per variant (matmul-v1, -v2, ...):
//   BM x BN workgroup tile of C, BK the K-slice staged per step, TM x TN outputs per thread (multiples of 4),
//   WTX: thread columns per warp (a warp covers WTX x 32/WTX thread positions of the TX x TY thread grid),
//   GM: workgroup order (0: row-major over the tile grid; G > 0: bands of G tile rows, each walked column by
//   column, so that workgroups running together share A and B slices in L2),
//   KS: K groups (sliced K): KS groups of TX * TY threads each compute the whole tile over every KS-th K-slice
//   (group g takes slices g, g + KS, ...; each group has its own double-buffered slices), then the partial
//   tiles are summed through workgroup memory (group 0 adds the others' in group order) and group 0 writes C.
//   More warps per SM for products with few tiles, without split-K's second pass; KS = 1: one group.
// Operand readers, prepended by the wrapper from the format table (`operandReader` in ops/core/matmul.ts):
//   at_a(e) / at_b(e) -> f32 (element e of a4 / b4), vec8_a(e, lim) / vec8_b(e, lim) -> array<vec4f, 2> (the 8
//   elements from e along the contiguous dim; f32 reads the second 4 only when lim > 4).
// Overrides: TRANS_A, TRANS_B, VEC_A, VEC_B (16-byte global loads:
//   the operand's contiguous dim and batch stride are multiples of 4 (f32) or 8 (16-bit)), VEC_C (N % 4 == 0),
//   HAS_BIAS, ACCUM.
// Grid: x = ceil(N / BN), y = ceil(M / BM), z = batch. Workgroup: (BN / TN) * (BM / TM) * KS threads.
// Scheme: both K-slices live in workgroup memory k-major (As[k][m], Bs[k][n], vec4 along m / n), double
//   buffered: the next slice is fetched into registers while the current one is multiplied, then stored into
//   the other buffer, one barrier per slice. A thread owns rows (g * TY + ty) * 4 + i and columns
//   (h * TX + tx) * 4 + j, so its fragment reads are vec4s that neighbouring threads take from neighbouring
//   words (no bank conflicts) and its C stores are coalesced vec4s. Out-of-range elements load as 0.
override TRANS_A: bool = false;
override TRANS_B: bool = false;
override VEC_A: bool = false;
override VEC_B: bool = false;
override VEC_C: bool = false;
override HAS_BIAS: bool = false;
override ACCUM: bool = false;
// DYN (software adapters): loop bounds are multiplied by a uniform 1 so the shader compiler keeps loops rolled;
// an unrolled tile costs seconds of LLVM time per pipeline on lavapipe. On GPUs DYN is false: loops unroll.
override DYN: bool = false;

fn dn(x: u32) -> u32 { return select(x, x * p.one, DYN); }

const TX: u32 = BN / TN;
const TY: u32 = BM / TM;
const WG: u32 = TX * TY;                   // threads of one K group
const WTY: u32 = 32u / WTX;                 // a warp of 32 threads covers WTX x WTY thread positions
const AS_N: u32 = BK * BM / 4u;            // vec4s in one A slice
const BS_N: u32 = BK * BN / 4u;
const PA: u32 = (AS_N / 2u + WG - 1u) / WG; // pairs of 4-element groups each thread fetches
const PB: u32 = (BS_N / 2u + WG - 1u) / WG;
const NACC: u32 = TM * TN / 4u;             // accumulator vec4s per thread
// As also holds one group's partial tile (WG * NACC vec4s) for the K-group sum when KS > 1
const AS_LEN: u32 = max(2u * KS * AS_N, select(0u, WG * NACC, KS > 1u));

@group(0) @binding(1) var<storage, read> a4: array<vec4u>;
@group(0) @binding(2) var<storage, read> b4: array<vec4u>;
@group(0) @binding(4) var<storage, read_write> c4: array<vec4f>;

var<workgroup> As: array<vec4f, AS_LEN>;
var<workgroup> Bs: array<vec4f, 2u * KS * BS_N>;
var<private> ra: array<vec4f, 2u * PA>;
var<private> rb: array<vec4f, 2u * PB>;

// Fetch the A slice [m0, m0 + BM) x [k0, k0 + BK) into ra: thread lid takes pairs pr = l * WG + lid of
// 4-element groups that are adjacent along A's contiguous dim (8 contiguous elements).
fn fetchA(bo: u32, m0: u32, k0: u32, lid: u32) {
  for (var l = 0u; l < dn(PA); l++) {
    let pr = l * WG + lid;
    if (pr < AS_N / 2u) {
      let q = 2u * pr;
      var e: u32;       // element index of the first of the 8
      var ok0: bool;    // the row (m or k) is in range
      var lim: u32;     // elements e .. e + lim - 1 along the contiguous dim are in range
      if (!TRANS_A) {
        let m = m0 + q / (BK / 4u);
        let k = k0 + (q % (BK / 4u)) * 4u;
        e = bo + m * p.lda + k;
        ok0 = m < p.M;
        lim = select(0u, p.K - k, k < p.K);
      } else {
        let k = k0 + q / (BM / 4u);
        let m = m0 + (q % (BM / 4u)) * 4u;
        e = bo + k * p.lda + m;
        ok0 = k < p.K;
        lim = select(0u, p.M - m, m < p.M);
      }
      var v0 = vec4f(0.0);
      var v1 = vec4f(0.0);
      if (ok0 && lim > 0u) {
        if (VEC_A) {
          let v = vec8_a(e, lim);
          v0 = v[0];
          v1 = v[1];
        } else {
          for (var j = 0u; j < dn(4u); j++) {
            if (j < lim) { v0[j] = at_a(e + j); }
            if (j + 4u < lim) { v1[j] = at_a(e + 4u + j); }
          }
        }
      }
      ra[2u * l] = v0;
      ra[2u * l + 1u] = v1;
    }
  }
}

fn fetchB(bo: u32, n0: u32, k0: u32, lid: u32) {
  for (var l = 0u; l < dn(PB); l++) {
    let pr = l * WG + lid;
    if (pr < BS_N / 2u) {
      let q = 2u * pr;
      var e: u32;
      var ok0: bool;
      var lim: u32;
      if (TRANS_B) {
        let n = n0 + q / (BK / 4u);
        let k = k0 + (q % (BK / 4u)) * 4u;
        e = bo + n * p.ldb + k;
        ok0 = n < p.N;
        lim = select(0u, p.K - k, k < p.K);
      } else {
        let k = k0 + q / (BN / 4u);
        let n = n0 + (q % (BN / 4u)) * 4u;
        e = bo + k * p.ldb + n;
        ok0 = k < p.K;
        lim = select(0u, p.N - n, n < p.N);
      }
      var v0 = vec4f(0.0);
      var v1 = vec4f(0.0);
      if (ok0 && lim > 0u) {
        if (VEC_B) {
          let v = vec8_b(e, lim);
          v0 = v[0];
          v1 = v[1];
        } else {
          for (var j = 0u; j < dn(4u); j++) {
            if (j < lim) { v0[j] = at_b(e + j); }
            if (j + 4u < lim) { v1[j] = at_b(e + 4u + j); }
          }
        }
      }
      rb[2u * l] = v0;
      rb[2u * l + 1u] = v1;
    }
  }
}

// Store the fetched slices into buffer `buf` (of the thread's K group's pair) of As / Bs (k-major).
fn stash(buf: u32, lid: u32) {
  for (var l = 0u; l < dn(PA); l++) {
    let pr = l * WG + lid;
    if (pr < AS_N / 2u) {
      for (var h = 0u; h < dn(2u); h++) {
        let q = 2u * pr + h;
        let v = ra[2u * l + h];
        if (!TRANS_A) {
          let r = q / (BK / 4u);
          let kc = (q % (BK / 4u)) * 4u;
          for (var j = 0u; j < dn(4u); j++) {
            As[buf * AS_N + (kc + j) * (BM / 4u) + r / 4u][r % 4u] = v[j];
          }
        } else {
          As[buf * AS_N + q] = v;   // q = kr * (BM / 4) + mc
        }
      }
    }
  }
  for (var l = 0u; l < dn(PB); l++) {
    let pr = l * WG + lid;
    if (pr < BS_N / 2u) {
      for (var h = 0u; h < dn(2u); h++) {
        let q = 2u * pr + h;
        let v = rb[2u * l + h];
        if (TRANS_B) {
          let r = q / (BK / 4u);
          let kc = (q % (BK / 4u)) * 4u;
          for (var j = 0u; j < dn(4u); j++) {
            Bs[buf * BS_N + (kc + j) * (BN / 4u) + r / 4u][r % 4u] = v[j];
          }
        } else {
          Bs[buf * BS_N + q] = v;
        }
      }
    }
  }
}

@compute @workgroup_size(WG * KS)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lidw: u32) {
  let kg = lidw / WG;                       // K group
  let lid = lidw % WG;                      // thread index within the group
  let lane = lid % 32u;
  let warp = lid / 32u;
  let tx = (warp % (TX / WTX)) * WTX + lane % WTX;
  let ty = (warp / (TX / WTX)) * WTY + lane / WTX;
  var mt = wg.y;
  var ntl = wg.x;
  if (GM > 0u) {
    let nx = (p.N + BN - 1u) / BN;
    let ny = (p.M + BM - 1u) / BM;
    let lin = wg.y * nx + wg.x;
    let band = lin / (GM * nx);
    let first = band * GM;
    let rows = min(ny - first, GM);
    let r = lin - band * GM * nx;
    mt = first + r % rows;
    ntl = r / rows;
  }
  let m0 = mt * BM;
  let n0 = ntl * BN;
  let boa = wg.z * p.sa;
  let bob = wg.z * p.sb;
  var acc: array<vec4f, NACC>;
  // K group kg takes slices kg, kg + KS, ...: KS slices per step (slices past K load as zeros)
  let nt = (p.K + BK * KS - 1u) / (BK * KS);
  fetchA(boa, m0, kg * BK, lid);
  fetchB(bob, n0, kg * BK, lid);
  stash(2u * kg, lid);
  workgroupBarrier();
  for (var t = 0u; t < nt; t++) {
    let cur = 2u * kg + t % 2u;
    if (t + 1u < nt) {
      fetchA(boa, m0, ((t + 1u) * KS + kg) * BK, lid);
      fetchB(bob, n0, ((t + 1u) * KS + kg) * BK, lid);
    }
    let ab = cur * AS_N;
    let bb = cur * BS_N;
    for (var k = 0u; k < dn(BK); k++) {
      var af: array<vec4f, TM / 4u>;
      var bf: array<vec4f, TN / 4u>;
      for (var g = 0u; g < dn(TM / 4u); g++) { af[g] = As[ab + k * (BM / 4u) + g * TY + ty]; }
      for (var h = 0u; h < dn(TN / 4u); h++) { bf[h] = Bs[bb + k * (BN / 4u) + h * TX + tx]; }
      for (var g = 0u; g < dn(TM / 4u); g++) {
        for (var i = 0u; i < dn(4u); i++) {
          let av = vec4f(af[g][i]);
          for (var h = 0u; h < dn(TN / 4u); h++) {
            let ai = (g * 4u + i) * (TN / 4u) + h;
            acc[ai] = fma(av, bf[h], acc[ai]);
          }
        }
      }
    }
    if (t + 1u < nt) { stash(4u * kg + 1u - cur, lid); }
    workgroupBarrier();
  }
  if (KS > 1u) {
    // sum the K groups' partial tiles into group 0 (fixed order: deterministic), through As
    for (var g = 1u; g < KS; g++) {
      if (kg == g) {
        for (var i = 0u; i < dn(NACC); i++) { As[i * WG + lid] = acc[i]; }
      }
      workgroupBarrier();
      if (kg == 0u) {
        for (var i = 0u; i < dn(NACC); i++) { acc[i] += As[i * WG + lid]; }
      }
      workgroupBarrier();
    }
    if (kg != 0u) { return; }
  }
  let cb = wg.z * p.M * p.N;
  for (var g = 0u; g < dn(TM / 4u); g++) {
    for (var i = 0u; i < dn(4u); i++) {
      let m = m0 + (g * TY + ty) * 4u + i;
      if (m < p.M) {
        for (var h = 0u; h < dn(TN / 4u); h++) {
          let n = n0 + (h * TX + tx) * 4u;
          if (n < p.N) {
            var v = p.alpha * acc[(g * 4u + i) * (TN / 4u) + h];
            let ci = cb + m * p.N + n;
            if (VEC_C) {
              if (HAS_BIAS) { v += vec4f(read_bias(n), read_bias(n + 1u), read_bias(n + 2u), read_bias(n + 3u)); }
              if (ACCUM) { v += c4[ci >> 2u]; }
              c4[ci >> 2u] = v;
            } else {
              for (var j = 0u; j < dn(4u); j++) {
                if (n + j < p.N) {
                  let cj = ci + j;
                  var s = v[j];
                  if (HAS_BIAS) { s += read_bias(n + j); }
                  if (ACCUM) { s += c4[cj >> 2u][cj & 3u]; }
                  c4[cj >> 2u][cj & 3u] = s;
                }
              }
            }
          }
        }
      }
    }
  }
}
