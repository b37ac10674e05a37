/**
 * Tensor-core matmul: f16 x f16 products accumulated in f32 on subgroup matrices
 * (`chromium-experimental-subgroup-matrix`), kernel `shaders/matmul-tc.wgsl`. `matmul` takes this path by itself
 * for f16 operands where the adapter offers an f16 -> f32 subgroup-matrix configuration (see `tensorCorePlan`);
 * everywhere else (lavapipe, SwiftShader, most laptops) the portable kernels run.
 *
 * The fragment shape (SM x SN x SK) comes from the configurations the adapter reports, never a constant; the
 * workgroup tile (BM x BN x BK and its SGM x SGN subgroup grid) is a plan in elements that is checked against
 * the fragment and the device limits, so one tile list serves 16x16x16, 16x8x16 and 8x8x8 hardware.
 */
import tcWgsl from '../../../../../shaders/matmul-tc.wgsl';
import type { BufferBinding, Context, ContextInfo, SubgroupMatrixConfig } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import type { KernelDef, ParamSpec } from '../../kernel';
import { checkedKernel, kernelFailures, kernelsReady } from '../../kernel-cache';
import { operandReader } from './matmul';

/** A workgroup tile of the tensor-core kernel, in elements: BM x BN of C per workgroup over an SGM x SGN grid
 *  of subgroups, BK of K staged per step (a multiple of the fragment's K), and how the slices are staged: a
 *  kernel variant (`TC_TILES` names them; `src/bench/matmul-tc-bench.ts --sweep` measures them all). */
export interface TcTile {
  bm: number;
  bn: number;
  bk: number;
  sgm: number;
  sgn: number;
  /** Halves per global load and staged unit: 8 (one 16-byte load, 8 scalar workgroup stores; default) or 2 (one
   *  32-bit word per lane: consecutive lanes store consecutive words, no bank conflicts). */
  vw?: 2 | 8;
  /** Workgroup buffers per operand: 2 (default: the next slice goes into the other buffer, one barrier per
   *  step) or 1 (two barriers per step, half the workgroup memory: room for a larger BK). */
  nbuf?: 1 | 2;
  /** Stage interior slices as SM x SK subgroup-matrix blocks (subgroupMatrixLoad from storage,
   *  subgroupMatrixStore into workgroup memory); edge slices take the element path. */
  cm?: boolean;
  /** Per-unit global and workgroup offsets computed once before the K loop; slices that lie wholly inside both
   *  operands (with vector loads) load and store through them without bounds checks. */
  hoist?: boolean;
  /** With `hoist`: derive the offsets of a thread's later units from its first (a constant number of rows
   *  further), so that two registers per operand hold them instead of two per unit. */
  derive?: boolean;
  /** Load each right fragment just before the multiply-accumulates that use it (else all fragments of a K step
   *  first). */
  ilv?: boolean;
  /** Grouped rasterisation: consecutive workgroups walk `gm` tile rows down a column before moving right
   *  (L2 reuse of B); 0 / absent: row by row. */
  gm?: number;
  /** Timing ablations only (wrong results; never in `TC_TILES`): leave out the multiply-accumulates, or the
   *  staging of every slice after the first. */
  ablate?: 'nomma' | 'nostage';
}

/** The kernel variants (tiles with their staging) that tests check and the sweep measures; `auto` picks
 *  `tcTuning.big` / `tcTuning.small`. The first six are the plain forms measured on 2026-11-24 (16-byte loads, two
 *  buffers); v1.. are the numbered variants of the 2026-11-24 sweep (docs/PERFORMANCE.md). */
export const TC_TILES = {
  t128x128: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4 },
  t128x128w4: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2 },
  t128x64: { bm: 128, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t64x64: { bm: 64, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t128x256k16: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4 },
  t64x64k64: { bm: 64, bn: 64, bk: 64, sgm: 2, sgn: 2 },
  v1: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, vw: 2 },
  v2: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, vw: 2, nbuf: 1 },
  v3: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1 },
  v4: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, cm: true },
  v5: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, cm: true },
  v6: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, vw: 2 },
  v7: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, cm: true },
  v8: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, vw: 2, nbuf: 1 },
  v9: { bm: 256, bn: 128, bk: 16, sgm: 4, sgn: 2, vw: 2 },
  v10: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, vw: 2, nbuf: 1 },
  v11: { bm: 128, bn: 256, bk: 16, sgm: 4, sgn: 4, vw: 2 },
  v12: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4, vw: 2 },
  v13: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, nbuf: 1, cm: true },
  v14: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true },
  v15: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true },
  v16: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, nbuf: 1, hoist: true },
  v17: { bm: 128, bn: 256, bk: 32, sgm: 4, sgn: 4, nbuf: 1, hoist: true },
  v18: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, hoist: true },
  v19: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4, hoist: true },
  v20: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, vw: 2, nbuf: 1, hoist: true },
  v21: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, hoist: true },
  v22: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, nbuf: 1, hoist: true },
  v23: { bm: 128, bn: 128, bk: 32, sgm: 4, sgn: 2, hoist: true },
  v24: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true },
  v25: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true },
  v26: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true, ilv: true },
  v27: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true, gm: 8 },
  v28: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, nbuf: 1, hoist: true, derive: true },
} as const satisfies Record<string, TcTile>;
export type TcTileName = keyof typeof TC_TILES;

/** Tuning of `auto` (a benchmark may change it): the big and small tile and the tile count below which the
 *  small one runs. Measured on an H200 (2026-11-24, `matmul-tc-bench --sweep`, docs/PERFORMANCE.md): v15 runs
 *  230 / 241 TFLOP/s (NN / TN) on 4096^3 and 214-252 on the LLM shapes, v14 (NT) 193-218; the earlier big tile
 *  t128x256k16 131-148 under the same timing. */
export const tcTuning: { big: TcTileName; bigAlt: TcTileName; small: TcTileName; minBigTiles: number; direct: boolean; unroll: boolean } = {
  big: 'v15',
  /** The big tile where `big` does not fit the layout (v15's 48-deep slices of a [N, K] B exceed 48 KiB). */
  bigAlt: 'v14',
  small: 't64x64',
  /** 96: a 2048 x 2048 output (128 big tiles, one wave on a 132-SM H200) runs the big tile. Measured in the 1.1B
   *  LoRA step (lora-step-1b, H200, 2026-11-24): at 264 its 242 products per step on the 64x64 tile took 62 ms,
   *  on the big tile 128x256 the step went from 217 to 170 ms. */
  minBigTiles: 96,
  /** Store full tiles straight from the accumulators to C (else every tile goes through the scratch). */
  direct: true,
  /** Unroll the fragment loops into named accumulators (`tcMatrixCode`). Measured on an H200 (2026-11-24,
   *  docs/PERFORMANCE.md): the array form ran at 24-40 TFLOP/s for every tile (its matrices live in local
   *  memory); unrolled, the 128x256x16 tile runs 107-120 TFLOP/s on 4096^3 and both LLM shapes, every layout. */
  unroll: true,
};

/** What the adapter offers the tensor-core kernel: the fragment shape and the (fixed) subgroup size. */
export interface TensorCorePlan {
  frag: SubgroupMatrixConfig;
  subgroupSize: number;
}

/**
 * The tensor-core plan of an adapter, or null with the reason: it needs `shader-f16`, an f16 -> f32
 * subgroup-matrix configuration and a fixed subgroup size (the kernel maps subgroups onto tiles by
 * `local_invocation_index / subgroup size`). Among several configurations the one with the largest M x N
 * (then K) wins: fewer fragment loads per multiply-accumulate.
 */
export function tensorCorePlan(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes'>): TensorCorePlan | { reason: string } {
  if (!info.features.subgroupMatrix) return { reason: 'the adapter has no chromium-experimental-subgroup-matrix' };
  if (!info.features.shaderF16) return { reason: 'the adapter has no shader-f16' };
  const cands = info.subgroupMatrixConfigs.filter((c) => c.componentType === 'f16' && c.resultComponentType === 'f32');
  if (!cands.length) return { reason: 'no f16 -> f32 subgroup-matrix configuration' };
  const { min, max } = info.subgroupSizes;
  if (!(min > 0 && min === max)) return { reason: `the subgroup size is not fixed (${min}..${max})` };
  const frag = [...cands].sort((x, y) => y.M * y.N - x.M * x.N || y.K - x.K)[0]!;
  return { frag, subgroupSize: max };
}

/** Why a tile does not fit this fragment and device, or null when it does. */
export function tcTileProblem(t: TcTile, plan: TensorCorePlan, limits: Record<string, number>, transA = false, transB = false): string | null {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const wm = t.bm / t.sgm;
  const wn = t.bn / t.sgn;
  if (!Number.isInteger(wm) || wm % SM) return `BM ${t.bm} / SGM ${t.sgm} is not a multiple of the fragment's M ${SM}`;
  if (!Number.isInteger(wn) || wn % SN) return `BN ${t.bn} / SGN ${t.sgn} is not a multiple of the fragment's N ${SN}`;
  if (t.bk % SK || t.bk % 8) return `BK ${t.bk} is not a multiple of the fragment's K ${SK} and of 8`;
  if (t.bm % 8 || t.bn % 8) return `BM and BN must be multiples of 8`;
  if (t.cm) {
    // the stored slices are copied in SM x SK blocks
    for (const [rows, cols] of [slice(t, 'a', transA).dims, slice(t, 'b', transB).dims])
      if (rows % SM || cols % SK) return `a staged slice of ${rows} x ${cols} is not made of ${SM} x ${SK} blocks`;
  }
  const threads = t.sgm * t.sgn * plan.subgroupSize;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = tcSharedBytes(t, plan, transA, transB);
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** Workgroup memory of a tile: its staged slices of A and B (rows padded by 8 halves, `nbuf` of each) and the
 *  f32 scratch. */
export function tcSharedBytes(t: TcTile, plan: TensorCorePlan, transA: boolean, transB: boolean): number {
  const a = slice(t, 'a', transA);
  const b = slice(t, 'b', transB);
  return (t.nbuf ?? 2) * 2 * (a.size + b.size) + 4 * t.sgm * t.sgn * plan.frag.M * plan.frag.N;
}

function slice(t: TcTile, x: 'a' | 'b', trans: boolean): { stride: number; size: number; dims: [number, number] } {
  // A is staged [BM, BK] (or [BK, BM] when transposed), B [BK, BN] (or [BN, BK])
  const [rows, cols] = x === 'a' ? (trans ? [t.bk, t.bm] : [t.bm, t.bk]) : trans ? [t.bn, t.bk] : [t.bk, t.bn];
  return { stride: cols + 8, size: rows * (cols + 8), dims: [rows, cols] };
}

/** The kernel's flags (WGSL consts in the prelude). */
export interface TcFlags {
  VEC_A: boolean;
  VEC_B: boolean;
  HAS_BIAS: boolean;
  ACCUM: boolean;
  DIRECT: boolean;
}

const NO_FLAGS: TcFlags = { VEC_A: false, VEC_B: false, HAS_BIAS: false, ACCUM: false, DIRECT: false };

/** The WGSL prepended to `shaders/matmul-tc.wgsl` for a fragment, tile, layout and flags. */
export function tcPrelude(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS): string {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const a = slice(t, 'a', transA);
  const b = slice(t, 'b', transB);
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const vw = t.vw ?? 8;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  return (
    c('SM', SM) + c('SN', SN) + c('SK', SK) + c('SG', plan.subgroupSize) + c('SGM', t.sgm) + c('SGN', t.sgn) +
    c('FM', fm) + c('FN', fn) + c('BM', t.bm) + c('BN', t.bn) + c('BK', t.bk) + c('NBUF', t.nbuf ?? 2) + c('VW', vw) +
    c('AS_STRIDE', a.stride) + c('AS_SIZE', a.size) + c('BS_STRIDE', b.stride) + c('BS_SIZE', b.size) +
    `const A_T: bool = ${transA};\nconst B_T: bool = ${transB};\n` +
    Object.entries(flags).map(([k, v]) => `const ${k}: bool = ${v};\n`).join('') +
    // subgroup_matrix_left<T, K, M> is M rows x K columns; right<T, N, K> is K x N; result<T, N, M> is M x N
    `alias Lm = subgroup_matrix_left<f16, ${SK}, ${SM}>;\n` +
    `alias Rm = subgroup_matrix_right<f16, ${SN}, ${SK}>;\n` +
    `alias Acc = subgroup_matrix_result<f32, ${SN}, ${SM}>;\n` +
    `alias CmT = subgroup_matrix_left<f16, ${SK}, ${SM}>;\n` +
    // a transposed operand is staged as stored, so op(A) = [M, K] reads it column-major (and op(B) likewise)
    `fn load_l(off: u32) -> Lm { return subgroupMatrixLoad<Lm, ${transA ? 'col_major' : 'row_major'}>(&As, off, AS_STRIDE); }\n` +
    `fn load_r(off: u32) -> Rm { return subgroupMatrixLoad<Rm, ${transB ? 'col_major' : 'row_major'}>(&Bs, off, BS_STRIDE); }\n` +
    operandCode('a', vw, !!t.cm) +
    operandCode('b', vw, !!t.cm)
  );
}

/**
 * The global-memory side of operand x: its storage view (`x4`: array<vec4u>, or `xh`: array<f16> for CM
 * variants, the only view of the binding the entry point uses), `at_x(e)` (one element as f32, from the format
 * table where the view is the vec4u one), `fetch_x(bo, mn0, k0, u) -> UV` (unit u of a slice, 0 out of range)
 * and `put_x(buf, u, w)` (a unit into workgroup memory).
 */
function operandCode(x: 'a' | 'b', vw: 2 | 8, cm: boolean): string {
  const bind = x === 'a' ? 1 : 2;
  const X = x.toUpperCase();
  const ty = vw === 8 ? 'vec4u' : 'u32';
  let s = `alias UV_${x} = ${ty};\n`;
  let vec: string;
  if (cm) {
    s += `@group(0) @binding(${bind}) var<storage, read> ${x}h: array<f16>;\n`;
    s += `fn at_${x}(e: u32) -> f32 { return f32(${x}h[e]); }\n`;
    const w = (j: number) => `bitcast<u32>(vec2<f16>(${x}h[q.e + ${j}u], ${x}h[q.e + ${j + 1}u]))`;
    vec = vw === 8 ? `vec4u(${w(0)}, ${w(2)}, ${w(4)}, ${w(6)})` : w(0);
  } else {
    s += `@group(0) @binding(${bind}) var<storage, read> ${x}4: array<vec4u>;\n`;
    s += operandReader(x, 'f16');
    vec = vw === 8 ? `${x}4[q.e >> 3u]` : `${x}4[q.e >> 3u][(q.e >> 1u) & 3u]`;
  }
  const elem = vw === 8 ? `vec4u(pk_${x}(q, 0u), pk_${x}(q, 2u), pk_${x}(q, 4u), pk_${x}(q, 6u))` : `pk_${x}(q, 0u)`;
  s +=
    `fn fetch_${x}(bo: u32, mn0: u32, k0: u32, u: u32) -> UV_${x} {\n` +
    `  let q = unit_${x}(bo, mn0, k0, u);\n` +
    `  if (q.lim == 0u) { return UV_${x}(); }\n` +
    `  if (VEC_${X}) { return ${vec}; }\n` +
    `  return ${elem};\n}\n`;
  const words = vw === 8 ? ['w.x', 'w.y', 'w.z', 'w.w'] : ['w'];
  s +=
    `fn put_${x}(buf: u32, u: u32, w: UV_${x}) { put_${x}_at(s${x}_off(buf, u), w); }\n` +
    `fn put_${x}_at(o: u32, w: UV_${x}) {\n` +
    words.map((wd, i) => `  let h${i} = bitcast<vec2<f16>>(${wd});\n  ${X}s[o + ${2 * i}u] = h${i}.x;\n  ${X}s[o + ${2 * i + 1}u] = h${i}.y;\n`).join('') +
    `}\n`;
  return s;
}

/** Names of the //@ lines of `shaders/matmul-tc.wgsl` that `tcMatrixCode` fills. */
type TcHook = 'raster' | 'acc' | 'regs' | 'fetch0' | 'stash0' | 'fetch' | 'stash' | 'mma' | 'direct' | 'scratch';

/**
 * The straight-line code of `shaders/matmul-tc.wgsl` at its //@ lines for a tile on a fragment and layout:
 * accumulators, staging registers and their fetch / stash code (units per thread, or subgroup-matrix blocks for
 * CM variants), the fragment loads and multiply-accumulates of every SK step of a slice, and the stores of C.
 * `unroll` false gives the reference array form of the accumulators (indexed in loops; measured slow).
 */
export function tcMatrixCode(t: TcTile, plan: TensorCorePlan, unroll: boolean, transA = false, transB = false): Record<TcHook, string> {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const wg = t.sgm * t.sgn * plan.subgroupSize;
  const nsg = t.sgm * t.sgn;
  const vw = t.vw ?? 8;
  const ks = [...Array(t.bk / SK).keys()];
  const units = (x: 'a' | 'b', trans: boolean) => {
    const [rows, cols] = slice(t, x, trans).dims;
    return (rows * cols) / vw;
  };
  const blocks = (x: 'a' | 'b', trans: boolean) => {
    const [rows, cols] = slice(t, x, trans).dims;
    return (rows / SM) * (cols / SK);
  };
  // staging: per-thread units (guarded where the last round is partial) ...
  const unitCode = (x: 'a' | 'b', trans: boolean, f: (l: number, u: string) => string) => {
    const n = units(x, trans);
    return [...Array(Math.ceil(n / wg)).keys()].map((l) => {
      const u = `${l * wg}u + lid`;
      return (l + 1) * wg > n ? `if (${u} < ${n}u) { ${f(l, u)} }` : f(l, u);
    });
  };
  // ... or per-subgroup blocks (CM variants)
  const blockCode = (x: 'a' | 'b', trans: boolean, f: (i: number, blk: string) => string) => {
    const n = blocks(x, trans);
    return [...Array(Math.ceil(n / nsg)).keys()].map((i) => {
      const blk = `sg + ${i * nsg}u`;
      return (i + 1) * nsg > n ? `if (${blk} < ${n}u) { ${f(i, blk)} }` : f(i, blk);
    });
  };
  const mn0 = { a: 'm0', b: 'n0' };
  const bo = { a: 'boa', b: 'bob' };
  const scalarFetch = (x: 'a' | 'b', trans: boolean) => unitCode(x, trans, (l, u) => `r${x}_${l} = fetch_${x}(${bo[x]}, ${mn0[x]}, kn, ${u});`);
  const scalarStash = (x: 'a' | 'b', trans: boolean) => unitCode(x, trans, (l, u) => `put_${x}(sb, ${u}, r${x}_${l});`);
  const regDecl = (x: 'a' | 'b', trans: boolean) => unitCode(x, trans, (l) => `var r${x}_${l}: UV_${x};`).map((s) => s.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
  let regs = [...regDecl('a', transA), ...regDecl('b', transB)];
  let fetch = [...scalarFetch('a', transA), ...scalarFetch('b', transB)];
  let stash = [...scalarStash('a', transA), ...scalarStash('b', transB)];
  if (t.hoist) {
    // per unit: its global offset at K = 0 in load units (ga_/gb_) and its workgroup offset (oa_/ob_); a K step
    // adds kn (or kn rows of the operand's stride when K runs along rows) to every global offset
    const ks = { a: transA ? 'p.lda' : '1u', b: transB ? '1u' : 'p.ldb' };
    const hoistDecl = (x: 'a' | 'b', trans: boolean) => {
      const [, cols] = slice(t, x, trans).dims;
      const upr = cols / vw;
      const rows = wg / upr; // rows between a thread's consecutive units
      const X = x.toUpperCase();
      return unitCode(x, trans, (l, u) =>
        t.derive && wg % upr === 0 && l > 0
          ? `let g${x}_${l} = g${x}_0 + ${l * rows}u * ${vw === 8 ? `(p.ld${x} >> 3u)` : `p.ld${x}`}; let o${x}_${l} = o${x}_0 + ${l * rows}u * ${X}S_STRIDE;`
          : `let q${x}_${l} = unit_${x}(${bo[x]}, ${mn0[x]}, 0u, ${u}); let g${x}_${l} = q${x}_${l}.e >> 3u; let o${x}_${l} = s${x}_off(0u, ${u});`,
      ).map((s) => s.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
    };
    const fastFetch = (x: 'a' | 'b', trans: boolean) =>
      unitCode(x, trans, (l) =>
        vw === 8
          ? `r${x}_${l} = ${x}4[g${x}_${l} + dk${x}];`
          : `r${x}_${l} = ${x}4[(g${x}_${l} + dk${x}) >> 3u][((g${x}_${l} + dk${x}) >> 1u) & 3u];`,
      );
    const fastStash = (x: 'a' | 'b', trans: boolean) => unitCode(x, trans, (l) => `put_${x}_at(sb * ${x.toUpperCase()}S_SIZE + o${x}_${l}, r${x}_${l});`);
    regs = [
      ...regs,
      ...hoistDecl('a', transA),
      ...hoistDecl('b', transB),
      'var fast = false;',
    ];
    // vw 8: offsets in vec4u units (e >> 3); vw 2: element offsets (e), the word picked from the vec4u
    if (vw === 2) regs = regs.map((r) => r.replace(/(let g[ab]_\d+ = q[ab]_\d+\.e) >> 3u;/, '$1;'));
    const dk = (x: 'a' | 'b') => (vw === 8 ? `let dk${x} = (kn * ${ks[x]}) >> 3u;` : `let dk${x} = kn * ${ks[x]};`);
    fetch = [
      'fast = VEC_A && VEC_B && m0 + BM <= p.M && n0 + BN <= p.N && kn + BK <= p.K;',
      `if (fast) {\n  ${[dk('a'), dk('b'), ...fastFetch('a', transA), ...fastFetch('b', transB)].join('\n  ')}\n} else {\n  ${fetch.join('\n  ')}\n}`,
    ];
    stash = [`if (fast) {\n  ${[...fastStash('a', transA), ...fastStash('b', transB)].join('\n  ')}\n} else {\n  ${stash.join('\n  ')}\n}`];
  }
  if (t.cm) {
    const cmDecl = (x: 'a' | 'b', trans: boolean) => blockCode(x, trans, (i) => `var c${x}_${i}: CmT;`).map((s) => s.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
    const cmFetch = (x: 'a' | 'b', trans: boolean) =>
      blockCode(x, trans, (i, blk) => `c${x}_${i} = subgroupMatrixLoad<CmT, row_major>(&${x}h, cm_${x}(${bo[x]}, ${mn0[x]}, kn, ${blk}), p.ld${x});`);
    const cmStash = (x: 'a' | 'b', trans: boolean) =>
      blockCode(x, trans, (i, blk) => `subgroupMatrixStore<row_major>(&${x.toUpperCase()}s, cms_${x}(sb, ${blk}), c${x}_${i}, ${x.toUpperCase()}S_STRIDE);`);
    regs = [...regs, ...cmDecl('a', transA), ...cmDecl('b', transB), 'var inb = false;'];
    fetch = [
      'inb = m0 + BM <= p.M && n0 + BN <= p.N && kn + BK <= p.K;',
      `if (inb) {\n  ${[...cmFetch('a', transA), ...cmFetch('b', transB)].join('\n  ')}\n} else {\n  ${fetch.join('\n  ')}\n}`,
    ];
    stash = [`if (inb) {\n  ${[...cmStash('a', transA), ...cmStash('b', transB)].join('\n  ')}\n} else {\n  ${stash.join('\n  ')}\n}`];
  }
  // the workgroup's tile: row by row, or in groups of gm tile rows
  const raster = t.gm
    ? [
        'let gid = wg.y * nwg.x + wg.x;',
        `let per = ${t.gm}u * nwg.x;`,
        `let g0 = (gid / per) * ${t.gm}u;`,
        `let gs = min(nwg.y - g0, ${t.gm}u);`,
        'let m0 = (g0 + (gid % per) % gs) * BM;',
        'let n0 = ((gid % per) / gs) * BN;',
      ].join('\n')
    : 'let m0 = wg.y * BM;\nlet n0 = wg.x * BN;';
  const staging = { raster, regs: regs.join('\n'), fetch0: fetch.join('\n'), stash0: stash.join('\n'), fetch: fetch.join('\n'), stash: stash.join('\n') };
  if (t.ablate === 'nostage') Object.assign(staging, { fetch: '', stash: '' });
  if (!unroll) {
    const mma = `for (var kk = 0u; kk < BK; kk += SK) {
      var lf: array<Lm, FM>;
      var rf: array<Rm, FN>;
      for (var i = 0u; i < FM; i++) { lf[i] = load_l(ab + a_off(wm0 + i * SM, kk)); }
      for (var j = 0u; j < FN; j++) { rf[j] = load_r(bb + b_off(kk, wn0 + j * SN)); }
      for (var i = 0u; i < FM; i++) {
        for (var j = 0u; j < FN; j++) {
          acc[i * FN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf[j], acc[i * FN + j]);
        }
      }
    }`;
    return {
      ...staging,
      acc: 'var acc: array<Acc, FM * FN>;',
      mma: t.ablate === 'nomma' ? '' : mma,
      direct: `for (var i = 0u; i < FM; i++) {
      for (var j = 0u; j < FN; j++) {
        let o = cb + (m0 + wm0 + i * SM) * p.N + n0 + wn0 + j * SN;
        subgroupMatrixStore<row_major>(&c, o, acc[i * FN + j], p.N);
      }
    }`,
      scratch: `for (var i = 0u; i < FM; i++) {
    for (var j = 0u; j < FN; j++) {
      subgroupMatrixStore<row_major>(&Cs, cs, acc[i * FN + j], SN);
      workgroupBarrier();
      copy_out(i, j, cs, lane, m0, n0, wm0, wn0, cb);
      workgroupBarrier();
    }
  }`,
    };
  }
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const I = [...Array(fm).keys()];
  const J = [...Array(fn).keys()];
  const IJ = I.flatMap((i) => J.map((j) => [i, j] as const));
  const mac = (k: number, i: number, j: number) => `acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l${k}_${i}, r${k}_${j}, acc_${i}_${j});`;
  const loadR = (k: number, j: number) => `let r${k}_${j} = load_r(bb + b_off(${k * SK}u, wn0 + ${j * SN}u));`;
  const mma = ks.flatMap((k) => [
    ...I.map((i) => `let l${k}_${i} = load_l(ab + a_off(wm0 + ${i * SM}u, ${k * SK}u));`),
    ...(t.ilv
      ? J.flatMap((j) => [loadR(k, j), ...I.map((i) => mac(k, i, j))])
      : [...J.map((j) => loadR(k, j)), ...IJ.map(([i, j]) => mac(k, i, j))]),
  ]);
  return {
    ...staging,
    acc: IJ.map(([i, j]) => `var acc_${i}_${j}: Acc;`).join('\n'),
    mma: t.ablate === 'nomma' ? '' : mma.join('\n'),
    direct: IJ.map(([i, j]) => `subgroupMatrixStore<row_major>(&c, cb + (m0 + wm0 + ${i * SM}u) * p.N + n0 + wn0 + ${j * SN}u, acc_${i}_${j}, p.N);`).join('\n'),
    scratch: IJ.map(
      ([i, j]) =>
        `subgroupMatrixStore<row_major>(&Cs, cs, acc_${i}_${j}, SN);\nworkgroupBarrier();\n` +
        `copy_out(${i}u, ${j}u, cs, lane, m0, n0, wm0, wn0, cb);\nworkgroupBarrier();`,
    ).join('\n'),
  };
}

/** The whole WGSL of a tensor-core kernel: the prelude and `shaders/matmul-tc.wgsl` with its generated code. */
export function tcSource(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS, unroll = false): string {
  const m = tcMatrixCode(t, plan, unroll, transA, transB);
  const body = tcWgsl.replace(/^(\s*)\/\/@(\w+)$/gm, (_, ind: string, k: TcHook) => {
    if (!(k in m)) throw new Error(`matmul-tc.wgsl: unknown hook //@${k}`);
    return m[k]
      .split('\n')
      .map((l) => ind + l)
      .join('\n');
  });
  return tcPrelude(plan, t, transA, transB, flags) + body;
}

/** One product as the matmul kernels see it (`matmul` prepared it: batch folded, strides in elements). */
export interface MatmulLaunch {
  M: number;
  N: number;
  K: number;
  batch: number;
  /** Batch strides of A and B (elements; 0 broadcasts). */
  sa: number;
  sb: number;
  /** Row strides of A and B as stored (elements). */
  lda: number;
  ldb: number;
  transA: boolean;
  transB: boolean;
  alpha: number;
  accumulate: boolean;
}

/** A tensor-core launch: a {@link MatmulLaunch} with its bias dtype and an optional forced tile. */
export interface TcLaunch extends MatmulLaunch {
  biasDtype: DType;
  hasBias: boolean;
  /** Force a tile (tests and benchmarks); default: `tcTuning`. */
  tile?: TcTile;
}

/** A tile's identity in kernel names and cache keys, e.g. `128x256x32-2x4-v2-b1-cm`. */
export function tcTileKey(t: TcTile): string {
  return `${t.bm}x${t.bn}x${t.bk}-${t.sgm}x${t.sgn}-v${t.vw ?? 8}-b${t.nbuf ?? 2}${t.cm ? '-cm' : ''}${t.hoist ? '-h' : ''}${t.derive ? 'd' : ''}${t.ilv ? '-i' : ''}${t.gm ? `-g${t.gm}` : ''}${t.ablate ? `-${t.ablate}` : ''}`;
}

/** The tile `auto` runs for a product: the big one when the product has enough of them, else the small one,
 *  each only if it fits the device (else 128x64, else 64x64). */
export function chooseTcTile(plan: TensorCorePlan, limits: Record<string, number>, l: Pick<TcLaunch, 'M' | 'N' | 'batch' | 'transA' | 'transB'>): TcTile {
  const big = TC_TILES[tcTuning.big];
  const tiles = Math.ceil(l.M / big.bm) * Math.ceil(l.N / big.bn) * l.batch;
  const first = tiles >= tcTuning.minBigTiles ? tcTuning.big : tcTuning.small;
  const order: TcTileName[] = first === tcTuning.big ? [first, tcTuning.bigAlt, tcTuning.small, 't128x64', 't64x64'] : [first, 't128x64', 't64x64'];
  for (const n of order) if (!tcTileProblem(TC_TILES[n], plan, limits, l.transA, l.transB)) return TC_TILES[n];
  throw new ShapeError(`matmul: no tensor-core tile fits this device (fragment ${plan.frag.M}x${plan.frag.N}x${plan.frag.K})`);
}

/** WGSL extensions of the tensor-core kernel (`subgroups` for the subgroup_id / subgroup_invocation_id builtins). */
export const TC_ENABLES = ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'];

const PARAMS: readonly ParamSpec[] = ['u32:M', 'u32:N', 'u32:K', 'u32:sa', 'u32:sb', 'f32:alpha', 'u32:one', 'u32:lda', 'u32:ldb'];

/** The kernel definition (bindings, params, enables) around tensor-core WGSL `code` (the prelude and
 *  `shaders/matmul-tc.wgsl`, or a variant of them in tests). */
export function tcKernelDef(code: string, biasDtype: DType = 'f16'): Omit<KernelDef, 'name'> {
  return {
    code,
    bindings: [
      { name: 'a', access: 'read', dtype: 'f16' },
      { name: 'b', access: 'read', dtype: 'f16' },
      { name: 'bias', access: 'read', dtype: biasDtype },
      { name: 'c', access: 'rw', dtype: 'f32' },
    ],
    params: PARAMS,
    enables: TC_ENABLES,
  };
}

/** Tensor-core kernels whose check failed on this context (cache key -> error): the portable path runs. */
export function tcFailures(ctx: Context): Map<string, Error> {
  return new Map([...kernelFailures(ctx)].filter(([k]) => k.startsWith('mmtc:')));
}

/** Wait until every tensor-core kernel requested so far on this context has been checked (and built). */
export const tensorCoresReady = kernelsReady;

/**
 * Encode one tensor-core matmul (operands already checked by `matmul`: f16 A and B, f32 C). Returns false,
 * encoding nothing, while the kernel is still being checked or if it failed its check (the caller runs the
 * portable kernel then).
 */
export function matmulTc(ctx: Context, plan: TensorCorePlan, l: TcLaunch, bufs: [BufferBinding, BufferBinding, BufferBinding, BufferBinding]): boolean {
  const t = l.tile ?? chooseTcTile(plan, ctx.info.limits, l);
  if (l.tile) {
    const why = tcTileProblem(t, plan, ctx.info.limits, l.transA, l.transB);
    if (why) throw new ShapeError(`matmul: tensor-core tile ${JSON.stringify(t)}: ${why}`);
  }
  const flags: TcFlags = {
    VEC_A: l.lda % 8 === 0 && l.sa % 8 === 0,
    VEC_B: l.ldb % 8 === 0 && l.sb % 8 === 0,
    HAS_BIAS: l.hasBias,
    ACCUM: l.accumulate,
    DIRECT: !l.hasBias && !l.accumulate && tcTuning.direct,
  };
  const name = `matmul-tc-${tcTileKey(t)}${tcTuning.unroll ? '-u' : ''}`;
  const key = `mmtc:${name}:${+l.transA}${+l.transB}:${l.biasDtype}:${Object.values(flags).map(Number).join('')}`;
  // subgroup-matrix pipelines are built only once their WGSL checked out (see kernel-cache.ts: under Dawn's
  // skip_validation a shader breaking a subgroup-matrix rule aborted the process at pipeline creation)
  const k = checkedKernel(ctx, key, () => ({ name, ...tcKernelDef(tcSource(plan, t, l.transA, l.transB, flags, tcTuning.unroll), l.biasDtype) }));
  if (!k) return false;
  const x = Math.ceil(l.N / t.bn);
  const y = Math.ceil(l.M / t.bm);
  if (x > 65535 || y > 65535) throw new ShapeError(`matmul: ${y} x ${x} workgroup tiles are more than one dispatch takes`);
  ctx.dispatch(k, bufs, [x, y, l.batch], [l.M, l.N, l.K, l.sa, l.sb, l.alpha, 1, l.lda, l.ldb]);
  return true;
}

const plans = new WeakMap<Context, TensorCorePlan | { reason: string }>();

/** The context's tensor-core plan (memoised). */
export function contextTcPlan(ctx: Context): TensorCorePlan | { reason: string } {
  let p = plans.get(ctx);
  if (!p) plans.set(ctx, (p = tensorCorePlan(ctx.info)));
  return p;
}
