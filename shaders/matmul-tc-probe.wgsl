// matmul-tc-probe: the smallest subgroup-matrix program, for diagnosing pipeline creation on a new driver or
// Dawn build (src/bench/matmul-tc-bench.ts --probe): one subgroup computes C = A @ B for one fragment,
// A [SM, SK] and B [SK, SN] row-major, staged through workgroup memory as f16, accumulated in f32.
// Bindings: a (read, f32 [SM * SK]), b (read, f32 [SK * SN]), c (rw f32 [SM * SN]).
// Prepended by the wrapper: SM, SN, SK, SG (subgroup size) and the aliases Lm, Rm, Acc (as in matmul-tc.wgsl);
//   with PROBE_OVERRIDE, also `override PROBE: u32` (0 at run time), to tell pipeline-override handling apart.
// Workgroup: SG threads (one subgroup).
var<workgroup> Ah: array<f16, SM * SK>;
var<workgroup> Bh: array<f16, SK * SN>;

@compute @workgroup_size(SG)
fn main(@builtin(local_invocation_index) lid: u32) {
  for (var i = lid; i < SM * SK; i += SG) { Ah[i] = f16(read_a(i)); }
  for (var i = lid; i < SK * SN; i += SG) { Bh[i] = f16(read_b(i)); }
  workgroupBarrier();
  if (PROBE == 7u) { return; }
  let l = subgroupMatrixLoad<Lm, row_major>(&Ah, 0u, SK);
  let r = subgroupMatrixLoad<Rm, row_major>(&Bh, 0u, SN);
  var acc: Acc;
  acc = subgroupMatrixMultiplyAccumulate(l, r, acc);
  subgroupMatrixStore<row_major>(&c, 0u, acc, SN);
}
