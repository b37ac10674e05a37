// argmax: y[r] = the index of the largest element of row r of x [rows, V], the first one where several are equal
// (what a left-to-right scan keeping the first strictly larger value returns: greedy decoding's token). A NaN
// element is never chosen, except that a row whose element 0 is NaN gives 0 (that scan never moves off it).
// Bindings: x (read, f32 / f16 / bf16 via read_x), y (rw i32 [rows]).
// Params: rows, V (row length, >= 1), gx (workgroups per grid row: r = wg.x + wg.y * gx).
// One workgroup of 256 threads per row: thread t scans elements t, t + 256, ... in order, keeping the first
// strictly larger (value, index); the 256 pairs meet in a tree in workgroup memory (larger value, or the smaller
// index of equal ones). NaN is tested on the bits: WGSL may assume that floats are not NaN.
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let r = wg.x + wg.y * p.gx;
  if (r >= p.rows) { return; }
  let base = r * p.V;
  // -inf, made at run time (a constant infinity is an error); index past every row: loses every tie
  var best = bitcast<f32>(0xff800000u + min(p.V, 0u));
  var idx = 0xffffffffu;
  for (var i = lid; i < p.V; i += 256u) {
    let v = read_x(base + i);
    if (!is_nan(v) && (idx == 0xffffffffu || v > best)) {
      best = v;
      idx = i;
    }
  }
  bv[lid] = best;
  bi[lid] = idx;
  for (var s = 128u; s > 0u; s >>= 1u) {
    workgroupBarrier();
    if (lid < s) {
      let v = bv[lid + s];
      let j = bi[lid + s];
      if (v > bv[lid] || (v == bv[lid] && j < bi[lid])) {
        bv[lid] = v;
        bi[lid] = j;
      }
    }
  }
  if (lid == 0u) {
    var out = bi[0];
    if (out == 0xffffffffu || is_nan(read_x(base))) { out = 0u; }
    y[r] = i32(out);
  }
}
