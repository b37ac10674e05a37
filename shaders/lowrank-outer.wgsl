// lowrank-outer: partial sums of C[q, j] = sum_t Y[t, q] * Z[t, j] over chunks of t, for a small R (the LoRA
// weight gradients: dB = dY^T u with Y = dY, Z = u; dA^T = x^T v with Y = x, Z = v). Bandwidth-bound on Y,
// read once; lowrank-outer-finish sums the chunks.
// Bindings: y (read, [T, Q], any float dtype via read_y), z (read, [T, R], any float dtype), part (rw f32,
// [S, Q, R]: chunk s's sums).
// Params: T, Q, chunk (rows of t per chunk), nq (workgroups along q), row (workgroups per grid row).
// Constants R and QUAD (`consts`); the //@ lines are straight-line code the wrapper writes for R (//@decl the R
// accumulators a_j, //@fma4 / //@fma their updates from four rows / one row of Y, //@store their writes). Workgroup 256: thread i owns column q = qblock * 256 + i and R sums over the
// chunk's rows; the chunk's Z rows are staged in workgroup memory 64 at a time. Deterministic, no atomics.
const TQ: u32 = 256u;
const TS: u32 = 64u;

var<workgroup> zs: array<f32, TS * R>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let wid = wg.x + wg.y * p.row;
  let qb = wid % p.nq;
  let s = wid / p.nq;
  let q = qb * TQ + lid;
  let t0 = s * p.chunk;
  let t1 = min(t0 + p.chunk, p.T);
  //@decl
  for (var tb = t0; tb < t1; tb += TS) {
    let n = min(TS, t1 - tb);
    for (var e = lid; e < TS * R; e += 256u) {
      var v = 0.0;
      if (e < n * R) { v = read_z(tb * R + e); }
      zs[e] = v;
    }
    workgroupBarrier();
    if (q < p.Q) {
      // four rows per iteration: their loads are in flight together (one at a time, the loop waited on each);
      // QUAD is false for ranks over 16, whose unrolled code would compile slowly
      var i = 0u;
      for (; QUAD && i + 4u <= n; i += 4u) {
        let y0 = read_y((tb + i) * p.Q + q);
        let y1 = read_y((tb + i + 1u) * p.Q + q);
        let y2 = read_y((tb + i + 2u) * p.Q + q);
        let y3 = read_y((tb + i + 3u) * p.Q + q);
        let zo = i * R;
        //@fma4
      }
      for (; i < n; i++) {
        let y0 = read_y((tb + i) * p.Q + q);
        let zo = i * R;
        //@fma
      }
    }
    workgroupBarrier();
  }
  if (q < p.Q) {
    let o = (s * p.Q + q) * R;
    //@store
  }
}
