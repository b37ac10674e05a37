// x-limbs-write: the writer of X's int8 limbs, the input of the integer int4 GEMV (`dequant-gemv-sg.wgsl` with
//   `xLimbs`; layout owned by packages/backend/src/ops/quant/x-limbs.ts). Appended to the kernels that produce X
//   (`x-limbs.wgsl`, and `rmsnorm.wgsl` with limbs), which define
//   fn limb_src(e: u32) -> f32   element e of the source
//   xl: array<u32> (read_write)  the limbs
//   and enable subgroups. Unit i = 4 g + 2 j + p of a row (one invocation each) is the 4 elements of group g that
//   share limb words: 8 j + p, + 2, + 4, + 6. The 4 units of a group must be the 4 invocations of one quad (the
//   caller's invocation index = i mod 4, in uniform control flow): the group's largest magnitude and its sum of q
//   come from quadSwapX / quadSwapY.
// A group of 16 elements v_0..v_15 with largest magnitude m becomes integers q_e = round(v_e 2^-e) (exact: a
// power-of-two scale), e the least exponent with m 2^-e <= QM = 127 (2^16 + 2^8 + 1), so that
// q_e = a 2^16 + b 2^8 + c with balanced limbs a, b in [-127, 127], c in [-128, 127]; the scale is 2^e, and
// v_e = q_e 2^e to within 2^(e-1) <= m 2^-23. No division: every GPU writes the same words.
// Limb words of group g (12 words at 12 g): for j = 0, 1 (elements 8 j .. 8 j + 7) and limb L = a, b, c (0, 1, 2),
// word 6 j + 2 L holds elements 8 j + 0, 2, 4, 6 and word 6 j + 2 L + 1 elements 8 j + 1, 3, 5, 7 (byte k: the
// (k + 1)-th of those, signed), matching the int4 words' even (high nibbles) and odd (low nibbles) elements. The
// scale 2^e (f32 bits) is word 3 K / 4 + g, and 8 (q_0 + ... + q_15) (i32) word 3 K / 4 + K / 16 + g.
const QM: f32 = 8355711.0;

// unit i of the row `row` (source elements from src); `live`: false for invocations past the last unit, which
// take part in the quad operations and write nothing
fn write_limbs(src: u32, row: u32, i: u32, K: u32, live: bool) {
  store_limbs(load_limbs(src, i, live), row, i, K, live);
}

// the elements of unit i (zeros where not live)
fn load_limbs(src: u32, i: u32, live: bool) -> vec4f {
  let e0 = src + 16u * (i >> 2u) + 8u * ((i >> 1u) & 1u) + (i & 1u);
  var v = vec4f(0.0);
  if (live) { v = vec4f(limb_src(e0), limb_src(e0 + 2u), limb_src(e0 + 4u), limb_src(e0 + 6u)); }
  return v;
}

// unit i's limbs (and, from the quad's first invocation, its group's step and 8 sum q) from its elements v
fn store_limbs(v: vec4f, row: u32, i: u32, K: u32, live: bool) {
  let g = i >> 2u;
  var m = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
  m = max(m, quadSwapX(m));
  m = max(m, quadSwapY(m));
  var e = frexp(m).exp - 23;
  if (ldexp(m, -e) > QM) { e += 1; }
  let q = vec4i(round(ldexp(v, vec4i(-e))));
  let c = ((q + 128) & vec4i(255)) - 128;
  let q1 = (q - c) >> vec4u(8u);
  let b = ((q1 + 128) & vec4i(255)) - 128;
  let a = (q1 - b) >> vec4u(8u);
  var qs = q.x + q.y + q.z + q.w; // |sum of 16| < 2^31: exact
  qs += quadSwapX(qs);
  qs += quadSwapY(qs);
  if (live) {
    let dst = row * (7u * K / 8u); // the row's first word
    let o = dst + 12u * g + 6u * ((i >> 1u) & 1u) + (i & 1u);
    xl[o] = pack4xI8(a);
    xl[o + 2u] = pack4xI8(b);
    xl[o + 4u] = pack4xI8(c);
    if ((i & 3u) == 0u) {
      xl[dst + 3u * K / 4u + g] = bitcast<u32>(ldexp(1.0, e));
      xl[dst + 3u * K / 4u + K / 16u + g] = bitcast<u32>(8 * qs); // |8 sum q| < 2^30
    }
  }
}
