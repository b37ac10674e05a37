/**
 * The fused dequantize + tensor-core product for few rows of X (`shaders/dequant-matmul-tc.wgsl`): each
 * workgroup dequantizes a [BN, BK] slice of the quantized W into workgroup memory as f16 per K step and
 * multiplies it with a BM-row tile of X on f16 subgroup matrices (the adapter's f16 -> f32 fragment, never a
 * constant). It serves the row counts between the decode GEMV (bandwidth-bound, CUDA cores) and the many-rows
 * paths: at 16 rows the GEMV is bound by 16 N K fused multiply-adds on CUDA cores.
 *
 * X is rounded to f16 as it is staged. X in f32 or bf16 may hold values beyond f16's range: a workgroup whose results
 * come out not finite runs its product again with each row of X scaled by a power of two (`xRange`), so such rows
 * cost a second pass but give finite results wherever X and W are finite.
 *
 * The same WGSL runs without subgroup matrices as the portable reference (`scalar`: each thread sums its
 * outputs from the same staged f16 tiles), which is how the staging and decoding are tested on adapters that
 * have no tensor cores.
 */
import wgsl from '../../../../../shaders/dequant-matmul-tc.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import type { KernelDef } from '../../kernel';
import { cachedKernel, checkedKernel, kernelFailures } from '../../kernel-cache';
import { empty, type DeviceTensor } from '../../tensor';
import { reduce } from '../core/reduce';
import { contextTcPlan, type TensorCorePlan } from '../core/matmul-tc';
import { codeBookWgsl, FMT_ID, type QuantTensor } from './formats';
import type { GemvDispatch } from './gemv';
import { dqScale } from './gemv-codegen';

/** A workgroup tile: MT row fragments of X (BM = MT * fragment M), NSN subgroups along N owning FNS column
 *  fragments each (BN = NSN * FNS * fragment N), NSG subgroups in all (NSG / NSN of them split each K step), BK
 *  elements of K per step. */
export interface QtcTile {
  mt: number;
  nsn: number;
  fns: number;
  nsg: number;
  bk: number;
}

/** Tiles measured on the GPU machine (`qtc-bench`); `qtcTuning` names the ones `auto` runs. */
export const QTC_TILES = {
  m1n64k128: { mt: 1, nsn: 4, fns: 1, nsg: 8, bk: 128 },
  m1n32k256: { mt: 1, nsn: 2, fns: 1, nsg: 8, bk: 256 },
  m1n128k64: { mt: 1, nsn: 4, fns: 2, nsg: 8, bk: 64 },
  m1n64k64: { mt: 1, nsn: 4, fns: 1, nsg: 4, bk: 64 },
  m2n64k128: { mt: 2, nsn: 4, fns: 1, nsg: 8, bk: 128 },
  m4n64k64: { mt: 4, nsn: 4, fns: 1, nsg: 4, bk: 64 },
  m1n128k128g4: { mt: 1, nsn: 4, fns: 2, nsg: 4, bk: 128 },
  m2n128k64g4: { mt: 2, nsn: 4, fns: 2, nsg: 4, bk: 64 },
  m2n32k256g4: { mt: 2, nsn: 2, fns: 1, nsg: 4, bk: 256 },
} as const satisfies Record<string, QtcTile>;
export type QtcTileName = keyof typeof QTC_TILES;

/** A rule of {@link qtcTuning}: products with at most `maxRows` rows (and, where given, at least `minN` / at most
 *  `maxN` outputs, or K at least twice N with `longK`) run `tile` with the K-split target `target` (0: no split). */
export interface QtcRule {
  maxRows?: number;
  minN?: number;
  maxN?: number;
  longK?: boolean;
  tile: QtcTileName;
  target: number;
}

/**
 * What `quantLinear`'s `auto` does with the fused kernel: rows from `minRows` to `maxRows` take it (where the
 * adapter has f16 subgroup matrices and the kernel has been checked), with the first matching rule's tile and
 * split target. `tile` / `splitTarget` force one for every product (benchmarks). Measured on an H100 (2026-11-24,
 * `qtc-bench --split` and `--auto`, docs/PERFORMANCE.md): from 5 rows the fused kernel beats the subgroup GEMV on
 * every decode shape, and the `dequant` path by 2-7.5x at 32-128 rows and 1.3-3x at 256; for up to 16 rows 64-wide
 * tiles suit many outputs, 32-wide tiles 256 deep the square shapes, and a K split the long-K ones; for more rows
 * two row fragments per tile, 32 wide with four subgroups for up to 32 rows on N <= 4096 (64 rows on N <= 2048),
 * and for up to 32 rows of a long K one fragment with a split (`qtc-bench --split`, call Q12), up to 48 rows (call
 * R17: 1.10-1.13x at 40 / 48 rows of 4096 x 14336 and 4096 x 11008) and up to 64 where N <= 2048 (call R12: 2048 x
 * 5632 at 48 / 64 rows 50.6 / 51.4 us against 57.4 / 59.0); for 33-48 rows with
 * N >= 5632 one row fragment (three row tiles) beats two (call R14: 9-18% at 5632 x 2048, 14336 x 4096 and
 * 28672 x 4096; from 64 rows on 4096-long K it loses).
 */
export const qtcTuning: { minRows: number; maxRows: number; rules: QtcRule[]; tile?: QtcTileName; splitTarget?: number } = {
  minRows: 5,
  maxRows: 256,
  rules: [
    { maxRows: 16, minN: 12800, tile: 'm1n64k64', target: 0 },
    { maxRows: 16, longK: true, tile: 'm1n64k64', target: 792 },
    { maxRows: 16, tile: 'm1n32k256', target: 0 },
    { maxRows: 48, longK: true, tile: 'm1n64k64', target: 264 },
    { maxRows: 64, maxN: 2048, longK: true, tile: 'm1n64k64', target: 264 },
    { maxRows: 32, maxN: 4096, tile: 'm2n32k256g4', target: 0 },
    { maxRows: 64, maxN: 2048, tile: 'm2n32k256g4', target: 0 },
    { maxRows: 32, minN: 5632, tile: 'm2n64k128', target: 0 },
    { maxRows: 48, minN: 5632, tile: 'm1n64k64', target: 0 },
    { tile: 'm2n64k128', target: 0 },
  ],
};

/** The tile and split target `auto` runs for M x N x K: the first matching rule whose tile `fits` (the device), or
 *  the forced ones; null where no rule's tile fits. */
export function qtcChoice(M: number, N: number, K: number, fits: (t: QtcTile) => boolean = () => true): { tile: QtcTile; target: number } | null {
  if (qtcTuning.tile) {
    const t = QTC_TILES[qtcTuning.tile];
    return fits(t) ? { tile: t, target: qtcTuning.splitTarget ?? 0 } : null;
  }
  const r = qtcTuning.rules.find(
    (r) =>
      (r.maxRows === undefined || M <= r.maxRows) &&
      (r.minN === undefined || N >= r.minN) &&
      (r.maxN === undefined || N <= r.maxN) &&
      (!r.longK || K >= 2 * N) &&
      fits(QTC_TILES[r.tile]),
  );
  return r ? { tile: QTC_TILES[r.tile], target: qtcTuning.splitTarget ?? r.target } : null;
}

/** Splits of K for a product: 1 where the tiles reach `target` workgroups (or it is 0), else as
 *  many as bring them there, each a multiple of BK and at least two steps long; `force` asks for a count. Returns
 *  the count and the elements of K per split. */
export function qtcSplit(t: QtcTile, tiles: number, K: number, force?: number, target = 0): { S: number; kc: number } {
  const steps = Math.ceil(K / t.bk);
  let want = force ?? (target && tiles < target ? Math.ceil(target / tiles) : 1);
  if (force === undefined) want = Math.min(want, Math.max(1, Math.floor(steps / 2)));
  const per = Math.ceil(steps / Math.max(1, Math.min(want, steps)));
  return { S: Math.ceil(steps / per), kc: per * t.bk };
}

/** f16 elements after each staged row (keeps rows on different banks; a multiple of 8 keeps 16-byte stores). */
const PAD = 8;

/** Fragment shape and subgroup size the kernel is generated for: the adapter's plan, or (scalar) a stand-in. */
type Frag = { SM: number; SN: number; SK: number; SG: number };

function fragOf(plan: TensorCorePlan | null): Frag {
  return plan ? { SM: plan.frag.M, SN: plan.frag.N, SK: plan.frag.K, SG: plan.subgroupSize } : { SM: 16, SN: 16, SK: 16, SG: 32 };
}

/** Workgroup bytes of a tile (staged X and W, the nf4 table, X's row exponents and flag, and with subgroup
 *  matrices the partial sums). */
export function qtcSharedBytes(t: QtcTile, f: Frag, scalar: boolean): number {
  const st = t.bk + PAD;
  const stage = 2 * (t.mt * f.SM + t.nsn * t.fns * f.SN) * st + 64 + 4 * (t.mt * f.SM + 4);
  return stage + (scalar ? 0 : 4 * t.nsg * t.mt * t.fns * f.SM * f.SN);
}

/** Why a tile does not fit this fragment, format and device, or null when it does. */
export function qtcTileProblem(t: QtcTile, f: Frag, limits: Record<string, number>, scalar = false): string | null {
  if (t.nsg % t.nsn) return `NSG ${t.nsg} is not a multiple of NSN ${t.nsn}`;
  const kg = t.nsg / t.nsn;
  if (t.bk % 32) return `BK ${t.bk} is not a multiple of 32 (a 16-byte unit of int4 codes)`;
  if (t.bk % (f.SK * kg)) return `BK ${t.bk} is not a multiple of the fragment's K ${f.SK} times the ${kg} K groups`;
  const threads = t.nsg * f.SG;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = qtcSharedBytes(t, f, scalar);
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** The shape of one generated kernel. */
export interface QtcShape {
  tile: QtcTile;
  fmt: number;
  epw: number;
  xDtype: DeviceTensor['dtype'];
  xVec: boolean;
  qVec: boolean;
  dq: boolean;
  hasBias: boolean;
  /** The portable reference (no subgroup matrices). */
  scalar: boolean;
  /** Benchmarks only (wrong results): 1 no X staged, 2 W's words stored undecoded, 3 no multiply-accumulates. */
  probe?: 1 | 2 | 3;
}

/** The WGSL of a kernel: constants and helpers, `shaders/dequant-matmul-tc.wgsl`, and its entry point (the
 *  unrolled subgroup-matrix code, or the scalar reference). */
export function qtcSource(s: QtcShape, f: Frag): string {
  const t = s.tile;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  let pre =
    c('FMT', s.fmt) + c('EPW', s.epw) + c('SM', f.SM) + c('SN', f.SN) + c('SK', f.SK) + c('SG', f.SG) + c('NSG', t.nsg) + c('MT', t.mt) +
    c('NSN', t.nsn) + c('FNS', t.fns) + c('KG', t.nsg / t.nsn) + c('BK', t.bk) + c('PAD', PAD) + c('PROBE', s.probe ?? 0) + `const HAS_BIAS: bool = ${s.hasBias};\nconst RANGE: bool = ${xRange(s)};\n` + codeBookWgsl();
  // (x and x4, q and q4 cannot both be used by one entry point: only one view of each is emitted)
  // X: 16 bytes of f32 (x4) or 8 bytes of 16-bit floats (x2) where K is a multiple of 4, else element by element
  const xb = (j: number) => `select(0.0, read_x(b + ${j}u), k + ${j}u < p.K)`;
  const half = s.xDtype === 'bf16' ? (w: string) => `vec2f(bitcast<f32>(${w} << 16u), bitcast<f32>(${w} & 0xffff0000u))` : (w: string) => `unpack2x16float(${w})`;
  let body = `  let b = m * p.K + k;\n  return vec4f(${[0, 1, 2, 3].map(xb).join(', ')});\n`;
  if (s.xVec && s.xDtype === 'f32') {
    pre += '@group(0) @binding(1) var<storage, read> x4: array<vec4f>;\n';
    body = '  return x4[(m * p.K + k) >> 2u];\n';
  } else if (s.xVec) {
    pre += '@group(0) @binding(1) var<storage, read> x2: array<vec2u>;\n';
    body = `  let v = x2[(m * p.K + k) >> 2u];\n  return vec4f(${half('v.x')}, ${half('v.y')});\n`;
  }
  pre += 'fn ld_x(m: u32, k: u32) -> vec4f {\n  if (m >= p.M || k >= p.K) { return vec4f(0.0); }\n' + body + '}\n';
  if (s.qVec) pre += '@group(0) @binding(2) var<storage, read> q4: array<vec4u>;\n';
  pre +=
    'fn ld_w(n: u32, w: u32) -> vec4u {\n' +
    (s.qVec
      ? '  return q4[(n * p.wpr + w) >> 2u];\n}\n'
      : `  let o = n * p.wpr + w;\n  return vec4u(q[o], ${[1, 2, 3].map((i) => `select(0u, q[o + ${i}u], w + ${i}u < p.wpr)`).join(', ')});\n}\n`);
  pre += `fn scale_at(i: u32) -> f32 { return ${s.dq ? dqScale('s', 'absmax2', 'offset') : 'read_s(i)'}; }\n`;
  let entry = s.scalar ? scalarEntry(xRange(s)) : tcEntry(t, f, xRange(s));
  if (s.probe === 3) entry = entry.replace(/^\s*acc_\d+_\d+ = subgroupMatrixMultiplyAccumulate.*$/gm, '');
  return pre + wgsl.replace('//@entry', entry);
}

/**
 * Whether X can hold values beyond f16's range (f32, bf16). The kernel then runs its K loop as usual and checks the
 * results of its tile: where one is not finite (X rounded to an infinite f16, or a NaN or infinity in the
 * operands), the workgroup scans its rows of X, takes for each row the power of two 2^-E_m that brings its
 * largest finite element below 2^15, runs the K loop again with the row scaled by it and its results multiplied
 * by 2^E_m (exact: powers of two; a row whose elements all are below 2^15 keeps E_m = 0). The second pass costs
 * only the workgroups that need it; the first costs a test of each result.
 */
const xRange = (s: QtcShape) => s.xDtype !== 'f16' && s.probe !== 1;

/** The kernel body around one pass (`pass(scaled)`: the K loop and the epilogue): once, or with X's range the
 *  first pass, then where a result was not finite the scan of X, the sums zeroed (`zero`) and the scaled pass. */
const passes = (range: boolean, pass: (scaled: boolean) => string, zero: string) =>
  range
    ? `${pass(false)}  if (workgroupUniformLoad(&xrows[BM]) != 0u) {
    scan_x(m0, kb, min(p.K, kb + p.kc), lid);
    workgroupBarrier();
    ${zero}
${pass(true)}  }
`
    : pass(false);

/** An output v of local row ml: unscaled in the second pass, tested in the first (with X's range). */
const outputRange = (range: boolean, scaled: boolean) =>
  !range
    ? ''
    : scaled
      ? '\n      v = ldexp(v, i32(atomicLoad(&xrows[ml])));'
      : '\n      if ((bitcast<u32>(v) & 0x7F800000u) == 0x7F800000u) { atomicOr(&xrows[BM], 1u); }';

const PROLOGUE = `  let m0 = wg.y * BM;
  let n0 = wg.x * BN;
  if (FMT == 2u) {
    if (lid < 16u) { lut[lid] = NF4_CODE[lid]; }
    workgroupBarrier();
  }
  let kb = wg.z * p.kc;
  let nt = (min(p.K, kb + p.kc) - kb + BK - 1u) / BK;`;

const first = (scaled: boolean) => `  fetch(m0, n0, kb, lid);
  stash(lid, ${scaled});
  workgroupBarrier();`;

const stepEnd = (scaled: boolean) => `    workgroupBarrier();
    if (t + 1u < nt) { stash(lid, ${scaled}); }
    workgroupBarrier();`;

function tcEntry(t: QtcTile, f: Frag, range: boolean): string {
  const I = [...Array(t.mt).keys()];
  const J = [...Array(t.fns).keys()];
  const IJ = I.flatMap((i) => J.map((j) => [i, j] as const));
  const mma = [
    ...I.map((i) => `let l_${i} = subgroupMatrixLoad<Lm, row_major>(&Xs, ${i}u * SM * ST + kk, ST);`),
    ...J.map((j) => `let r_${j} = subgroupMatrixLoad<Rm, col_major>(&Ws, (wn0 + ${j}u * SN) * ST + kk, ST);`),
    ...IJ.map(([i, j]) => `acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l_${i}, r_${j}, acc_${i}_${j});`),
  ].join('\n      ');
  return `// subgroup_matrix_left<T, K, M> is M x K; right<T, N, K> is K x N; result<T, N, M> is M x N
alias Lm = subgroup_matrix_left<f16, ${f.SK}, ${f.SM}>;
alias Rm = subgroup_matrix_right<f16, ${f.SN}, ${f.SK}>;
alias Acc = subgroup_matrix_result<f32, ${f.SN}, ${f.SM}>;
var<workgroup> Cs: array<f32, NSG * MT * FNS * SM * SN>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sg: u32) {
  let wn0 = (sg % NSN) * FNS * SN;
  let kg = sg / NSN;
  ${IJ.map(([i, j]) => `var acc_${i}_${j}: Acc;`).join('\n  ')}
${PROLOGUE}
${passes(range, (sc) => tcPass(t, sc, range, mma, IJ), IJ.map(([i, j]) => `acc_${i}_${j} = Acc();`).join('\n    '))}}
`;
}

/** One pass of the subgroup-matrix entry: the K loop, the partial sums through Cs, the epilogue. */
function tcPass(t: QtcTile, scaled: boolean, range: boolean, mma: string, IJ: (readonly [number, number])[]): string {
  return `${first(scaled)}
  for (var t = 0u; t < nt; t++) {
    if (t + 1u < nt) { fetch(m0, n0, kb + (t + 1u) * BK, lid); }
    for (var f = 0u; f < BK / (SK * KG); f++) {
      let kk = (f * KG + kg) * SK;
      ${mma}
    }
${stepEnd(scaled)}
  }
  // this subgroup's fragments into its slots of Cs, then each output's KG partial sums in a fixed order
  let cs = sg * MT * FNS;
  ${IJ.map(([i, j]) => `subgroupMatrixStore<row_major>(&Cs, (cs + ${i * t.fns + j}u) * SM * SN, acc_${i}_${j}, SN);`).join('\n  ')}
  workgroupBarrier();
  for (var o = lid; o < BM * BN; o += WG) {
    let ml = o / BN;
    let m = m0 + ml;
    let nl = o % BN;
    let n = n0 + nl;
    if (m < p.M && n < p.N) {
      let i = ml / SM;
      let r = ml % SM;
      let slot = (nl / (FNS * SN)) * MT * FNS + i * FNS + (nl / SN) % FNS;
      var v = 0.0;
      for (var g = 0u; g < KG; g++) { v += Cs[(g * NSN * MT * FNS + slot) * SM * SN + r * SN + nl % SN]; }${outputRange(range, scaled)}
      if (HAS_BIAS && wg.z == 0u) { v += read_bias(n); }
      y[(wg.z * p.M + m) * p.N + n] = v;
    }
  }
`;
}

function scalarEntry(range: boolean): string {
  return `const PT: u32 = (BM * BN + WG - 1u) / WG;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  var acc: array<f32, PT>;
${PROLOGUE}
${passes(range, (sc) => scalarPass(sc, range), 'for (var e = 0u; e < PT; e++) { acc[e] = 0.0; }')}}
`;
}

/** One pass of the portable reference: the K loop and the epilogue. */
function scalarPass(scaled: boolean, range: boolean): string {
  return `${first(scaled)}
  for (var t = 0u; t < nt; t++) {
    if (t + 1u < nt) { fetch(m0, n0, kb + (t + 1u) * BK, lid); }
    for (var e = 0u; e < PT; e++) {
      let o = e * WG + lid;
      if (o < BM * BN) {
        let xr = (o / BN) * ST;
        let wr = (o % BN) * ST;
        var a = acc[e];
        for (var k = 0u; k < BK; k++) { a += f32(Xs[xr + k]) * f32(Ws[wr + k]); }
        acc[e] = a;
      }
    }
${stepEnd(scaled)}
  }
  for (var e = 0u; e < PT; e++) {
    let o = e * WG + lid;
    let ml = o / BN;
    let m = m0 + ml;
    let n = n0 + o % BN;
    if (o < BM * BN && m < p.M && n < p.N) {
      var v = acc[e];${outputRange(range, scaled)}
      if (HAS_BIAS && wg.z == 0u) { v += read_bias(n); }
      y[(wg.z * p.M + m) * p.N + n] = v;
    }
  }
`;
}

/** Where the fused kernel can run on this context: the f16 tensor-core plan, or why not. */
export function qtcPlan(ctx: Context): TensorCorePlan | { reason: string } {
  return contextTcPlan(ctx);
}

/** Whether `quantLinear`'s `auto` runs M rows on the fused tensor-core kernel on this context (`qtcTuning`'s rows,
 *  an adapter with f16 subgroup matrices; once its WGSL has been checked). Callers that would batch quantized
 *  products into one GEMV (`tryGemvParts`) leave such rows to it. */
export function quantRowsOnTensorCores(ctx: Pick<Context, 'info'>, M: number): boolean {
  return M >= qtcTuning.minRows && M <= qtcTuning.maxRows && !ctx.info.isSoftware && 'frag' in contextTcPlan(ctx as Context);
}

/** The kernel that ran the last {@link quantLinearTc} of a context (tests and benchmarks). */
export const lastQtcKernel = new WeakMap<Context, string>();

/** Options of {@link quantLinearTc}. */
export interface QtcOptions {
  tile?: QtcTile;
  /** Splits of K (see {@link qtcSplit}; default: the rule's target, or with `tile` `qtcTuning.splitTarget`). */
  split?: number;
  /** The portable reference instead of subgroup matrices (tests). */
  scalar?: boolean;
  /** See {@link QtcShape.probe} (benchmarks). */
  probe?: 1 | 2 | 3;
}

/**
 * Plan `y [M, N] = x [M, K] W^T (+ bias)` through the fused kernel (arguments checked by `quantLinear`): its
 * kernel, bindings, grid and params, or null while the tensor-core kernel is being checked, when it failed its
 * check, when the adapter has no f16 subgroup matrices or when the tile `auto` chose does not fit the device (a
 * tile given in `opts` that does not fit is a ShapeError).
 */
export function planQtc(ctx: Context, x: DeviceTensor, w: QuantTensor, bias: DeviceTensor | undefined, y: DeviceTensor, M: number, opts: QtcOptions = {}): (GemvDispatch & { name: string; S: number }) | null {
  const { N, K, wpr } = w.layout;
  const scalar = !!opts.scalar;
  const plan = qtcPlan(ctx);
  if (!scalar && !('frag' in plan)) return null;
  const f = fragOf(scalar ? null : (plan as TensorCorePlan));
  // a tile asked for must fit; auto takes the first rule whose tile fits (a smaller fragment, subgroup size or
  // workgroup memory than the H100's), and where none does the other kernels run
  const choice = opts.tile ? null : qtcChoice(M, N, K, (t) => !qtcTileProblem(t, f, ctx.info.limits, scalar));
  if (!opts.tile && !choice) return null;
  const t = opts.tile ?? choice!.tile;
  const why = opts.tile && qtcTileProblem(t, f, ctx.info.limits, scalar);
  if (why) throw new ShapeError(`quantLinear: tensor-core tile ${JSON.stringify(t)}: ${why}`);
  const s: QtcShape = {
    tile: t,
    fmt: FMT_ID[w.spec.format],
    epw: w.layout.epw,
    xDtype: x.dtype,
    xVec: K % 4 === 0 && (x.dtype === 'f32' || x.dtype === 'f16' || x.dtype === 'bf16'),
    qVec: wpr % 4 === 0,
    dq: !!w.spec.doubleQuant,
    hasBias: !!bias,
    scalar,
    ...(opts.probe ? { probe: opts.probe } : {}),
  };
  const b = bias ?? x;
  const name = `dequant-matmul-tc${scalar ? '-scalar' : ''}-m${t.mt}n${t.nsn}x${t.fns}g${t.nsg}k${t.bk}`;
  const key = `qtc:${JSON.stringify(s)}:${w.scales.dtype}:${b.dtype}:${f.SM}x${f.SN}x${f.SK}/${f.SG}`;
  const make = (): KernelDef => ({
    name,
    code: qtcSource(s, f),
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: w.scales.dtype },
      { name: 'bias', access: 'read', dtype: b.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
      ...(s.dq ? [{ name: 'absmax2', access: 'read' as const, dtype: 'f32' as const }, { name: 'offset', access: 'read' as const, dtype: 'f32' as const }] : []),
    ],
    params: ['u32:M', 'u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:wpr', 'u32:kc'],
    enables: scalar ? ['f16'] : ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'],
  });
  // subgroup-matrix pipelines are built only once their WGSL checked out (kernel-cache.ts)
  const kernel = scalar ? cachedKernel(ctx, key, make) : checkedKernel(ctx, key, make);
  if (!kernel) return null;
  const gx = Math.ceil(N / (t.nsn * t.fns * f.SN));
  const gy = Math.ceil(M / (t.mt * f.SM));
  const { S, kc } = qtcSplit(t, gx * gy, K, opts.split, opts.tile ? qtcTuning.splitTarget ?? 0 : choice!.target);
  if (gx > 65535 || gy > 65535 || S > 65535) throw new ShapeError(`quantLinear: ${gy} x ${gx} x ${S} workgroup tiles are more than one dispatch takes`);
  const dq = s.dq ? [w.absmax2!.buffer, w.offset!.buffer] : [];
  return { name, S, kernel, buffers: [x.buffer, w.data.buffer, w.scales.buffer, b.buffer, y.buffer, ...dq], workgroups: [gx, gy, S], params: [M, N, K, w.layout.G, w.layout.nb, wpr, kc] };
}

/** Encode the fused product into y (f32 [M, N] elements): {@link planQtc}'s dispatch, and where it splits K, into
 *  a temporary [S, M, N] whose splits are then summed in order. False (nothing encoded) where it planned none. */
export function quantLinearTc(ctx: Context, x: DeviceTensor, w: QuantTensor, bias: DeviceTensor | undefined, y: DeviceTensor, M: number, opts: QtcOptions = {}): boolean {
  const d = planQtc(ctx, x, w, bias, y, M, opts);
  if (!d) return false;
  if (d.S === 1) ctx.dispatch(d.kernel, d.buffers, d.workgroups, d.params);
  else {
    const part = empty(ctx, [d.S, M, w.layout.N]);
    ctx.dispatch(d.kernel, d.buffers.map((b, i) => (i === 4 ? part.buffer : b)), d.workgroups, d.params);
    reduce(ctx, 'sum', part, 0, { out: { ...y, shape: [M, w.layout.N] } });
    ctx.release(part.buffer);
  }
  lastQtcKernel.set(ctx, d.S > 1 ? `${d.name}-s${d.S}` : d.name);
  return true;
}

/** Fused tensor-core kernels whose check failed on this context (cache key -> error). */
export function qtcFailures(ctx: Context): Map<string, Error> {
  return new Map([...kernelFailures(ctx)].filter(([k]) => k.startsWith('qtc:')));
}
