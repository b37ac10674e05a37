// matmul-f16x3-split: the second operand pass of an f32 matmul on f16 tensor cores at "high" precision
// (ops/core/matmul-f16x3.ts), both operands in one dispatch: three f16 copies of s * x along K, each the hi or
// the lo part, so that one f16 x f16 -> f32 product with K' = 3K sums hiA hiB + hiA loB + loA hiB (A B to about
// 22 bits; loA loB, 2^-22 of the product, is dropped):
//   hi = f16(s x),  lo = f16(s x - hi)      (s x - hi is exact in f32; both rounded to nearest even by round16,
//   shaders/round-f16.wgsl, prepended)
// s = 2^e brings max |x| into [2^13, 2^14): hi parts stay far below f16's 65504, and lo parts stay normal f16 for
// every element within 2^-9 of the maximum (smaller ones keep an absolute error under 2^-25 max |x|). The
// product's epilogue multiplies by 1 / (sA sB), exact in f32. Zero, inf or NaN maxima take s = 1.
// Operand o (0: A, workgroups [0, wa); 1: B, [wa, wa + wb)) is x [batch, R, C] (C contiguous); its output is
// f16 [batch, R, 3C] (cols = 1: the copies side by side along C) or [batch, 3R, C] (cols = 0: stacked along R);
// copy j is the lo part where bit j of lo is set, else hi. A thread takes 4 elements along C (VEC: every C a
// multiple of 4, 16-byte loads and 8-byte stores) or 1.
// Bindings: xa, xb read f32; part rw u32 [2 * 256 + 2]: the maxima parts of matmul-f16x3-absmax.wgsl, reduced
//   here by every workgroup; words 512 + o get 1 / s as f32 bits (thread 0 of the operand's first workgroup) for
//   the epilogue; outa, outb rw f16 as u32 words.
// Prepended by the wrapper: VEC, ld4 / ld1 (as in matmul-f16x3-absmax.wgsl), st2(isb, q, v) (output words 2q,
//   2q + 1 of outb or outa, through a vec2<u32> view when VEC) and st1(isb, t, w) (word t).
// Params: na, Ra, Ca, cola, loa, ga (A's elements, rows, columns, layout, lo mask, absmax workgroups), the same
//   for B, wa and wb (workgroups of A and of B here).
// Workgroup: 256 threads; grid 2-D (x * y >= wa + wb workgroups, numbered x-first; the rest return at once).
var<workgroup> red: array<u32, 256>;

fn scale_exp(mbits: u32) -> i32 {
  if (mbits == 0u || mbits >= 0x7f800000u) { return 0; }
  // max = f * 2^ex with f in [0.5, 1): 2^(14 - ex) max lies in [2^13, 2^14)
  return clamp(14 - frexp(bitcast<f32>(mbits)).exp, -126, 126);
}

// The hi and lo parts of s * x (4 lanes).
fn parts(x: vec4f, s: f32) -> array<vec4f, 2> {
  let y = x * s;
  let hi = vec4f(round16(y.x), round16(y.y), round16(y.z), round16(y.w));
  let d = y - hi;
  return array<vec4f, 2>(hi, vec4f(round16(d.x), round16(d.y), round16(d.z), round16(d.w)));
}

struct Op {
  n: u32,
  R: u32,
  C: u32,
  cols: u32,
  lo: u32,
}

// Output element index of copy j of element (row, c) (row over batch * R).
fn out_index(o: Op, row: u32, c: u32, j: u32) -> u32 {
  if (o.cols != 0u) { return row * 3u * o.C + j * o.C + c; }
  return ((row / o.R) * 3u * o.R + j * o.R + row % o.R) * o.C + c;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) tid: u32) {
  let wl = wid.x + wid.y * nwg.x;
  if (wl >= p.wa + p.wb) { return; }
  let isb = wl >= p.wa;
  let w = select(wl, wl - p.wa, isb);
  var o = Op(p.na, p.Ra, p.Ca, p.cola, p.loa);
  if (isb) { o = Op(p.nb, p.Rb, p.Cb, p.colb, p.lob); }
  let g = select(p.ga, p.gb, isb);
  // max |x| from the absmax parts
  let base = select(0u, 256u, isb);
  red[tid] = select(0u, part[base + tid], tid < g);
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (tid < h) { red[tid] = max(red[tid], red[tid + h]); }
    workgroupBarrier();
  }
  let e = scale_exp(red[0]);
  let s = ldexp(1.0, e);
  if (w == 0u && tid == 0u) { part[512u + select(0u, 1u, isb)] = bitcast<u32>(ldexp(1.0, -e)); }
  let t = w * 256u + tid;
  if (VEC) {
    if (t >= o.n / 4u) { return; }
    let row = t / (o.C / 4u);
    let c = (t % (o.C / 4u)) * 4u;
    let hl = parts(ld4(isb, t), s);
    let h = vec2<u32>(pack2x16float(hl[0].xy), pack2x16float(hl[0].zw));
    let l = vec2<u32>(pack2x16float(hl[1].xy), pack2x16float(hl[1].zw));
    for (var j = 0u; j < 3u; j++) {
      let v = select(h, l, ((o.lo >> j) & 1u) != 0u);
      st2(isb, out_index(o, row, c, j) / 4u, v);  // a multiple of 4 halves: words 2q, 2q + 1
    }
    return;
  }
  // scalar: thread t writes output word t (halves 2t, 2t + 1), reading the elements they come from
  if (2u * t >= 3u * o.n) { return; }
  var wv = vec2f();
  for (var k = 0u; k < 2u; k++) {
    let q = 2u * t + k;
    if (q >= 3u * o.n) { break; }
    var row: u32;
    var c: u32;
    var j: u32;
    if (o.cols != 0u) {
      row = q / (3u * o.C);
      j = (q % (3u * o.C)) / o.C;
      c = q % o.C;
    } else {
      let plane = 3u * o.R * o.C;
      let rr = (q % plane) / o.C;
      j = rr / o.R;
      row = (q / plane) * o.R + rr % o.R;
      c = q % o.C;
    }
    let hl = parts(vec4f(ld1(isb, row * o.C + c), 0.0, 0.0, 0.0), s);
    wv[k] = select(hl[0].x, hl[1].x, ((o.lo >> j) & 1u) != 0u);
  }
  st1(isb, t, pack2x16float(wv));
}
