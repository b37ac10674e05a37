// optim-multi: multi-tensor driver appended after an optimizer shader (adamw.wgsl or sgd.wgsl, which define
// opt_info, opt_load and opt_apply; opt_update is optim-common.wgsl's); entry point `multi`. All tensors live in
// one flat arena per role (param, grad, moments) and a segment table says where each tensor is and what its
// hyper-parameters are.
// Binding `table` (read u32): words [2s, 2s+1] = segment s's lr and weight decay as f32 bits; from word
//   p.aux on, chunks of 3 words: (first element, length <= 4096, segment index), each chunk inside one segment.
// One 256-thread workgroup per chunk, workgroup index wid.x + wid.y * p.row; p.n = number of chunks;
// p.lr multiplies every segment's lr (a schedule factor); p.wd is unused.
@compute @workgroup_size(256)
fn multi(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x + wid.y * p.row;
  if (c >= p.n || skipped()) { return; }
  let e = p.aux + 3u * c;
  let start = table[e];
  let len = table[e + 1u];
  let s = table[e + 2u];
  let lr = bitcast<f32>(table[2u * s]) * p.lr;
  let wd = bitcast<f32>(table[2u * s + 1u]);
  let gs = grad_mult();
  let info = opt_info();
  var k = lid;
  // four elements per iteration, all loads first
  while (k + 768u < len) {
    let i0 = start + k;
    let s0 = opt_load(i0);
    let s1 = opt_load(i0 + 256u);
    let s2 = opt_load(i0 + 512u);
    let s3 = opt_load(i0 + 768u);
    opt_apply(i0, s0, lr, wd, gs, info);
    opt_apply(i0 + 256u, s1, lr, wd, gs, info);
    opt_apply(i0 + 512u, s2, lr, wd, gs, info);
    opt_apply(i0 + 768u, s3, lr, wd, gs, info);
    k += 1024u;
  }
  while (k < len) {
    opt_update(start + k, lr, wd, gs, info);
    k += 256u;
  }
}
