// quant-i8-probe: C [M, N] = A [M, K] B^T with int8 operands on subgroup matrices (i8 x i8 -> i32), the probe of
//   the int8 tensor-core path: each subgroup (one per workgroup) owns one SM x SN tile of C and walks K in steps
//   of SK, loading its fragments straight from storage (no workgroup staging: a measure of what the hardware
//   path gives, not a tuned kernel).
// Bindings: a (read i32 [M, K / 4]: four int8 per word, element k of a row in byte k % 4), b (read i32
//   [N, K / 4], the weight layout [out, in]), c (rw i32 [M, N]).
// Params: M, N, K (multiples of the fragment sizes).
// Prepended by the bench: SM, SN, SK (the adapter's int8 configuration), SG (subgroup size), and the aliases
//   Lm = subgroup_matrix_left<i8, SK, SM>, Rm = subgroup_matrix_right<i8, SN, SK>, Acc = subgroup_matrix_result<i32, SN, SM>.
// Grid: x = N / SN, y = M / SM. Workgroup: SG threads.
@compute @workgroup_size(SG)
fn main(@builtin(workgroup_id) wg: vec3u) {
  let m0 = wg.y * SM;
  let n0 = wg.x * SN;
  var acc = Acc();
  for (var k = 0u; k < p.K; k += SK) {
    let l = subgroupMatrixLoad<Lm, row_major>(&a, m0 * p.K + k, p.K);
    let r = subgroupMatrixLoad<Rm, col_major>(&b, n0 * p.K + k, p.K);
    acc = subgroupMatrixMultiplyAccumulate(l, r, acc);
  }
  subgroupMatrixStore<row_major>(&c, m0 * p.N + n0, acc, p.N);
}
