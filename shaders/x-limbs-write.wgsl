// x-limbs-write: the writer of X's int8 limbs, the input of the integer int4 GEMV (`dequant-gemv-sg.wgsl` with
//   `xLimbs`; layout owned by packages/backend/src/ops/quant/x-limbs.ts). Appended to the kernels that produce X
//   (`x-limbs.wgsl`, and `rmsnorm.wgsl` with limbs), which define
//   fn limb_src(e: u32) -> f32   element e of the source
//   xl: array<u32> (read_write)  the limbs.
// A group of 16 elements v_0..v_15 with largest magnitude m becomes integers q_e = round(v_e 2^-e) (exact: a
// power-of-two scale), e the least exponent with m 2^-e <= QM = 127 (2^16 + 2^8 + 1), so that
// q_e = a 2^16 + b 2^8 + c with balanced limbs a, b in [-127, 127], c in [-128, 127]; the scale is 2^e, and
// v_e = q_e 2^e to within 2^(e-1) <= m 2^-23. No division: every GPU writes the same words.
// Limb words of group g (12 words at 12 g): for j = 0, 1 (elements 8 j .. 8 j + 7) and limb L = a, b, c (0, 1, 2),
// word 6 j + 2 L holds elements 8 j + 0, 2, 4, 6 and word 6 j + 2 L + 1 elements 8 j + 1, 3, 5, 7 (byte k: the
// (k + 1)-th of those, signed), matching the int4 words' even (high nibbles) and odd (low nibbles) elements. The
// scale 2^e (f32 bits) is word 3 K / 4 + g.
const QM: f32 = 8355711.0;

fn write_limbs(src: u32, dst: u32, g: u32, K: u32) {
  var v: array<f32, 16>;
  var m = 0.0;
  for (var i = 0u; i < 16u; i++) {
    v[i] = limb_src(src + 16u * g + i);
    m = max(m, abs(v[i]));
  }
  var e = frexp(m).exp - 23;
  if (ldexp(m, -e) > QM) { e += 1; }
  for (var j = 0u; j < 2u; j++) {
    for (var par = 0u; par < 2u; par++) {
      var la = vec4i(0);
      var lb = vec4i(0);
      var lc = vec4i(0);
      for (var k = 0u; k < 4u; k++) {
        let q = i32(round(ldexp(v[8u * j + 2u * k + par], -e)));
        let c = ((q + 128) & 255) - 128;
        let q1 = (q - c) >> 8u;
        let b = ((q1 + 128) & 255) - 128;
        la[k] = (q1 - b) >> 8u;
        lb[k] = b;
        lc[k] = c;
      }
      let o = dst + 12u * g + 6u * j + par;
      xl[o] = pack4xI8(la);
      xl[o + 2u] = pack4xI8(lb);
      xl[o + 4u] = pack4xI8(lc);
    }
  }
  xl[dst + 3u * K / 4u + g] = bitcast<u32>(ldexp(1.0, e));
}
