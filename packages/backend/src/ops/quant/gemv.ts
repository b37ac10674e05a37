/**
 * The decode-shape GEMV with subgroup reductions (`shaders/dequant-gemv-sg.wgsl`): `Y [M, N] = X [M, K] W^T`
 * for 1..16 rows, reading W's packed words once, 16 bytes per load, R rows of W per workgroup. It serves quantized
 * weights (`quantLinear`'s `gemv` variant on adapters with subgroups) and 16-bit float weights ({@link gemv16},
 * the honest f16 baseline of the same shape). Adapters without subgroups run the portable
 * `shaders/dequant-gemv.wgsl` for quantized weights and `matmul` for float ones.
 */
import gemvWgsl from '../../../../../shaders/dequant-gemv-sg.wgsl';
import type { Context, Kernel } from '../../context';
import { ShapeError } from '../../errors';
import { formatOf } from '../../format';
import type { BindingSpec, KernelDef, ParamSpec } from '../../kernel';
import { cachedKernel } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { matmul } from '../core/matmul';
import { assertFloat, checkBinding, checkOut, fmtShape } from '../core/util';
import { FMT_ID, type QuantTensor } from './formats';
import { dqState, quantPrelude } from './quantize';

/** Float weight formats the GEMV reads: 16-bit (two per u32 word) and f32 (one). */
export type FloatW = 'f16' | 'bf16' | 'f32';

/** Rows of X the GEMV kernels take. */
export const GEMV_MAX_ROWS = 16;

/** One layout of the subgroup GEMV (see `shaders/dequant-gemv-sg.wgsl`): entry point, rows, threads, prefetch. */
export interface GemvSetting {
  /** Rows of W per workgroup (entry `main`), or per thread (`main_rows`). */
  rows: number;
  /** Threads per workgroup (`0`: from the row length, {@link gemvThreads}). */
  threads: number;
  /** Entry point `main_rows` (adapters with one fixed subgroup size): each subgroup owns `rows` rows of W, its
   *  lanes split each row, no workgroup reduction; else `main` (the workgroup's threads split each row). */
  subgroupRows: boolean;
  /** u32 words of W a thread loads at a time (one chunk: 4, a vec4u, the default; 2; or 1), where the row length
   *  allows (else the next smaller). Smaller chunks make the X loads of a subgroup's lanes closer together (a lane
   *  reads the CW x epw consecutive X elements of its chunk: 128 bytes per lane at int4 and CW 4). */
  chunkWords?: 1 | 2 | 4;
  /** Load the words (and scales) of a thread's next chunk of each row before computing this one: loads stay in
   *  flight through the loop over a row's chunks (where a thread has several). */
  prefetch?: boolean;
}

/** The row counts of X tuned apart: one row (`one`), 2 .. manyFrom - 1 (`few`), manyFrom .. 16 (`many`). */
export type GemvClass = 'one' | 'few' | 'many';
export const GEMV_CLASSES: readonly GemvClass[] = ['one', 'few', 'many'];

/** The class of M rows of X. */
export function gemvClass(M: number): GemvClass {
  return M <= 1 ? 'one' : M < gemvTuning.manyFrom ? 'few' : 'many';
}

/** Tuning of the subgroup GEMV (a benchmark may change it): the layout of each class of row counts
 *  ({@link gemvClass}) for quantized weights, and (`float`) for 16-bit float ones (gemv16, tuned on its own so that
 *  the f16 baseline is its best too); `maxThreads` (the most threads {@link gemvThreads} picks), `unroll` (unset:
 *  unrolled on GPUs, and on software adapters for at most 4 accumulators per thread); `probe` (benchmarks only,
 *  results wrong): leave a stage out to time the rest (`no-x`: X read as ones; `no-deq`: words bit-cast instead
 *  of decoded; `no-scale`: block scales of 1, not read; `w-only`: all three); `decode`: how int4 / int8 codes
 *  become floats (`'mask'`, the default: one AND-OR per element and an fma, no per-element shift; `'shift'`: a
 *  shift, an AND-OR and a subtraction per element; both exact, see `shaders/dequant-gemv-sg.wgsl`). Chosen from
 *  the H100 sweeps of 2026-11-24 (docs/PERFORMANCE.md): `many` and
 *  float `one` / `many` from the first two (the fastest of either run per shape, since the GPU's clock only ever made
 *  a timing slower); `one`, `few` and float `few` (chunks of 2, 1 and 2 words) from the sixth session's, where they
 *  ranked first in both calls. `oneSmall`: the layout of one row of X and a quantized weight of fewer than
 *  `below` elements (the 1.1B model's projections: 4 rows per workgroup, prefetch), where it measured up to 13%
 *  faster than `one` (sixth session, call 6; `one` was faster at 4096^2 and above). */
export const gemvTuning: Record<GemvClass, GemvSetting> & {
  float: Record<GemvClass, GemvSetting>;
  oneSmall?: { below: number; set: GemvSetting };
  manyFrom: number;
  maxThreads: number;
  unroll?: boolean;
  probe?: GemvShape['probe'];
  decode: 'mask' | 'shift';
} = {
  one: { rows: 8, threads: 128, subgroupRows: false, chunkWords: 2 },
  few: { rows: 4, threads: 128, subgroupRows: false, chunkWords: 1 },
  many: { rows: 4, threads: 256, subgroupRows: true, prefetch: true },
  oneSmall: { below: 4096 * 4096, set: { rows: 4, threads: 128, subgroupRows: false, prefetch: true, chunkWords: 2 } },
  float: {
    one: { rows: 8, threads: 256, subgroupRows: false },
    few: { rows: 4, threads: 128, subgroupRows: false, chunkWords: 2 },
    many: { rows: 4, threads: 0, subgroupRows: false, prefetch: true },
  },
  manyFrom: 5,
  maxThreads: 128,
  decode: 'mask',
};

/** A copy of {@link gemvTuning} (its settings copied too), for saving and restoring it around a change. */
export function gemvTuningCopy(): typeof gemvTuning {
  const t = gemvTuning;
  const sets = (o: Record<GemvClass, GemvSetting>) => ({ one: { ...o.one }, few: { ...o.few }, many: { ...o.many } });
  return { ...t, ...sets(t), float: sets(t.float), ...(t.oneSmall ? { oneSmall: { below: t.oneSmall.below, set: { ...t.oneSmall.set } } } : {}) };
}

/** Set {@link gemvTuning} to `t` (a copy of it, as {@link gemvTuningCopy} returns). */
export function setGemvTuning(t: typeof gemvTuning): void {
  for (const k of Object.keys(gemvTuning)) delete (gemvTuning as Record<string, unknown>)[k];
  Object.assign(gemvTuning, t);
}

/** Whether this context runs the subgroup GEMV: it needs `subgroups` and a known smallest subgroup size. */
export function gemvSubgroupsAvailable(ctx: Context): boolean {
  return ctx.info.features.subgroups && ctx.info.subgroupSizes.min > 0 && ctx.info.subgroupSizes.max <= 128;
}

/** Threads per workgroup for rows of `nc` chunks: about one chunk per thread, a power of two between the
 *  adapter's largest subgroup size and `gemvTuning.maxThreads`; `threads` (a setting's) wins where not 0. */
export function gemvThreads(ctx: Context, nc: number, threads = 0): number {
  if (threads) return threads;
  const lo = Math.max(ctx.info.subgroupSizes.max, 32);
  let t = lo;
  while (t < gemvTuning.maxThreads && t < nc) t *= 2;
  return t;
}

/** The weight side of one GEMV launch. */
export interface GemvWeight {
  N: number;
  K: number;
  /** u32 words per row. */
  wpr: number;
  /** Elements per u32 word. */
  epw: number;
  G: number;
  nb: number;
  /** quant format id (FMT) or the float dtype. */
  fmt: number | FloatW;
  data: DeviceTensor;
  /** First-level scales as stored: f32 / f16 values, or (with `dq`) the u8 codes of double quantization. */
  scales?: DeviceTensor;
  /** Double quantization (NF4 + dq), decoded in the kernel: absmax2 [ceil(N nb / 256)] and offset [1]. */
  dq?: { absmax2: DeviceTensor; offset: DeviceTensor };
}

/** Generated WGSL of one kernel variant (exported for tests that inspect it). */
export function gemvSource(o: GemvShape): string {
  const { CW, epw } = o;
  const CE = CW * epw;
  const floatW = typeof o.fmt === 'string';
  const MR = o.MR;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  let pre =
    c('MR', MR) + c('R', o.R) + c('WG', o.WG) + c('NSG', o.NSG) + c('CW', CW) + c('CE', CE) +
    `const HAS_BIAS: bool = ${o.hasBias};\nconst FLOAT_W: bool = ${floatW};\n` +
    `fn deq_f2(w: u32) -> vec2f { return ${!floatW ? 'vec2f(0.0)' : o.fmt === 'f32' ? 'vec2f(bitcast<f32>(w), 0.0)' : formatOf(o.fmt as string).wgsl.unpack('w')}; }\n`;
  // block scales: f16 ones through the hardware conversion (exact), f32 ones as stored
  const probe = (p: 'no-x' | 'no-deq' | 'no-scale') => o.probe === p || o.probe === 'w-only';
  const P = o.parts ?? 1;
  if (P > 1) pre += partsPrelude(o, probe('no-scale'));
  else if (!floatW && probe('no-scale')) pre += 'fn scale_at(i: u32) -> f32 { return 1.0; }\n';
  else if (o.dq) pre += `fn scale_at(i: u32) -> f32 { return ${dqScale('s', 'absmax2', 'offset')}; }\n`;
  else if (!floatW) pre += o.f16Scales ? 'fn scale_at(i: u32) -> f32 { return unpack2x16float(s[i >> 1u])[i & 1u]; }\n' : 'fn scale_at(i: u32) -> f32 { return read_s(i); }\n';
  // one x element (x4 and x cannot both be used by one entry point)
  if (o.xVec) pre += '@group(0) @binding(1) var<storage, read> x4: array<vec4f>;\nfn xe(i: u32) -> f32 { return x4[i >> 2u][i & 3u]; }\n';
  else pre += 'fn xe(i: u32) -> f32 { return read_x(i); }\n';
  if (CW > 1 && P === 1) pre += `@group(0) @binding(2) var<storage, read> q${CW}: array<vec${CW}u>;\n`;
  // the chunk's element groups: [first element, size, WGSL of the unscaled values of row r]
  const groups: Group[] = [];
  const word = (r: number, j: number) => (CW > 1 ? `w_${r}[${j}]` : `w_${r}`);
  if (floatW && epw === 1) groups.push([0, CW, (r) => `bitcast<vec${CW}f>(w_${r})`]); // f32: CW 2 or 4
  else if (floatW) {
    if (CW > 1) for (let j = 0; j < CW; j += 2) groups.push([j * 2, 4, (r) => `vec4f(deq_f2(${word(r, j)}), deq_f2(${word(r, j + 1)}))`]);
    else groups.push([0, 2, (r) => `deq_f2(${word(r, 0)})`]);
  } else {
    const mask = o.decode === 'mask';
    for (let j = 0; j < CW; j++) {
      if (epw === 4) groups.push([j * 4, 4, (r) => (mask ? `deq_i8m(${word(r, j)})` : `deq_i8(${word(r, j)})`)]);
      else if (mask && o.fmt === FMT_ID.int4) {
        groups.push([j * 8, 4, (r) => `deq_i4m(${word(r, j)})`]);
        groups.push([j * 8 + 4, 4, (r) => `deq_i4m(${word(r, j)} >> 16u)`]);
      } else {
        const f = o.fmt === FMT_ID.nf4 ? 'deq_nf4' : 'deq_i4';
        groups.push([j * 8, 4, (r) => `${f}(${word(r, j)}, SH_LO)`]);
        groups.push([j * 8 + 4, 4, (r) => `${f}(${word(r, j)}, SH_HI)`]);
      }
    }
  }
  // the probe keeps every word in use (each group bit-casts its own word)
  if (probe('no-deq')) for (const gr of groups) gr[2] = (r: number) => `bitcast<vec${gr[1]}f>(vec${gr[1]}u(${word(r, Math.floor(gr[0] / epw))}))`;
  const xg: XLoad = (m, e0, g) => {
    if (probe('no-x')) return `vec${g}f(1.0)`;
    const b = `${typeof m === 'number' ? `${m}u` : m} * p.K + k0 + ${e0}u`;
    if (o.xVec && g === 4) return `x4[(${b}) >> 2u]`;
    return `vec${g}f(${[...Array(g).keys()].map((i) => `xe(${b} + ${i}u)`).join(', ')})`;
  };
  const hasScale = !floatW;
  const parts: Record<string, string> = o.unroll ? unrolledCode(o, groups, xg, hasScale) : rolledCode(o, groups, xg, hasScale);
  pre += `const SG: u32 = ${o.sgRows ?? 1}u;\n`; // main_rows: the subgroup size
  let body = gemvWgsl;
  if (P > 1) {
    // each workgroup (main) or subgroup (main_rows) takes R rows of one part: its part pj, its first row n0 in it,
    // the part's rows nEnd and its block of y at yb; the walk once per part, on that part's bindings
    const unit = (u: string) => `let u = ${u}; let pj = part_of(u); let n0 = (u - unit0(pj)) * R; let nEnd = rows_of(pj); let yb = yo_of(pj);`;
    body = body
      .replace('let n0 = (wg.x + wg.y * p.gx) * R;', unit('wg.x + wg.y * p.gx'))
      .replace('let n0 = ((wg.x + wg.y * p.gx) * (WG / SG) + sid) * R;', unit('(wg.x + wg.y * p.gx) * (WG / SG) + sid'))
      .replace('if (n < p.N) {', 'if (n < nEnd) {')
      .replace('y[(o % MR) * p.N + n]', 'y[yb + (o % MR) * nEnd + n]')
      .replace('read_bias(n)', 'bias_at(pj, n)');
    const walks = [...Array(P).keys()].map((j) => {
      const lc = loadCode(o.R, CW, !floatW, o.G, o.prefetch, j);
      return `if (pj == ${j}u) {\n${WALK.replace(/^(\s*)\/\/@pre$/m, (_, i: string) => i + lc.pre).replace(/^(\s*)\/\/@load$/m, (_, i: string) => i + lc.load)}\n  }`;
    });
    body = body.replace(/^\s*\/\/@walk$/gm, '  ' + walks.join(' else '));
  }
  return pre + body.replace(/^\s*\/\/@walk$/gm, WALK).replace(/^(\s*)\/\/@(acc|pre|load|fast|tail|reduce|rows_out)$/gm, (_, ind: string, k: string) => ind + parts[k]);
}

/** The //@walk line of both entry points: a thread's walk over its chunks c0, c0 + cstep, ... of the R rows, each
 *  a whole chunk (//@fast) or the row's partial last one (//@tail), with the generated //@pre and //@load code. */
const WALK = `  //@pre
  for (var c = c0; c < p.nc; c += cstep) {
    let k0 = c * CE;
    //@load
    if (k0 + CE <= p.K) {
      //@fast
    } else {
      for (var e = 0u; e < CE; e++) {
        let k = k0 + e;
        if (k < p.K) {
          //@tail
        }
      }
    }
  }`;

type Group = [number, number, (r: number) => string];
type XLoad = (m: number | string, e0: number, g: number) => string;

/** Element (m, n) of y: row-major [M, N], or with parts, of the part's block [M, nEnd] at yb (see partsPrelude). */
const yAt = (o: GemvShape, m: string, n: string) => ((o.parts ?? 1) > 1 ? `y[yb + ${m} * nEnd + ${n}]` : `y[${m} * p.N + ${n}]`);
const biasAt = (o: GemvShape, n: string) => ((o.parts ?? 1) > 1 ? `bias_at(pj, ${n})` : `read_bias(${n})`);
/** The rows of W: all of them, or with parts, the part's. */
const rowsEnd = (o: GemvShape) => ((o.parts ?? 1) > 1 ? 'nEnd' : 'p.N');

/**
 * WGSL of a GEMV over several weights at once (`GemvShape.parts`, {@link gemvParts}): the grid's units (workgroups
 * of `main`, subgroups of `main_rows`), R rows of W each, are those of each part in turn: part j has
 * ceil(N_j / R) units from unit U_j (params U1, U2; U_0 = 0), N_j rows (params N, N1, N2) and its result block
 * [M, N_j] in y at element yo_j (params yo1, yo2; yo_0 = 0). A unit's part is uniform, so the walk over its rows
 * (generated once per part, on that part's bindings `q_j` / `q<CW>_j`, `scale_at_j`) has no per-load choice.
 */
function partsPrelude(o: GemvShape, noScale: boolean): string {
  const P = o.parts!;
  const floatW = typeof o.fmt === 'string';
  const b = partBindings(P, !floatW, o.hasBias, o.dq);
  const js = [...Array(P).keys()];
  const by = (vals: string[]) => (P === 2 ? `select(${vals[1]}, ${vals[0]}, j == 0u)` : `select(select(${vals[2]}, ${vals[1]}, j == 1u), ${vals[0]}, j == 0u)`);
  let s = P === 2 ? 'fn part_of(u: u32) -> u32 { return select(1u, 0u, u < p.U1); }\n' : 'fn part_of(u: u32) -> u32 { return select(select(2u, 1u, u < p.U2), 0u, u < p.U1); }\n';
  s += `fn unit0(j: u32) -> u32 { return ${by(['0u', 'p.U1', 'p.U2'])}; }\n`;
  s += `fn rows_of(j: u32) -> u32 { return ${by(['p.N', 'p.N1', 'p.N2'])}; }\n`;
  s += `fn yo_of(j: u32) -> u32 { return ${by(['0u', 'p.yo1', 'p.yo2'])}; }\n`;
  if (o.CW > 1) for (const j of js) s += `@group(0) @binding(${b.q[j]}) var<storage, read> q${o.CW}_${j}: array<vec${o.CW}u>;\n`;
  if (!floatW)
    for (const j of js)
      s += noScale
        ? `fn scale_at_${j}(i: u32) -> f32 { return 1.0; }\n`
        : `fn scale_at_${j}(i: u32) -> f32 { return ${o.dq ? dqScale(`s${j}`, `absmax2_${j}`, `offset_${j}`) : o.f16Scales ? `unpack2x16float(s${j}[i >> 1u])[i & 1u]` : `read_s${j}(i)`}; }\n`;
  const bias = js.map((j) => (j < P - 1 ? `if (j == ${j}u) { return read_b${j}(n); }` : `return read_b${j}(n);`)).join(' ');
  s += `fn bias_at(j: u32, n: u32) -> f32 { ${o.hasBias ? bias : 'return 0.0;'} }\n`;
  return s;
}

/** Scale i of double-quantized codes (NF4 + dq, layout in formats.ts): DYN_MAP[code] * absmax2[i / 256] + offset,
 *  what `shaders/dequant-dq-scales.wgsl` writes out, read where the GEMV needs it. */
const dqScale = (codes: string, absmax2: string, offset: string) =>
  `DYN_MAP[(${codes}[i >> 2u] >> (8u * (i & 3u))) & 0xffu] * read_${absmax2}(i >> 8u) + read_${offset}(0u)`;

/** Binding numbers of a parts GEMV: x 1, then each part's words and scales (and double-quantization state), then
 *  the biases, then y. */
export function partBindings(P: number, quant: boolean, hasBias: boolean, dq = false): { q: number[]; s: number[]; b: number[]; y: number } {
  const per = quant ? (dq ? 4 : 2) : 1;
  const q = [...Array(P).keys()].map((j) => 2 + per * j);
  const s = quant ? q.map((v) => v + 1) : [];
  const b = hasBias ? [...Array(P).keys()].map((j) => 2 + per * P + j) : [];
  return { q, s, b, y: 2 + per * P + b.length };
}

/** The //@pre and //@load lines: each row's chunk words (and scale); with `prefetch`, those of the thread's first
 *  chunk before the loop, and in the loop those of its next chunk (c + cstep, clamped to the row's last) loaded
 *  while this one is computed. */
function loadCode(R: number, CW: number, hasScale: boolean, G = 0, prefetch = false, part?: number): { pre: string; load: string } {
  const sfx = part === undefined ? '' : `_${part}`;
  const word = (r: number, c: string) => `${CW > 1 ? `q${CW}${sfx}` : part === undefined ? 'q' : `q${part}`}[row_${r} * p.nc + ${c}]`;
  // the block of chunk c: a shift where the block size is a constant power of two (no run-time division)
  const blk = (c: string) => (G ? `(${c}) * CE / ${G}u` : '0u');
  const scale = (r: number, c: string) => `scale_at${sfx}(row_${r} * p.nb${G ? ` + ${blk(c)}` : ''})`;
  const rs = [...Array(R).keys()];
  const row = (r: number) => `let row_${r} = min(n0 + ${r}u, ${part === undefined ? 'p.N' : 'nEnd'} - 1u);`;
  if (!prefetch)
    return {
      pre: '',
      load: rs.map((r) => [row(r), `let w_${r} = ${word(r, 'c')};`, hasScale ? `let s_${r} = ${scale(r, 'c')};` : ''].filter(Boolean).join(' ')).join('\n    '),
    };
  const first = 'min(c0, p.nc - 1u)';
  const next = 'min(c + cstep, p.nc - 1u)';
  const pre = rs.map((r) => [row(r), `var pw_${r} = ${word(r, first)};`, hasScale ? (G ? `var ps_${r} = ${scale(r, first)};` : `let s_${r} = ${scale(r, 'c0')};`) : ''].filter(Boolean).join(' '));
  const load = rs.map((r) => [`let w_${r} = pw_${r}; pw_${r} = ${word(r, next)};`, hasScale && G ? `let s_${r} = ps_${r}; ps_${r} = ${scale(r, next)};` : ''].filter(Boolean).join(' '));
  return { pre: pre.join('\n  '), load: load.join('\n    ') };
}

/** Every accumulator a named variable, every row and row of X written out (GPUs). */
function unrolledCode(o: GemvShape, groups: Group[], xg: XLoad, hasScale: boolean): Record<string, string> {
  const { MR, R, CW, epw } = o;
  const rs = [...Array(R).keys()];
  const ms = [...Array(MR).keys()];
  const tAcc = hasScale && !o.preScale;
  const acc = rs.flatMap((r) => ms.map((m) => `var a_${r}_${m} = 0.0;`)).join('\n  ');
  const fast: string[] = [];
  if (tAcc) fast.push(...rs.flatMap((r) => ms.map((m) => `var t_${r}_${m} = 0.0;`)));
  groups.forEach(([e0, g, expr], gi) => {
    for (const r of rs) fast.push(`let d_${r}_${gi} = ${expr(r)}${hasScale && !tAcc ? ` * s_${r}` : ''};`);
    for (const m of ms) {
      fast.push(`{ let xv = ${xg(m, e0, g)};`);
      for (const r of rs) fast.push(tAcc ? `  t_${r}_${m} += dot(d_${r}_${gi}, xv);` : `  a_${r}_${m} += dot(d_${r}_${gi}, xv);`);
      fast.push('}');
    }
  });
  if (tAcc) fast.push(...rs.flatMap((r) => ms.map((m) => `a_${r}_${m} = fma(s_${r}, t_${r}_${m}, a_${r}_${m});`)));
  const tailWord = (r: number) => (CW > 1 ? `w_${r}[e / ${epw}u]` : `w_${r}`);
  const tail = [
    ...rs.map((r) => `let v_${r} = w_elem(${tailWord(r)}, e % ${epw}u)${hasScale ? ` * s_${r}` : ''};`),
    ...ms.flatMap((m) => [`{ let xv = xe(${m}u * p.K + k);`, ...rs.map((r) => `  a_${r}_${m} = fma(v_${r}, xv, a_${r}_${m});`), '}']),
  ].join('\n          ');
  const reduce = [
    ...rs.flatMap((r) => ms.map((m) => `let z_${r}_${m} = subgroupAdd(a_${r}_${m});`)),
    'if (subgroupElect()) {',
    ...rs.flatMap((r) => ms.map((m) => `  part[${r * MR + m}u * NSG + sid] = z_${r}_${m};`)),
    '}',
  ].join('\n  ');
  const rowsOut = [
    ...rs.flatMap((r) => ms.map((m) => `let z_${r}_${m} = subgroupAdd(a_${r}_${m});`)),
    'if (subgroupElect()) {',
    ...rs.map((r) => `  if (n0 + ${r}u < ${rowsEnd(o)}) { ${ms.map((m) => `${yAt(o, `${m}u`, `n0 + ${r}u`)} = z_${r}_${m}${o.hasBias ? ` + ${biasAt(o, `n0 + ${r}u`)}` : ''};`).join(' ')} }`),
    '}',
  ].join('\n  ');
  return { acc, ...loadCode(R, CW, hasScale, o.G, o.prefetch), fast: fast.join('\n      '), tail, reduce, rows_out: rowsOut };
}

/** The rows of X in loops over an array of accumulators whose bound the compiler cannot see (`p.one`):
 *  software adapters, where the unrolled form of many rows costs their compiler tens of seconds. */
function rolledCode(o: GemvShape, groups: Group[], xg: XLoad, hasScale: boolean): Record<string, string> {
  const { R, CW, epw } = o;
  const rs = [...Array(R).keys()];
  const loop = (body: string) => `for (var m = 0u; m < MR * p.one; m++) { ${body} }`;
  const fast: string[] = [];
  groups.forEach(([e0, g, expr], gi) => {
    for (const r of rs) fast.push(`let d_${r}_${gi} = ${expr(r)}${hasScale ? ` * s_${r}` : ''};`);
    fast.push(loop(`let xv = ${xg('m', e0, g)}; ${rs.map((r) => `a[${r}u * MR + m] += dot(d_${r}_${gi}, xv);`).join(' ')}`));
  });
  const tailWord = (r: number) => (CW > 1 ? `w_${r}[e / ${epw}u]` : `w_${r}`);
  const tail = [
    ...rs.map((r) => `let v_${r} = w_elem(${tailWord(r)}, e % ${epw}u)${hasScale ? ` * s_${r}` : ''};`),
    loop(`let xv = xe(m * p.K + k); ${rs.map((r) => `a[${r}u * MR + m] = fma(v_${r}, xv, a[${r}u * MR + m]);`).join(' ')}`),
  ].join('\n          ');
  const reduce = `for (var i = 0u; i < R * MR * p.one; i++) { let z = subgroupAdd(a[i]); if (subgroupElect()) { part[i * NSG + sid] = z; } }`;
  const rowsOut =
    `for (var i = 0u; i < R * MR * p.one; i++) { let z = subgroupAdd(a[i]); let n = n0 + i / MR; ` +
    `if (subgroupElect() && n < ${rowsEnd(o)}) { ${yAt(o, 'i % MR', 'n')} = z${o.hasBias ? ` + ${biasAt(o, 'n')}` : ''}; } }`;
  return { acc: 'var a: array<f32, R * MR>;', ...loadCode(R, CW, hasScale, o.G, o.prefetch), fast: fast.join('\n      '), tail, reduce, rows_out: rowsOut };
}

/** What one generated GEMV kernel is specialised for. */
export interface GemvShape {
  /** Rows of X. */
  MR: number;
  /** Rows of W per workgroup. */
  R: number;
  WG: number;
  NSG: number;
  /** u32 words per chunk (4 or 1). */
  CW: number;
  /** Elements per word. */
  epw: number;
  fmt: number | FloatW;
  xVec: boolean;
  hasBias: boolean;
  /** Scale the dequantized values (else each chunk's dot products, once). */
  preScale: boolean;
  /** Named accumulators, everything written out (else loops over MR, software adapters). */
  unroll: boolean;
  /** The block scales are f16 (int4). */
  f16Scales?: boolean;
  /** Entry point main_rows (each subgroup owns R rows): the fixed subgroup size. */
  sgRows?: number;
  /** Load each row's next chunk while computing this one (see {@link GemvSetting.prefetch}). */
  prefetch?: boolean;
  /** Quantized weights: elements per block where a row has several blocks (else 0: one scale per row). */
  G?: number;
  /** Benchmarks only: leave a stage out (see `gemvTuning.probe`). */
  probe?: 'no-x' | 'no-deq' | 'no-scale' | 'w-only';
  /** How int4 / int8 codes are decoded (see `gemvTuning.decode`; unset: `'shift'`). */
  decode?: 'mask' | 'shift';
  /** Several weights in one dispatch (2 or 3; unset: one), see {@link gemvParts}. */
  parts?: number;
  /** The scales are double-quantized codes, decoded where they are read (`scale_at`). */
  dq?: boolean;
}

/** One GEMV dispatch, planned but not encoded: the kernel, its bindings, workgroups and params (what
 *  `ctx.dispatch` takes). Benchmarks encode many of them in one timed pass. */
export interface GemvDispatch {
  kernel: Kernel;
  buffers: DeviceTensor['buffer'][];
  workgroups: [number, number, number];
  params: number[];
}

/** The layout, kernel shape and grid of a GEMV of N rows of `w` (all parts together) for M rows of x. */
function shapeFor(ctx: Context, x: DeviceTensor, w: GemvWeight, N: number, M: number, hasBias: boolean, sDtype: DeviceTensor['dtype'], parts?: number): { o: GemvShape; nc: number; nwg: number; sgRows: boolean } {
  const { K, wpr, epw } = w;
  const floatW = typeof w.fmt === 'string';
  const cls = gemvClass(M);
  const small = !floatW && cls === 'one' && gemvTuning.oneSmall && N * K < gemvTuning.oneSmall.below;
  const set = small ? gemvTuning.oneSmall!.set : (floatW ? gemvTuning.float : gemvTuning)[cls];
  let CW: number = set.chunkWords ?? 4;
  while (wpr % CW) CW /= 2;
  if (epw === 1 && CW < 2) CW = 2; // f32 weights: a chunk is a vec2f at least (K is even here)
  const nc = wpr / CW;
  const R = Math.min(set.rows, N);
  const WG = gemvThreads(ctx, nc, set.threads);
  const NSG = Math.ceil(WG / ctx.info.subgroupSizes.min);
  const xVec = x.dtype === 'f32' && K % 4 === 0;
  const unroll = gemvTuning.unroll ?? (!ctx.info.isSoftware || M * R <= 4);
  const preScale = M * R > 16 || !unroll;
  const { min: sgMin, max: sgMax } = ctx.info.subgroupSizes;
  const sgRows = set.subgroupRows && sgMin === sgMax && WG % sgMax === 0;
  const o: GemvShape = { MR: M, R, WG, NSG, CW, epw, fmt: w.fmt, ...(w.dq ? { dq: true } : {}), ...(!floatW && w.nb > 1 ? { G: w.G } : {}), xVec, hasBias, preScale, unroll, ...(sgRows ? { sgRows: sgMax } : {}), ...(set.prefetch ? { prefetch: true } : {}), ...(sDtype === 'f16' && !floatW && !w.dq ? { f16Scales: true } : {}), ...(gemvTuning.probe ? { probe: gemvTuning.probe } : {}), ...(!floatW && gemvTuning.decode === 'mask' ? { decode: 'mask' as const } : {}), ...(parts ? { parts } : {}) };
  const nwg = Math.ceil(N / (sgRows ? (R * WG) / sgMax : R));
  return { o, nc, nwg, sgRows };
}

/** Workgroups as [x, y, 1] within the 65535 limit per dimension, and x. */
function grid2(nwg: number): [number, number, number] {
  const gy = Math.ceil(nwg / 65535);
  return [Math.ceil(nwg / gy), gy, 1];
}

/** The kernel definition of a subgroup GEMV of shape `o` (one weight or parts): its WGSL, entry point, the params
 *  both forms share (then `more`, the parts' own) and the format constant of quantized weights. */
function gemvDef(name: string, o: GemvShape, sgRows: boolean, fmt: GemvWeight['fmt'], bindings: BindingSpec[], more: ParamSpec[] = []): KernelDef {
  return {
    name,
    code: quantPrelude() + gemvSource(o),
    entryPoint: sgRows ? 'main_rows' : 'main',
    bindings,
    params: ['u32:N', 'u32:K', 'u32:G', 'u32:nb', 'u32:nc', 'u32:gx', 'u32:one', ...more],
    constants: typeof fmt === 'string' ? undefined : { FMT: fmt as number },
    enables: ['subgroups'],
  };
}

/** Plan one subgroup GEMV: `y = x w^T (+ bias)` for x [M, K] (M <= 16), w described by `w`. */
function plan(ctx: Context, x: DeviceTensor, w: GemvWeight, bias: DeviceTensor | undefined, y: DeviceTensor, M: number): GemvDispatch {
  const { N, K } = w;
  const floatW = typeof w.fmt === 'string';
  const s = w.scales ?? x;
  const b = bias ?? x;
  const { o, nc, nwg, sgRows } = shapeFor(ctx, x, w, N, M, !!bias, s.dtype);
  const key = `dequant-gemv-sg:${x.dtype}:${w.data.dtype}:${s.dtype}:${b.dtype}:${JSON.stringify(o)}`;
  const kernel = cachedKernel(ctx, key, () =>
    gemvDef(floatW ? 'gemv16' : 'dequant-gemv-sg', o, sgRows, w.fmt, [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: s.dtype },
      { name: 'bias', access: 'read', dtype: b.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
      ...(w.dq ? [{ name: 'absmax2', access: 'read' as const, dtype: 'f32' as const }, { name: 'offset', access: 'read' as const, dtype: 'f32' as const }] : []),
    ]),
  );
  const workgroups = grid2(nwg);
  const dq = w.dq ? [w.dq.absmax2.buffer, w.dq.offset.buffer] : [];
  return { kernel, buffers: [x.buffer, w.data.buffer, s.buffer, b.buffer, y.buffer, ...dq], workgroups, params: [N, K, w.G, w.nb, nc, workgroups[0], 1] };
}

/** The weight side of a parts GEMV, as {@link planParts} takes it (`GemvWeight` of one part, with its bias). */
export interface GemvPartWeight extends GemvWeight {
  bias?: DeviceTensor;
}

/** Plan one GEMV over 2 or 3 weights of one format and row length (see `gemv-parts.ts`): y holds part j's
 *  [M, N_j] result at element yo[j] (yo[0] = 0). */
export function planParts(ctx: Context, x: DeviceTensor, ws: readonly GemvPartWeight[], y: DeviceTensor, yo: readonly number[], M: number): GemvDispatch {
  const P = ws.length;
  const w0 = ws[0]!;
  const N = ws.reduce((n, w) => n + w.N, 0);
  const floatW = typeof w0.fmt === 'string';
  const hasBias = !!w0.bias;
  const sDtype = w0.scales?.dtype ?? x.dtype;
  const { o, nc, sgRows } = shapeFor(ctx, x, { ...w0, N }, N, M, hasBias, sDtype, P);
  // units of R rows (workgroups, or subgroups of main_rows), part by part
  const units = ws.map((w) => Math.ceil(w.N / o.R));
  const U1 = units[0]!;
  const U2 = U1 + (units[1] ?? 0);
  const total = units.reduce((a, b) => a + b, 0);
  const nwg = sgRows ? Math.ceil(total / (o.WG / o.sgRows!)) : total;
  const bDtypes = hasBias ? ws.map((w) => w.bias!.dtype) : [];
  const key = `dequant-gemv-sg-parts:${x.dtype}:${w0.data.dtype}:${sDtype}:${bDtypes.join(',')}:${JSON.stringify(o)}`;
  const js = [...Array(P).keys()];
  const kernel = cachedKernel(ctx, key, () =>
    gemvDef(
      floatW ? 'gemv16-parts' : 'dequant-gemv-sg-parts',
      o,
      sgRows,
      w0.fmt,
      [
        { name: 'x', access: 'read', dtype: x.dtype },
        ...js.flatMap((j) => [
          { name: `q${j}`, access: 'read' as const, dtype: 'u32' as const },
          ...(floatW ? [] : [{ name: `s${j}`, access: 'read' as const, dtype: sDtype }]),
          ...(w0.dq ? [{ name: `absmax2_${j}`, access: 'read' as const, dtype: 'f32' as const }, { name: `offset_${j}`, access: 'read' as const, dtype: 'f32' as const }] : []),
        ]),
        ...bDtypes.map((d, j) => ({ name: `b${j}`, access: 'read' as const, dtype: d })),
        { name: 'y', access: 'rw', dtype: 'f32' },
      ],
      ['u32:N1', 'u32:N2', 'u32:U1', 'u32:U2', 'u32:yo1', 'u32:yo2'],
    ),
  );
  const workgroups = grid2(nwg);
  const buffers = [x.buffer, ...ws.flatMap((w) => (floatW ? [w.data.buffer] : [w.data.buffer, w.scales!.buffer, ...(w.dq ? [w.dq.absmax2.buffer, w.dq.offset.buffer] : [])])), ...(hasBias ? ws.map((w) => w.bias!.buffer) : []), y.buffer];
  return { kernel, buffers, workgroups, params: [w0.N, w0.K, w0.G, w0.nb, nc, workgroups[0], 1, ws[1]!.N, ws[2]?.N ?? 0, U1, U2, yo[1] ?? 0, yo[2] ?? 0] };
}

function launch(ctx: Context, x: DeviceTensor, w: GemvWeight, bias: DeviceTensor | undefined, y: DeviceTensor, M: number): void {
  const d = plan(ctx, x, w, bias, y, M);
  ctx.dispatch(d.kernel, d.buffers, d.workgroups, d.params);
}

/** The dispatch {@link quantGemvSg} would encode (benchmarks). */
export function quantGemvDispatch(ctx: Context, x: DeviceTensor, q: QuantTensor, y: DeviceTensor): GemvDispatch {
  return plan(ctx, x, quantWeight(q), undefined, y, rowsOf(x));
}

/** The dispatch {@link gemv16} would encode for a float weight with even K on an adapter with subgroups. */
export function gemv16Dispatch(ctx: Context, x: DeviceTensor, w: DeviceTensor, y: DeviceTensor): GemvDispatch {
  return plan(ctx, x, floatWeight(w), undefined, y, rowsOf(x));
}

/** The GEMV's view of a float weight [N, K] (f16 / bf16: two elements per u32 word; f32: one). */
export function floatWeight(w: DeviceTensor): GemvWeight & { fmt: FloatW } {
  const [N, K] = w.shape as [number, number];
  const epw = w.dtype === 'f32' ? 1 : 2;
  return { N, K, wpr: K / epw, epw, G: 1, nb: 1, fmt: w.dtype as FloatW, data: w };
}

const rowsOf = (x: DeviceTensor) => numel(x.shape) / x.shape[x.shape.length - 1]!;

/** The GEMV's view of a quantized weight: its codes and stored scales (double-quantized ones decoded in the kernel). */
export function quantWeight(q: QuantTensor): GemvWeight {
  const l = q.layout;
  const dq = q.spec.doubleQuant ? { dq: dqState(q) } : {};
  return { N: l.N, K: l.K, wpr: l.wpr, epw: l.epw, G: l.G, nb: l.nb, fmt: FMT_ID[q.spec.format], data: q.data, scales: q.scales, ...dq };
}

/** The subgroup GEMV of a quantized weight (double-quantized scales decoded where they are read). Used by
 *  `quantLinear`; x [M, K] with M <= 16, y f32 [M, N]. */
export function quantGemvSg(ctx: Context, x: DeviceTensor, q: QuantTensor, bias: DeviceTensor | undefined, y: DeviceTensor, M: number): void {
  launch(ctx, x, quantWeight(q), bias, y, M);
}

/** Options of {@link gemv16}. */
export interface Gemv16Options {
  bias?: DeviceTensor;
  /** Write into this f32 tensor of the result's shape. */
  out?: DeviceTensor;
}

/**
 * `y = x W^T (+ bias)` for a float weight W [N, K] (f16, bf16 or f32, HF layout `[out, in]`) and 1..16 rows
 * of x [..., K] (any float dtype): the decode-shape GEMV, reading W once, 16 bytes per load. The result is a new
 * f32 tensor [..., N]. Where the adapter has no subgroups, or K is odd (rows not whole u32 words), it runs
 * `matmul` instead.
 */
export function gemv16(ctx: Context, x: DeviceTensor, w: DeviceTensor, opts: Gemv16Options = {}): DeviceTensor {
  assertFloat(x, 'gemv16', 'x');
  if (w.dtype !== 'f16' && w.dtype !== 'bf16' && w.dtype !== 'f32') throw new ShapeError(`gemv16: weight must be f16, bf16 or f32, got ${w.dtype}`);
  if (w.shape.length !== 2) throw new ShapeError(`gemv16: weight ${fmtShape(w.shape)} must be 2-D [out, in]`);
  const [N, K] = w.shape as [number, number];
  if (x.shape.length < 1 || x.shape[x.shape.length - 1] !== K) throw new ShapeError(`gemv16: input ${fmtShape(x.shape)} does not end in in_features ${K} of weight ${fmtShape(w.shape)}`);
  const M = numel(x.shape) / K;
  if (M > GEMV_MAX_ROWS) throw new ShapeError(`gemv16: at most ${GEMV_MAX_ROWS} rows, got ${M} (input ${fmtShape(x.shape)})`);
  if (opts.bias) {
    assertFloat(opts.bias, 'gemv16', 'bias');
    if (numel(opts.bias.shape) !== N) throw new ShapeError(`gemv16: bias ${fmtShape(opts.bias.shape)} does not match out_features ${N}`);
  }
  const shape = [...x.shape.slice(0, -1), N];
  if (opts.out) checkOut(opts.out, shape, 'gemv16', 'f32', [x]);
  const y = opts.out ?? empty(ctx, shape);
  checkBinding(ctx, x, 'gemv16', 'x');
  checkBinding(ctx, w, 'gemv16', 'weight');
  checkBinding(ctx, y, 'gemv16', 'y');
  if (M === 0) return y;
  if (!gemvSubgroupsAvailable(ctx) || K % 2) {
    matmul(ctx, { ...x, shape: [M, K] }, w, { transB: true, bias: opts.bias, out: { ...y, shape: [M, N] } });
    return y;
  }
  launch(ctx, x, floatWeight(w), opts.bias, y, M);
  return y;
}
