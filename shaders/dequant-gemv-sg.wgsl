// dequant-gemv-sg: the decode-shape product Y [M, N] = X [M, K] W^T (+ bias) for M <= 16 rows, bandwidth-bound,
//   with subgroup reductions. W is a quantized matrix (int8 / int4 / NF4 codes with block scales, layouts in
//   packages/backend/src/ops/quant/formats.ts) or a plain 16-bit float matrix (f16 / bf16, two per u32 word: the
//   float GEMV baseline runs the same kernel).
// Bindings: x (read f32, f16 or bf16 [M, K]), q (read u32 [N, wpr]: W's words, padded rows; for 16-bit float
//   weights [N, K] with K even), s (read f32 or f16 [N, nb] block scales; for float weights x again, unused),
//   bias (read [N], any float; x again when HAS_BIAS is false), y (rw f32 [M, N]).
//   Where the generated code reads 16 bytes at a time it re-declares x as x4: array<vec4f>, and q as
//   q4: array<vec4u> (or q2: array<vec2u>, chunks of 2 words) on their binding numbers (prepended by the wrapper,
//   only when used).
// Params: N, K, G (elements per block; any value for float weights), nb (blocks per row), nc (chunks per row:
//   wpr / CW), gx (workgroups per grid row).
// Prepended by the wrapper (ops/quant/gemv.ts), all WGSL consts: MR (rows of X), R (rows of W per workgroup),
//   WG (threads), NSG (most subgroups a workgroup can have: WG / the adapter's smallest subgroup size), CW (u32
//   words per chunk: 4, one vec4u load, 2 or 1; GemvSetting.chunkWords), CE (elements per chunk), HAS_BIAS, FLOAT_W (16-bit float weights),
//   SG (the fixed subgroup size, main_rows only), `fn deq_f2(w: u32) -> vec2f` (float weights: the two values of a
//   word, from the format table), the FMT override (quant-common), the chunk loop at the //@walk lines (the same in
//   both entry points: WALK in gemv.ts), and the generated code at the //@acc, //@pre, //@load, //@fast, //@tail and
//   //@reduce lines: named accumulators a_<r>_<m>, (//@pre, where the setting prefetches) the first chunk's words
//   pw_<r> and scales ps_<r> loaded before the loop, the R rows' chunk words w_<r> and scales s_<r> (with prefetch:
//   taken from pw_<r> / ps_<r>, which then load chunk c + cstep, clamped to the row, so that the next chunk's
//   loads are in flight while this one is computed), the unrolled
//   dequantize-and-dot of a whole chunk, the masked element loop of a row's last, partial chunk, the
//   subgroupAdd of every accumulator (//@reduce), and for main_rows (below) its sums written out (//@rows_out).
// Variants (ops/quant/gemv.ts): f32 weights (FLOAT_W, one element per word: chunks bit-cast to vec2f / vec4f);
//   double-quantized NF4 scales (`dq`): s holds their u8 codes and the wrapper adds bindings absmax2 and offset
//   after y, and scale_at decodes DYN_MAP[code] * absmax2[i / 256] + offset where a scale is read; several weights
//   in one dispatch (`parts`, ops/quant/gemv-parts.ts): bindings x, then each part's q / s (/ absmax2 / offset),
//   the parts' biases, y; the wrapper replaces the n0 lines of both entry points by the unit's part pj, its first
//   row n0 in that part, the part's rows nEnd and its block of y at yb (part_of / unit0 / rows_of / yo_of over
//   params N, N1, N2, U1, U2, yo1, yo2), the //@walk line by one walk per part on that part's bindings, and the
//   output index and bias by the part's.
// Grid: ceil(N / R) workgroups (x + y * gx). Workgroup: WG threads; thread t takes chunks t, t + WG, ... of the R
//   rows n0 .. n0 + R - 1 (n0 = R * workgroup index; rows past N read row N - 1 and write nothing), so one load
//   instruction of a subgroup reads consecutive 16-byte words of one row, and each X chunk read serves R rows.
// Scheme: a chunk (CE elements, within one block) is dequantized without per-element branches or integer-to-float
//   conversions (int4 / int8 codes are OR-ed into the mantissa of 2^23 and the offset subtracted: exact; two ways,
//   `deq_*` and `deq_*m` below), dotted
//   with X, and scaled once per chunk; then each accumulator is summed over the subgroup (subgroupAdd), the
//   subgroups' sums go through workgroup memory, and thread t adds those of outputs t, t + WG, ... < R * MR in a
//   fixed order (deterministic).
var<workgroup> lut: array<f32, 16>;
var<workgroup> part: array<f32, R * MR * NSG>;

fn nf4_value(u: u32) -> f32 { return lut[u]; }

// four int8 codes of a word (element e in byte e), as exact f32 values
fn deq_i8(w: u32) -> vec4f {
  return bitcast<vec4f>(((vec4u(w) >> vec4u(0u, 8u, 16u, 24u)) & vec4u(0xffu)) ^ vec4u(0x4B000080u)) - vec4f(8388736.0);
}

// four of the eight 4-bit codes of a word: elements 0..3 (sh = SH_LO) or 4..7 (SH_HI); element 2j is the high
// nibble of byte j
const SH_LO = vec4u(4u, 0u, 12u, 8u);
const SH_HI = vec4u(20u, 16u, 28u, 24u);
fn deq_i4(w: u32, sh: vec4u) -> vec4f {
  return bitcast<vec4f>(((vec4u(w) >> sh) & vec4u(15u)) | vec4u(0x4B000000u)) - vec4f(8388616.0);
}
// decode 'mask' (gemvTuning.decode): the same values with one AND-OR (and, for int8, XOR) per element and no
// per-element shift. Element j of h (int4: h = w for elements 0..3, w >> 16 for 4..7; int8: bytes 0, 1 of w and of
// w >> 16) sits at bit offset O; OR-ed into 2^23's mantissa it reads 2^23 + u 2^O, and one fma scales that by 2^-O
// and subtracts 2^(23-O) + the code's offset: exact (integers below 2^24, a power-of-two scale).
const M4 = vec4u(0xF0u, 0xFu, 0xF000u, 0xF00u);
const S4 = vec4f(0.0625, 1.0, 0.000244140625, 0.00390625);
const B4 = vec4f(524296.0, 8388616.0, 2056.0, 32776.0);
fn deq_i4m(h: u32) -> vec4f {
  return fma(bitcast<vec4f>((vec4u(h) & M4) | vec4u(0x4B000000u)), S4, -B4);
}
const M8 = vec4u(0xFFu, 0xFF00u, 0xFFu, 0xFF00u);
const X8 = vec4u(0x4B000080u, 0x4B008000u, 0x4B000080u, 0x4B008000u);
const S8 = vec4f(1.0, 0.00390625, 1.0, 0.00390625);
const B8 = vec4f(8388736.0, 32896.0, 8388736.0, 32896.0);
fn deq_i8m(w: u32) -> vec4f {
  let h = w >> 16u;
  return fma(bitcast<vec4f>((vec4u(w, w, h, h) & M8) ^ X8), S8, -B8);
}
fn deq_nf4(w: u32, sh: vec4u) -> vec4f {
  let u = (vec4u(w) >> sh) & vec4u(15u);
  return vec4f(lut[u.x], lut[u.y], lut[u.z], lut[u.w]);
}

// element e (0 .. elements per word - 1) of a word, unscaled (the partial last chunk)
fn w_elem(w: u32, e: u32) -> f32 {
  if (FLOAT_W) {
    let v = deq_f2(w);
    return select(v.x, v.y, e == 1u);
  }
  return q_value(w, e);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sid: u32, @builtin(num_subgroups) nsg: u32) {
  let n0 = (wg.x + wg.y * p.gx) * R;
  if (!FLOAT_W && FMT == 2u) {
    if (li < 16u) { lut[li] = NF4_CODE[li]; }
    workgroupBarrier();
  }
  //@acc
  let c0 = li;
  let cstep = WG;
  //@walk
  //@reduce
  workgroupBarrier();
  for (var o = li; o < R * MR; o += WG) {
    let n = n0 + o / MR;
    if (n < p.N) {
      var v = 0.0;
      for (var i = 0u; i < nsg; i++) { v += part[o * NSG + i]; }
      if (HAS_BIAS) { v += read_bias(n); }
      y[(o % MR) * p.N + n] = v;
    }
  }
}

// Entry point main_rows (gemvTuning's subgroupRows; adapters with one fixed subgroup size SG): each subgroup owns R
// rows of W (n0 = R * (workgroup index * WG / SG + subgroup_id)) and lane l takes chunks l, l + SG, ...; the
// workgroup's subgroups walk the same chunks of X together (so that X's loads can hit the L1 cache). Each
// accumulator is summed over the subgroup and the elected lane writes it: no workgroup memory or barrier after
// the NF4 table. Grid: ceil(N / (R * WG / SG)) workgroups.
@compute @workgroup_size(WG)
fn main_rows(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32,
             @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let n0 = ((wg.x + wg.y * p.gx) * (WG / SG) + sid) * R;
  if (!FLOAT_W && FMT == 2u) {
    if (li < 16u) { lut[li] = NF4_CODE[li]; }
    workgroupBarrier();
  }
  //@acc
  let c0 = lane;
  let cstep = SG;
  //@walk
  //@rows_out
}
