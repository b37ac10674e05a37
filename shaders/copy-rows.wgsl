// copy_rows: dst[b, dst_off + r, j] = src[b, src_off + r, j] for b < batch, r < rows, j < row_len (f32).
// Views [batch, *, row_len] with src_rows / dst_rows rows per batch: writes a block of positions into a
// KV cache, or gathers a prefix of it. Bindings: src (read f32), dst (rw f32).
// Params: batch, rows, row_len, src_rows, dst_rows, src_off, dst_off, row (threads per grid row).
// One thread per element, workgroup 256.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  let per_b = p.rows * p.row_len;
  if (i >= p.batch * per_b) { return; }
  let b = i / per_b;
  let rem = i - b * per_b;
  let r = rem / p.row_len;
  let j = rem - r * p.row_len;
  dst[(b * p.dst_rows + p.dst_off + r) * p.row_len + j] = read_src((b * p.src_rows + p.src_off + r) * p.row_len + j);
}
