import { abs, cast, ConfigError, empty, isFloat, isHalf, prepareF16Images, reduce, releaseF16Images, storageBytes, type DeviceTensor, type DType, type SubBuffer } from '@rusty/backend';
import { noGrad, type ComputeDtype, type Tensor } from '@rusty/autograd';

/** 16-bit storage formats for frozen weights. */
export type HalfDType = 'f16' | 'bf16';

/** Anything with named parameters (a `Module`). */
export interface HasNamedParameters {
  namedParameters(): Iterable<[string, Tensor]>;
}

/** What `castFrozenParameters` did. */
export interface CastReport {
  /** Names of the parameters now stored in 16 bits. */
  cast: string[];
  /** Storage bytes the cast freed (the pool's size classes may round the live figure). */
  bytesSaved: number;
}

/**
 * Mixed precision for fine-tuning: store every frozen (`requiresGrad === false`) f32 parameter in 16-bit `dtype`
 * (f16 or bf16, round-to-nearest-even on the GPU), halving the memory of the base weights, while the trainable
 * parameters stay f32 master weights that the optimizer updates; with `dtype` f16, frozen bf16 parameters (a
 * bf16 checkpoint) become f16 too, the format the f16 products read without a cast (values beyond f16's range
 * become infinite: {@link checkF16Range} names them). The kernels read 16-bit weights directly (matmul,
 * embedding, RMSNorm). Parameters matching `skip` keep their dtype.
 */
export function castFrozenParameters(model: HasNamedParameters, dtype: HalfDType, opts: { skip?: (name: string) => boolean } = {}): CastReport {
  if (!isHalf(dtype)) throw new ConfigError(`castFrozenParameters: dtype must be 'f16' or 'bf16', got '${dtype}'`);
  const seen = new Set<Tensor>();
  const report: CastReport = { cast: [], bytesSaved: 0 };
  noGrad(() => {
    for (const [name, p] of model.namedParameters()) {
      if (seen.has(p)) continue;
      seen.add(p);
      const from = p.dtype === 'f32' || (p.dtype === 'bf16' && dtype === 'f16');
      if (p.requiresGrad || !from || opts.skip?.(name)) continue;
      const before = storageBytes(p.dtype, p.size);
      p.assign(cast(p.ctx, p.data, dtype));
      report.cast.push(name);
      report.bytesSaved += before - storageBytes(dtype as DType, p.size);
    }
  });
  return report;
}

/** The largest finite f16 value. */
export const F16_MAX = 65504;

/** Elements per piece of the range check: a larger parameter is read in pieces (sub-buffers of its buffer), so
 *  the check's transient |x| stays at 32 MiB of f32 (the |x| of a whole 32000 x 2048 embedding was 250 MiB, which
 *  the buffer pool then kept, unused, for the whole run). */
const RANGE_PIECE = 8 * 2 ** 20;

/**
 * The range check of f16 compute: every float parameter's largest magnitude (one reduction per tensor, or per
 * piece of {@link RANGE_PIECE} elements, on the GPU, one read-back), and a `ConfigError` naming each parameter whose values are beyond f16's range (|x| >
 * 65504, or infinite: a bf16 checkpoint loaded as f16 turns such values into infinities). Under f16 compute the
 * projections round their weights to f16, so such a weight would turn into infinities there.
 */
export async function checkF16Range(model: HasNamedParameters): Promise<void> {
  const list: [string, Tensor][] = [];
  const seen = new Set<Tensor>();
  for (const [name, p] of model.namedParameters()) {
    if (seen.has(p) || !isFloat(p.dtype) || p.size === 0) continue;
    seen.add(p);
    list.push([name, p]);
  }
  if (!list.length) return;
  const ctx = list[0]![1].ctx;
  // pieces of at most RANGE_PIECE elements (sub-buffers of a large weight's buffer): [parameter index, view]
  const pieces: [number, DeviceTensor][] = [];
  list.forEach(([, p], i) => {
    if (p.size <= RANGE_PIECE || (p.data.buffer as SubBuffer).root) return void pieces.push([i, { ...p.data, shape: [p.size] }]);
    for (let e = 0; e < p.size; e += RANGE_PIECE) {
      const n = Math.min(RANGE_PIECE, p.size - e);
      const bytes = Math.ceil(storageBytes(p.dtype, n) / 4) * 4;
      pieces.push([i, { ...p.data, buffer: ctx.subBuffer(p.data.buffer, storageBytes(p.dtype, e), bytes), shape: [n] }]);
    }
  });
  const maxima = empty(ctx, [pieces.length]);
  try {
    pieces.forEach(([, v], k) => {
      const a = abs(ctx, v);
      const m = reduce(ctx, 'max', a, 0);
      ctx.copy(m.buffer, maxima.buffer, 4, 0, 4 * k);
      ctx.release(a.buffer);
      ctx.release(m.buffer);
    });
    const perPiece = new Float32Array(await ctx.read(maxima.buffer, 4 * pieces.length));
    const got = new Float32Array(list.length);
    pieces.forEach(([i], k) => (got[i] = Math.max(got[i]!, perPiece[k]!)));
    const bad = list.flatMap(([name], i) => (got[i]! > F16_MAX ? [`'${name}' (max |x| ${got[i]!.toPrecision(4)})`] : []));
    if (bad.length)
      throw new ConfigError(
        `mixed precision: f16 compute needs every weight within f16's range (|x| <= ${F16_MAX}); beyond it: ` +
          `${bad.slice(0, 3).join(', ')}${bad.length > 3 ? ` and ${bad.length - 3} more` : ''}: ` +
          `train with f32 compute (mixedPrecision { dtype, compute: 'f32' }; rusty finetune --mixed-precision no)`,
      );
  } finally {
    ctx.release(maxima.buffer);
    for (const [i, v] of pieces) if (v.buffer !== list[i]![1].data.buffer) ctx.release(v.buffer);
  }
}

/** A model that names the parameters its readers round to f16 under f16 compute (`CausalLM`). */
export interface HasF16Operands {
  f16OperandParameters(scope: ComputeDtype | null): Iterable<[string, Tensor]>;
}

/**
 * For a run that computes in f16 (`compute`): store the model's frozen bf16 parameters that every reader rounds to
 * f16 (`f16OperandParameters`: the LM head) in f16, cast once on the GPU by the kernel that rounded them per product
 * (the fused loss made a 125 MiB f16 copy of a 1.1B model's head every step), so that their readers get the same
 * values bit for bit and the copy is gone from the step's peak. Their bf16 bytes wait on the host; the returned
 * function writes them back (exactly the stored values, for whatever reads the weights after the run: a merge, a
 * save, f32 compute). The released bf16 buffers go to the pool (`ctx.trimPool()` destroys them). A model without
 * `f16OperandParameters`, or f32 compute: nothing to do.
 */
export async function f16OperandsForRun(model: object, compute: ComputeDtype | null): Promise<() => void> {
  const m = model as Partial<HasF16Operands>;
  const none = () => {};
  if (compute !== 'f16' || typeof m.f16OperandParameters !== 'function') return none;
  const list = [...m.f16OperandParameters(compute)].filter(([, p]) => !p.requiresGrad && p.dtype === 'bf16');
  if (!list.length) return none;
  const ctx = list[0]![1].ctx;
  const kept: [Tensor, ArrayBuffer][] = [];
  for (const [, p] of list) {
    kept.push([p, await ctx.read(p.data.buffer, storageBytes(p.dtype, p.size))]);
    noGrad(() => p.assign(cast(ctx, p.data, 'f16')));
  }
  return () => {
    for (const [p, bytes] of kept) {
      const t = empty(ctx, p.shape, 'bf16');
      ctx.write(t.buffer, new Uint8Array(bytes));
      p.assign(t);
    }
    kept.length = 0;
  };
}

/** A model that lists the weights its products read as B operands (`CausalLM`). */
export interface HasLinearWeights {
  linearWeights(): Tensor[];
}

/**
 * For a run that computes in f32: the f16 images of the model's frozen f32 product weights (a 16-bit checkpoint
 * loaded in f32, under LoRA), so that their products run exactly on tensor cores where the adapter has them
 * (`prepareF16Images`: weights whose values f16 cannot hold keep the portable kernels; 2 bytes per element more
 * during the run). The returned function releases the images. f16 compute, or a model without `linearWeights`:
 * nothing to do.
 */
export async function f16ImagesForRun(model: object, compute: ComputeDtype | null): Promise<() => void> {
  const m = model as Partial<HasLinearWeights>;
  if (compute === 'f16' || typeof m.linearWeights !== 'function') return () => {};
  const list = m.linearWeights().filter((p) => !p.requiresGrad && p.dtype === 'f32' && p.rank === 2);
  if (!list.length) return () => {};
  const ctx = list[0]!.ctx;
  await prepareF16Images(ctx, list.map((p) => p.data));
  return () => releaseF16Images(ctx);
}
