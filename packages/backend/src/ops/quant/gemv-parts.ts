/**
 * Several decode-shape GEMVs of one input in one dispatch: `y_j = x W_j^T (+ b_j)` for 2 or 3 weights of one
 * storage format and row length (a layer's q, k and v projections, or its gate and up projections). The kernel
 * is the subgroup GEMV of `gemv.ts` over the weights' rows taken as one matrix, each weight in its own bindings:
 * nothing is copied, one dispatch replaces two or three, and the GPU streams the rows of all of them in one pass
 * (a longer matrix reads nearer copy speed: docs/PERFORMANCE.md).
 */
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { numel, type DeviceTensor } from '../../tensor';
import { assertFloat, checkBinding, fmtShape } from '../core/util';
import type { QuantTensor } from './formats';
import { quantRowsOnTensorCores } from './qmatmul-tc';
import { checkLimbs, floatWeight, gemvSubgroupsAvailable, gemvTakesLimbs, GEMV_MAX_ROWS, partBindings, planParts, quantWeight, type GemvPartWeight } from './gemv';

/** One weight of {@link gemvParts}: quantized (`QuantTensor`) or a float matrix [N, K] (f16, bf16 or f32, HF
 *  Linear layout), with an optional bias [N]. */
export interface GemvPart {
  weight: QuantTensor | DeviceTensor;
  bias?: DeviceTensor;
}

const isQuant = (w: QuantTensor | DeviceTensor): w is QuantTensor => 'spec' in w;

/** `[N, K]` of a part's weight. */
function dims(w: QuantTensor | DeviceTensor): [number, number] {
  return isQuant(w) ? [w.layout.N, w.layout.K] : [w.shape[0]!, w.shape[1]!];
}

/**
 * Why {@link gemvParts} cannot run `parts` for `x` on this context, or null where it can: it needs subgroups,
 * 2 or 3 weights of one storage (the same quantized spec, or all f16, bf16 or f32 with an even row length), one
 * row length K that x ends in, 1..16 rows of x, biases on all parts or none, and enough storage bindings.
 */
export function gemvPartsProblem(ctx: Context, x: DeviceTensor, parts: readonly GemvPart[]): string | null {
  if (!gemvSubgroupsAvailable(ctx)) return 'the adapter has no subgroups';
  if (parts.length < 2 || parts.length > 3) return `2 or 3 weights, got ${parts.length}`;
  const w0 = parts[0]!.weight;
  const K = dims(w0)[1];
  if (x.shape[x.shape.length - 1] !== K) return `input ${fmtShape(x.shape)} does not end in in_features ${K}`;
  const M = numel(x.shape) / K;
  if (!(M >= 1 && M <= GEMV_MAX_ROWS)) return `1..${GEMV_MAX_ROWS} rows of input, got ${M}`;
  for (const { weight: w } of parts) {
    if (isQuant(w) !== isQuant(w0)) return 'quantized and float weights mixed';
    if (dims(w)[1] !== K) return 'weights of different in_features';
    if (isQuant(w)) {
      const a = w.spec;
      const b = (w0 as QuantTensor).spec;
      if (a.format !== b.format || a.groupSize !== b.groupSize || a.doubleQuant !== b.doubleQuant) return 'weights of different quantizations';
    } else {
      if (w.shape.length !== 2) return `weight ${fmtShape(w.shape)} is not 2-D`;
      if (w.dtype !== 'f16' && w.dtype !== 'bf16' && w.dtype !== 'f32') return `weight dtype ${w.dtype} (the GEMV reads f16, bf16 or f32)`;
      if (w.dtype !== (w0 as DeviceTensor).dtype) return 'weights of different dtypes';
      if (K % 2) return `odd in_features ${K}`;
    }
  }
  const hasBias = !!parts[0]!.bias;
  if (parts.some((p) => !!p.bias !== hasBias)) return 'biases on some weights only';
  const need = partBindings(parts.length, isQuant(w0), hasBias, isQuant(w0) && w0.spec.doubleQuant).y;
  const max = ctx.info.limits.maxStorageBuffersPerShaderStage ?? 8;
  if (need > max) return `${need} storage buffers per stage, the device allows ${max}`;
  return null;
}

/** Where each part's [M, N_j] result starts in the one result buffer (elements; binding-aligned, so that each
 *  result can be a sub-buffer), and the buffer's length in elements. */
export function partOffsets(ctx: Context, Ns: readonly number[], M: number): { yo: number[]; end: number } {
  const align = ctx.bindingAlignment / 4;
  const yo: number[] = [];
  let end = 0;
  for (const N of Ns) {
    const at = Math.ceil(end / align) * align;
    yo.push(at);
    end = at + M * N;
  }
  return { yo, end };
}

/**
 * `y_j = x W_j^T (+ b_j)` for each part j, in one dispatch: x [..., K] (1..16 rows, any float dtype). Returns
 * one f32 tensor [..., N_j] per part, each a sub-buffer of one buffer (release each as usual). The same
 * arithmetic as `quantLinear` / `gemv16` of each weight alone, up to f32 rounding (the kernel layout is picked
 * for the rows of all parts together). Throws a ShapeError where {@link gemvPartsProblem} names a problem.
 */
export function gemvParts(ctx: Context, x: DeviceTensor, parts: readonly GemvPart[], opts: GemvPartsOptions = {}): DeviceTensor[] {
  assertFloat(x, 'gemvParts', 'x');
  const why = gemvPartsProblem(ctx, x, parts);
  if (why) throw new ShapeError(`gemvParts: ${why}`);
  return encodeParts(ctx, x, parts, opts);
}

/** Options of {@link gemvParts} and {@link tryGemvParts}. */
export interface GemvPartsOptions {
  /** x as int8 limbs (`xLimbs`, or `rmsNorm`'s `limbs`): the GEMV multiplies on them where it takes them
   *  (`gemvTakesLimbs`: one row, int4 weights), and reads x elsewhere. */
  xLimbs?: DeviceTensor;
}

/** {@link gemvParts}, or null (nothing encoded) where {@link gemvPartsProblem} names a problem or where the
 *  weights are quantized and `quantLinear` runs these rows on tensor cores (`quantRowsOnTensorCores`: at 16 rows
 *  2.6-4.6x the GEMV on an H100, far more than one dispatch instead of two or three saves). For callers that fall
 *  back to one product per weight, with the check made once. */
export function tryGemvParts(ctx: Context, x: DeviceTensor, parts: readonly GemvPart[], opts: GemvPartsOptions = {}): DeviceTensor[] | null {
  assertFloat(x, 'gemvParts', 'x');
  if (gemvPartsProblem(ctx, x, parts)) return null;
  const rows = numel(x.shape) / x.shape[x.shape.length - 1]!;
  if (isQuant(parts[0]!.weight) && quantRowsOnTensorCores(ctx, rows)) return null;
  return encodeParts(ctx, x, parts, opts);
}

function encodeParts(ctx: Context, x: DeviceTensor, parts: readonly GemvPart[], opts: GemvPartsOptions): DeviceTensor[] {
  checkBinding(ctx, x, 'gemvParts', 'x');
  const K = x.shape[x.shape.length - 1]!;
  const M = numel(x.shape) / K;
  const w0 = parts[0]!.weight;
  const limbs = opts.xLimbs && isQuant(w0) && gemvTakesLimbs(ctx, w0, M) ? opts.xLimbs : undefined;
  if (limbs) checkLimbs(limbs, K, 'gemvParts');
  const ws: GemvPartWeight[] = parts.map(({ weight: w, bias }) => {
    if (bias && numel(bias.shape) !== dims(w)[0]) throw new ShapeError(`gemvParts: bias ${fmtShape(bias.shape)} does not match out_features ${dims(w)[0]}`);
    if (bias) assertFloat(bias, 'gemvParts', 'bias');
    if (!isQuant(w)) {
      checkBinding(ctx, w, 'gemvParts', 'weight');
      return { ...floatWeight(w), bias };
    }
    return { ...quantWeight(w), bias };
  });
  const { yo, end } = partOffsets(ctx, ws.map((w) => w.N), M);
  const arena = ctx.alloc(4 * end);
  const d = planParts(ctx, x, ws, { buffer: arena, dtype: 'f32', shape: [end] }, yo, M, limbs);
  ctx.dispatch(d.kernel, d.buffers, d.workgroups, d.params);
  const lead = x.shape.slice(0, -1);
  const out = ws.map((w, j): DeviceTensor => ({ buffer: ctx.subBuffer(arena, 4 * yo[j]!, 4 * M * w.N), dtype: 'f32', shape: [...lead, w.N] }));
  ctx.release(arena);
  return out;
}
