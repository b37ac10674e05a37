// transpose (strided gather): y[i] = x[off + sum_k c_k(i) * s_k], where c(i) are the coordinates of output
// element i in the output dims d (row-major). Materialises permutations and any strided view contiguously.
// Bindings: x (read, f32/f16/bf16 via read_x), y (rw u32 words: f32 bits, or two packed 16-bit values).
// Params: n (output elements), row (threads per grid row: t = gid.x + gid.y * row), off (element offset),
//   d0..d5 (output dims, outermost first, padded with 1 on the left after merging), s0..s5 (input strides).
// Constants: RANK (dims in use, 1..6).
// Prepended by the wrapper from the format table (kernel.ts `wgslPacker('y', dtype)`): PW_y (output elements
//   per word) and pack_y (PW_y f32 values -> one word). One thread per output word.
// Workgroup: 256 threads.

fn src_index(i: u32) -> u32 {
  var r = i;
  var a = p.off;
  if (RANK > 1u) {
    var q = r / p.d5; a += (r - q * p.d5) * p.s5; r = q;
    if (RANK > 2u) { q = r / p.d4; a += (r - q * p.d4) * p.s4; r = q; }
    if (RANK > 3u) { q = r / p.d3; a += (r - q * p.d3) * p.s3; r = q; }
    if (RANK > 4u) { q = r / p.d2; a += (r - q * p.d2) * p.s2; r = q; }
    if (RANK > 5u) { q = r / p.d1; a += (r - q * p.d1) * p.s1; r = q; }
  }
  switch (6u - RANK) {
    case 0u: { a += r * p.s0; }
    case 1u: { a += r * p.s1; }
    case 2u: { a += r * p.s2; }
    case 3u: { a += r * p.s3; }
    case 4u: { a += r * p.s4; }
    default: { a += r * p.s5; }
  }
  return a;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = g.x + g.y * p.row;
  let i = PW_y * t;
  if (i >= p.n) { return; }
  var x: array<f32, PW_y>;
  for (var j = 0u; j < PW_y; j++) {
    if (i + j < p.n) { x[j] = read_x(src_index(i + j)); }
  }
  y[t] = pack_y(x);
}
