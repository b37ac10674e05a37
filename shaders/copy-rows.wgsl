// copy_rows: dst[b, dst_off + r, j] = src[b, src_off + r, j] for b < batch, r < rows, j < row_len (f32), for
// PAIRS (1 or 2) pairs of tensors of one geometry: writes a block of positions into a KV cache (the keys and
// the values of a step in one dispatch), or gathers a prefix of it. Views [batch, *, row_len] with src_rows /
// dst_rows rows per batch.
// Bindings: src (read, float), dst (rw f32); with two pairs also src2 (read, float), dst2 (rw f32).
// Params: batch, rows, row_len, src_rows, dst_rows, src_off, dst_off, row (threads per grid row).
// Prepended: const PAIRS, fn copy_at(q, si, di) (element si of pair q's source into element di of its
// destination). One thread per element, workgroup 256.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x + g.y * p.row;
  let per_b = p.rows * p.row_len;
  let n = p.batch * per_b;
  if (i >= PAIRS * n) { return; }
  let q = i / n;
  let e = i - q * n;
  let b = e / per_b;
  let rem = e - b * per_b;
  let r = rem / p.row_len;
  let j = rem - r * p.row_len;
  copy_at(q, (b * p.src_rows + p.src_off + r) * p.row_len + j, (b * p.dst_rows + p.dst_off + r) * p.row_len + j);
}
