// matmul-tc-tail: the second kernel of a tensor-core product with a split tail (ops/core/matmul-tc.ts, `tcTail`):
// the last `tiles` workgroup tiles of the product (in the kernel's linear tile order: batch, then tile rows, then
// tile columns) were computed by matmul-tc.wgsl as `chunks` partial products each, over consecutive K chunks, into
// `part` ([tiles, chunks, BM, BN] raw f32 accumulators, rows and columns past C's edge included); here each element
// of those tiles is their sum in chunk order (deterministic), times alpha, written to C within its bounds.
// Bindings: part read f32 [tiles * chunks * BM * BN]; c rw f32 [batch, M, N].
// Params: n (tiles * BM * BN), row (threads per grid row), M, N, full (tiles before the tail), chunks, alpha (f32).
// Consts (prepended): BM, BN.
// Workgroup: 256 threads, one element each; grid 2-D (grid.ts).
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x + gid.y * p.row;
  if (i >= p.n) { return; }
  let r = i / (BM * BN);
  let e = i % (BM * BN);
  let ntx = (p.N + BN - 1u) / BN;
  let nxy = ntx * ((p.M + BM - 1u) / BM);
  let tile = p.full + r;
  let m = ((tile % nxy) / ntx) * BM + e / BN;
  let n = ((tile % nxy) % ntx) * BN + e % BN;
  if (m >= p.M || n >= p.N) { return; }
  let base = r * p.chunks * BM * BN + e;
  var s = 0.0;
  for (var j = 0u; j < p.chunks; j++) { s += read_part(base + j * BM * BN); }
  c[(tile / nxy) * p.M * p.N + m * p.N + n] = p.alpha * s;
}
