// transpose-tiled16-v2: batched 2-D transpose y[b, c, r] = x[b, r, c] of contiguous [B, R, C] 16-bit elements (f16,
// bf16: moved as bits) into [B, C, R], for R and C multiples of 8 (16-byte units on both global sides). v1 (the
// sibling file) keeps one element per workgroup word; this one keeps pairs: two source rows are loaded together,
// so each output word (two consecutive rows of one source column) is formed in registers, and workgroup memory
// moves half the words, with no unpacking on the way out.
// Bindings: x (read, 16-bit storage; used through x4: array<vec4u>, 8 elements per load), y (rw; used through y4:
//   array<vec4u>, declared by the wrapper on the same binding numbers).
// Consts: TR (source rows per tile: 64 or 128).
// Params: R, C (matrix dims), zoff (first batch of this dispatch).
// Grid: x = ceil(C / 64), y = ceil(R / TR), z = batches of this dispatch (<= 65535; the wrapper splits more).
// Workgroup: 256 threads moving a TR x 64 tile (TR = 128: 16.3 KiB of workgroup memory, beyond WebGPU's default
// 16 KiB). Load: each job takes one 8-element unit of two source rows (8 threads cover a 128-byte row segment; all
// of a thread's loads are issued before any is used) and writes 8 packed words, tile[column][row pair] (TR / 2 + 1
// words per column: the pad spreads a warp's words over the banks). Store: each job reads 4 consecutive words of a
// tile column (8 source rows) and stores them as one unit of an output row.
const TC: u32 = 64u;
const TP: u32 = TR / 2u + 1u;
var<workgroup> tile: array<u32, TC * TP>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let b = wg.z + p.zoff;
  let c0 = wg.x * TC;
  let r0 = wg.y * TR;
  let base = b * p.R * p.C;
  // every load of the tile first (TR / 32 units of 16 bytes per thread in flight), then the packed words
  var q: array<vec4u, TR / 32u>;
  for (var j = 0u; j < TR / 64u; j++) {
    let u = lid + j * 256u;
    let r = r0 + 2u * (u / 8u);
    let c = c0 + (u % 8u) * 8u;
    if (r < p.R && c < p.C) {
      let i0 = (base + r * p.C + c) / 8u;
      q[2u * j] = x4[i0];
      q[2u * j + 1u] = x4[i0 + p.C / 8u];
    }
  }
  for (var j = 0u; j < TR / 64u; j++) {
    let u = lid + j * 256u;
    let rp = u / 8u;
    let c = (u % 8u) * 8u;
    if (r0 + 2u * rp < p.R && c0 + c < p.C) {
      let q0 = q[2u * j];
      let q1 = q[2u * j + 1u];
      for (var i = 0u; i < 4u; i++) {
        tile[(c + 2u * i) * TP + rp] = (q0[i] & 0xffffu) | (q1[i] << 16u);
        tile[(c + 2u * i + 1u) * TP + rp] = (q0[i] >> 16u) | (q1[i] & 0xffff0000u);
      }
    }
  }
  workgroupBarrier();
  for (var j = 0u; j < TR / 32u; j++) {
    let u = lid + j * 256u;
    let c = u / (TR / 8u);
    let g = u % (TR / 8u);
    let r = r0 + 8u * g;
    if (r < p.R && c0 + c < p.C) {
      let w = c * TP + 4u * g;
      y4[(base + (c0 + c) * p.R + r) / 8u] = vec4u(tile[w], tile[w + 1u], tile[w + 2u], tile[w + 3u]);
    }
  }
}
