// quant-common: decoding of the quantized weight formats (layouts in packages/backend/src/ops/quant/formats.ts),
// prepended (after the generated code-book constants NF4_CODE / NF4_THRESH / DYN_MAP) to every quant-* and
// dequant-* shader. No bindings of its own.
// Override FMT: 0 int8 (4 codes per u32 word, element e in byte e, two's complement), 1 int4 (8 per word,
//   element e in byte e/2, high nibble for even e; value u - 8), 2 nf4 (nibble order as int4; value NF4_CODE[u]).
// Each including shader defines `fn nf4_value(u: u32) -> f32` (a workgroup copy of NF4_CODE where it is hot).
override FMT: u32 = 0u;

// codes per u32 word
fn q_epw() -> u32 { return select(8u, 4u, FMT == 0u); }

// the unscaled value of element e (0 .. epw-1) of word w
fn q_value(w: u32, e: u32) -> f32 {
  if (FMT == 0u) { return f32(bitcast<i32>(w << (24u - 8u * e)) >> 24u); }
  let u = (w >> (8u * (e >> 1u) + 4u * (1u - (e & 1u)))) & 15u;
  if (FMT == 1u) { return f32(i32(u) - 8); }
  return nf4_value(u);
}

// the code of x in a block with scale s (s > 0), already shifted to element e's place in its word
fn q_encode(x: f32, s: f32, e: u32) -> u32 {
  if (FMT == 0u) {
    let q = i32(clamp(round(x / s), -127.0, 127.0));
    return (bitcast<u32>(q) & 0xffu) << (8u * e);
  }
  var u = 0u;
  if (FMT == 1u) {
    u = u32(i32(clamp(round(x / s), -7.0, 7.0)) + 8);
  } else {
    let v = x / s;
    for (var t = 0u; t < 15u; t++) { u += select(0u, 1u, v > NF4_THRESH[t]); }
  }
  return u << (8u * (e >> 1u) + 4u * (1u - (e & 1u)));
}

// the stored scale of a block whose largest magnitude is amax (int4 scales are f16: rounded here so that codes
// are computed against the value the kernels will read)
fn q_scale(amax: f32) -> f32 {
  if (FMT == 0u) { return amax / 127.0; }
  if (FMT == 1u) { return f16_bits_to_f32(f32_to_f16_bits(amax / 7.0)); }
  return amax;
}
