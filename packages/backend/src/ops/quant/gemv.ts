/**
 * The decode-shape GEMV with subgroup reductions (`shaders/dequant-gemv-sg.wgsl`): `Y [M, N] = X [M, K] W^T`
 * for 1..16 rows, reading W's packed words once, 16 bytes per load, R rows of W per workgroup. It serves quantized
 * weights (`quantLinear`'s `gemv` variant on adapters with subgroups) and 16-bit float weights ({@link gemv16},
 * the honest f16 baseline of the same shape). Adapters without subgroups run the portable
 * `shaders/dequant-gemv.wgsl` for quantized weights and `matmul` for float ones. The WGSL is generated in
 * gemv-codegen.ts.
 */
import { sameShape } from '../../checks';
import type { Context, Kernel } from '../../context';
import { isFloat } from '../../dtype';
import { ShapeError } from '../../errors';
import type { BindingSpec, KernelDef, ParamSpec } from '../../kernel';
import { cachedKernel } from '../../kernel-cache';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { matmul } from '../core/matmul';
import { assertFloat, checkBinding, checkOut, fmtShape } from '../core/util';
import { FMT_ID, type QuantTensor } from './formats';
import { dqState, quantPrelude } from './quantize';
import { gemvSource, type GemvShape } from './gemv-codegen';
import type { GateActivation } from '../llm/gated';
import { quantRowsOnTensorCores } from './qmatmul-tc';
import { LIMB_GROUP, limbWords, xLimbsAvailable } from './x-limbs';

export { gemvSource, partBindings, type GemvShape } from './gemv-codegen';

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
  /** The layout of the integer int4 GEMV (one row of X as int8 limbs, {@link gemvTakesLimbs}; chunks of 2 or 4
   *  words), or null: never take limbs. */
  limbs: GemvSetting | null;
  /** How the integer int4 GEMV takes out the codes' offset 8 (see gemv-codegen.ts `limbsCode`). */
  limbsDecode: 'offset' | 'signed';
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
  limbs: { rows: 4, threads: 128, subgroupRows: false, chunkWords: 2 },
  limbsDecode: 'offset',
  manyFrom: 5,
  maxThreads: 128,
  decode: 'mask',
};

/** A copy of {@link gemvTuning} (its settings copied too), for saving and restoring it around a change. */
export function gemvTuningCopy(): typeof gemvTuning {
  const t = gemvTuning;
  const sets = (o: Record<GemvClass, GemvSetting>) => ({ one: { ...o.one }, few: { ...o.few }, many: { ...o.many } });
  return { ...t, ...sets(t), float: sets(t.float), limbs: t.limbs && { ...t.limbs }, ...(t.oneSmall ? { oneSmall: { below: t.oneSmall.below, set: { ...t.oneSmall.set } } } : {}) };
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

/** One GEMV dispatch, planned but not encoded: the kernel, its bindings, workgroups and params (what
 *  `ctx.dispatch` takes). Benchmarks encode many of them in one timed pass. */
export interface GemvDispatch {
  kernel: Kernel;
  buffers: DeviceTensor['buffer'][];
  workgroups: [number, number, number];
  params: number[];
}

/** The layout, kernel shape and grid of a GEMV of N rows of `w` (all parts together) for M rows of x. */
function shapeFor(ctx: Context, x: DeviceTensor, w: GemvWeight, N: number, M: number, hasBias: boolean, sDtype: DeviceTensor['dtype'], parts?: number, limbs = false): { o: GemvShape; nc: number; nwg: number; sgRows: boolean } {
  const { K, wpr, epw } = w;
  const floatW = typeof w.fmt === 'string';
  const cls = gemvClass(M);
  const small = !floatW && cls === 'one' && gemvTuning.oneSmall && N * K < gemvTuning.oneSmall.below;
  const set = limbs ? gemvTuning.limbs! : small ? gemvTuning.oneSmall!.set : (floatW ? gemvTuning.float : gemvTuning)[cls];
  let CW: number = set.chunkWords ?? 4;
  while (wpr % CW) CW /= 2;
  if (limbs) CW = Math.max(CW, 2); // wpr is even (K % 16 == 0)
  if (epw === 1 && CW < 2) CW = 2; // f32 weights: a chunk is a vec2f at least (K is even here)
  const nc = wpr / CW;
  const R = Math.min(set.rows, N);
  const WG = gemvThreads(ctx, nc, set.threads);
  const NSG = Math.ceil(WG / ctx.info.subgroupSizes.min);
  const xVec = !limbs && x.dtype === 'f32' && K % 4 === 0;
  const unroll = gemvTuning.unroll ?? (!ctx.info.isSoftware || M * R <= 4);
  const preScale = M * R > 16 || !unroll;
  const { min: sgMin, max: sgMax } = ctx.info.subgroupSizes;
  const sgRows = set.subgroupRows && sgMin === sgMax && WG % sgMax === 0;
  const o: GemvShape = { MR: M, R, WG, NSG, CW, epw, fmt: w.fmt, ...(w.dq ? { dq: true } : {}), ...(!floatW && w.nb > 1 ? { G: w.G } : {}), xVec, hasBias, preScale, unroll, ...(sgRows ? { sgRows: sgMax } : {}), ...(set.prefetch ? { prefetch: true } : {}), ...(sDtype === 'f16' && !floatW && !w.dq ? { f16Scales: true } : {}), ...(gemvTuning.probe ? { probe: gemvTuning.probe } : {}), ...(!floatW && gemvTuning.decode === 'mask' ? { decode: 'mask' as const } : {}), ...(parts ? { parts } : {}), ...(limbs ? { xLimbs: gemvTuning.limbsDecode } : {}) };
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

/** Plan one subgroup GEMV: `y = x w^T (+ bias)` for x [M, K] (M <= 16), w described by `w`; with `gate`, x is
 *  `act(x) * up` (see {@link gemvGated}). */
function plan(ctx: Context, x: DeviceTensor, w: GemvWeight, bias: DeviceTensor | undefined, y: DeviceTensor, M: number, gate?: GemvGate, limbs?: DeviceTensor): GemvDispatch {
  const { N } = w;
  const floatW = typeof w.fmt === 'string';
  const s = w.scales ?? x;
  const b = bias ?? x;
  if (limbs) x = limbs; // the limbs go in x's binding
  const shape = shapeFor(ctx, x, w, N, M, !!bias, s.dtype, undefined, !!limbs);
  const { nc, nwg, sgRows } = shape;
  const o: GemvShape = gate ? { ...shape.o, gated: { act: gate.act, binding: w.dq ? 8 : 6 } } : shape.o;
  const key = `dequant-gemv-sg:${x.dtype}:${w.data.dtype}:${s.dtype}:${b.dtype}:${JSON.stringify(o)}`;
  const kernel = cachedKernel(ctx, key, () =>
    gemvDef(floatW ? 'gemv16' : 'dequant-gemv-sg', o, sgRows, w.fmt, [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'q', access: 'read', dtype: 'u32' },
      { name: 's', access: 'read', dtype: s.dtype },
      { name: 'bias', access: 'read', dtype: b.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
      ...(w.dq ? [{ name: 'absmax2', access: 'read' as const, dtype: 'f32' as const }, { name: 'offset', access: 'read' as const, dtype: 'f32' as const }] : []),
      ...(gate ? [{ name: 'xu', access: 'read' as const, dtype: 'f32' as const }] : []),
    ]),
  );
  const workgroups = grid2(nwg);
  const dq = w.dq ? [w.dq.absmax2.buffer, w.dq.offset.buffer] : [];
  const up = gate ? [gate.up.buffer] : [];
  return { kernel, buffers: [x.buffer, w.data.buffer, s.buffer, b.buffer, y.buffer, ...dq, ...up], workgroups, params: [N, w.K, w.G, w.nb, nc, workgroups[0], 1] };
}

/** The gated input of {@link gemvGated}: x = act(gate) * up, elementwise. */
export interface GemvGate {
  up: DeviceTensor;
  act: GateActivation;
}

/**
 * `y = (act(gate) * up) W^T (+ bias)`: a gated MLP's activation and its down projection in one subgroup GEMV
 * (`act` from shaders/act-*.wgsl, the gated kernels' own, so each x element is the value `swiglu` /
 * `geluTanhGate` would write). gate and up f32 [..., K] with 1..16 rows; W quantized or a float matrix [N, K]
 * (f16, bf16, f32). Returns the f32 result [..., N], or null where the GEMV cannot take it (no subgroups, an odd
 * K for a float weight, 16-bit inputs, more rows than the GEMV takes, or quantized rows that `quantLinear` runs on
 * tensor cores): then the caller runs the activation and the product.
 */
export function gemvGated(ctx: Context, gate: DeviceTensor, up: GemvGate['up'], act: GateActivation, w: QuantTensor | DeviceTensor, opts: { bias?: DeviceTensor } = {}): DeviceTensor | null {
  const quant = 'spec' in w;
  const gw = quant ? quantWeight(w) : floatWeight(w);
  const K = gate.shape[gate.shape.length - 1];
  const M = numel(gate.shape) / (K || 1);
  if (!gemvSubgroupsAvailable(ctx) || gate.dtype !== 'f32' || up.dtype !== 'f32' || K !== gw.K || !sameShape(gate.shape, up.shape)) return null;
  if (!(M >= 1 && M <= GEMV_MAX_ROWS) || (quant && quantRowsOnTensorCores(ctx, M)) || (!quant && (w.shape.length !== 2 || gw.K % 2))) return null;
  if (!quant && w.dtype !== 'f16' && w.dtype !== 'bf16' && w.dtype !== 'f32') return null;
  if (opts.bias && (numel(opts.bias.shape) !== gw.N || !isFloat(opts.bias.dtype))) return null;
  for (const [t, n] of [[gate, 'gate'], [up, 'up'], [gw.data, 'weight']] as const) checkBinding(ctx, t, 'gemvGated', n);
  const y = empty(ctx, [...gate.shape.slice(0, -1), gw.N]);
  const d = plan(ctx, gate, gw, opts.bias, y, M, { up, act });
  ctx.dispatch(d.kernel, d.buffers, d.workgroups, d.params);
  return y;
}

/** The weight side of a parts GEMV, as {@link planParts} takes it (`GemvWeight` of one part, with its bias). */
export interface GemvPartWeight extends GemvWeight {
  bias?: DeviceTensor;
}

/** Plan one GEMV over 2 or 3 weights of one format and row length (see `gemv-parts.ts`): y holds part j's
 *  [M, N_j] result at element yo[j] (yo[0] = 0). */
export function planParts(ctx: Context, x: DeviceTensor, ws: readonly GemvPartWeight[], y: DeviceTensor, yo: readonly number[], M: number, limbs?: DeviceTensor): GemvDispatch {
  const P = ws.length;
  const w0 = ws[0]!;
  const N = ws.reduce((n, w) => n + w.N, 0);
  const floatW = typeof w0.fmt === 'string';
  const hasBias = !!w0.bias;
  const sDtype = w0.scales?.dtype ?? x.dtype;
  if (limbs) x = limbs; // the limbs go in x's binding
  const { o, nc, sgRows } = shapeFor(ctx, x, { ...w0, N }, N, M, hasBias, sDtype, P, !!limbs);
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

function launch(ctx: Context, x: DeviceTensor, w: GemvWeight, bias: DeviceTensor | undefined, y: DeviceTensor, M: number, limbs?: DeviceTensor): void {
  const d = plan(ctx, x, w, bias, y, M, undefined, limbs);
  ctx.dispatch(d.kernel, d.buffers, d.workgroups, d.params);
}

/** The dispatch {@link quantGemvSg} would encode (benchmarks); with `limbs` (X's limbs, where
 *  {@link gemvTakesLimbs}), the integer int4 GEMV. */
export function quantGemvDispatch(ctx: Context, x: DeviceTensor, q: QuantTensor, y: DeviceTensor, limbs?: DeviceTensor): GemvDispatch {
  return plan(ctx, x, quantWeight(q), undefined, y, rowsOf(x), undefined, limbs);
}

/**
 * Whether the subgroup GEMV multiplies M rows of X by `q` on X's int8 limbs (`xLimbs`, `rmsNorm`'s `limbs`) when
 * given them: one row, int4 codes, K a multiple of 16, `packed_4x8_integer_dot_product`, and a
 * `gemvTuning.limbs` layout. The result is that of the float GEMV up to X's rounding to its limbs (24 bits
 * relative to each group of 16's largest element) and f32 rounding.
 */
export function gemvTakesLimbs(ctx: Context, q: QuantTensor, M: number): boolean {
  return M === 1 && q.spec.format === 'int4' && q.layout.K % LIMB_GROUP === 0 && !!gemvTuning.limbs && gemvSubgroupsAvailable(ctx) && xLimbsAvailable(ctx) && !quantRowsOnTensorCores(ctx, M);
}

/** Check X's limbs against the K of a weight (one row). */
export function checkLimbs(limbs: DeviceTensor, K: number, op: string): void {
  if (limbs.dtype !== 'u32' || numel(limbs.shape) !== limbWords(K)) throw new ShapeError(`${op}: xLimbs ${fmtShape(limbs.shape)} (${limbs.dtype}) are not one row of ${K} elements as limbs (u32 [${limbWords(K)}])`);
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
export function quantGemvSg(ctx: Context, x: DeviceTensor, q: QuantTensor, bias: DeviceTensor | undefined, y: DeviceTensor, M: number, limbs?: DeviceTensor): void {
  launch(ctx, x, quantWeight(q), bias, y, M, limbs);
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
