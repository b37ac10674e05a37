// fill: y[i] = word, a 32-bit pattern (an f32, an i32/u32, or two packed 16-bit halves).
// Bindings: y (rw u32 words).
// Params: n (words), row (threads per grid row: i = gid.x + gid.y * row), word (the pattern).
// Entry point `arange` instead writes y[i] = start + i * step (f32 or i32 by the constant INT), with params
// n, row, start, step passed as the raw bits of f32 or i32 values in `word`/`word2` (see the wrapper).
// Workgroup: 256 threads, one word each.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  y[i] = p.word;
}

@compute @workgroup_size(256)
fn arange(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  if (i >= p.n) { return; }
  if (INT) {
    y[i] = bitcast<u32>(bitcast<i32>(p.word) + i32(i) * bitcast<i32>(p.word2));
  } else {
    y[i] = bitcast<u32>(bitcast<f32>(p.word) + f32(i) * bitcast<f32>(p.word2));
  }
}
