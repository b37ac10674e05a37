import { addRmsNorm as addRmsNormKernel, cast, ConfigError, empty, formatOf, rmsNorm as rmsNormKernel, storageBytes, type Context, type DeviceTensor, type DType } from '@rusty/backend';
import { addRmsNorm, computeDtype, embedding, isGradEnabled, linear, rmsNorm, Tensor } from '@rusty/autograd';
import { Module } from './module';

export interface InitOptions {
  /** Storage dtype of the weights (f32 trains; f16/bf16 for frozen weights). */
  dtype?: DType;
  /** Std of the normal init (HF `initializer_range`). */
  std?: number;
  seed?: number;
  requiresGrad?: boolean;
  /** Allocate without initialising (weights about to be loaded); `'placeholder'`: a 4-byte buffer standing in
   *  for each weight, which must be assigned before use (a loader that replaces the weights, or assigns every one,
   *  need not hold a copy of the model's size while it streams them in). */
  empty?: boolean | 'placeholder';
}

function param(ctx: Context, shape: number[], o: InitOptions, kind: 'randn' | 'zeros' | 'ones'): Tensor {
  const opts = { dtype: o.dtype, requiresGrad: o.requiresGrad ?? true };
  if (o.empty === 'placeholder') return new Tensor(ctx, { buffer: ctx.alloc(4), dtype: o.dtype ?? 'f32', shape }, opts.requiresGrad);
  if (o.empty) return new Tensor(ctx, empty(ctx, shape, o.dtype ?? 'f32'), opts.requiresGrad);
  if (kind === 'zeros') return Tensor.zeros(ctx, shape, opts);
  if (kind === 'ones') return Tensor.ones(ctx, shape, opts);
  return Tensor.randn(ctx, shape, { ...opts, std: o.std ?? 0.02, seed: o.seed });
}

/** `y = x W^T + b` with HF's weight layout [out, in]. */
export class Linear extends Module {
  weight: Tensor;
  bias: Tensor | null;
  constructor(
    ctx: Context,
    readonly inFeatures: number,
    readonly outFeatures: number,
    opts: InitOptions & { bias?: boolean } = {},
  ) {
    super(ctx);
    this.weight = this.registerParameter('weight', param(ctx, [outFeatures, inFeatures], opts, 'randn'));
    this.bias = opts.bias ? this.registerParameter('bias', param(ctx, [outFeatures], opts, 'zeros')) : null;
  }

  forward(x: Tensor): Tensor {
    return linear(x, this.weight, this.bias);
  }

  /** Whether this layer's backward, for a forward run now, reads the gradient of its output only rounded to f16
   *  (then its producer may write it in f16, the same values bit for bit): under f16 compute, unless a trainable
   *  bias sums it in f32. */
  gradInF16(): boolean {
    return computeDtype() === 'f16' && !this.bias?.requiresGrad;
  }
}

/** Token embeddings [vocab, dim]; the `paddingIdx` row (HF: `pad_token_id`) gets no gradient from lookups. */
export class Embedding extends Module {
  weight: Tensor;
  constructor(
    ctx: Context,
    readonly num: number,
    readonly dim: number,
    opts: InitOptions = {},
    readonly paddingIdx: number | null = null,
  ) {
    super(ctx);
    this.weight = this.registerParameter('weight', param(ctx, [num, dim], opts, 'randn'));
  }

  /** The table's bytes while it waits on the host ({@link offloadToHost}), else null. */
  private hostTable: Uint8Array | null = null;

  /**
   * Rows of the table for `ids` (f32 [...ids.shape, dim]). While the table is on the host (`offloadToHost`):
   * with `hostIds` (the same ids, on the host) the rows are gathered there and only they are uploaded, then
   * decoded to f32 on the GPU (`cast`: the decode the lookup kernel does); without them the table is uploaded for
   * this lookup and released after it. Either way the values of the lookup on the GPU table, bit for bit (an id
   * outside [0, num) a row of zeros).
   */
  forward(ids: Tensor, hostIds?: ArrayLike<number>): Tensor {
    const host = this.hostTable;
    if (!host) return embedding(ids, this.weight, { paddingIdx: this.paddingIdx });
    const { ctx } = this;
    const dtype = this.weight.dtype;
    if (hostIds && hostIds.length === ids.size) {
      const rb = (formatOf(dtype).bits / 8) * this.dim; // a row's bytes (16-bit rows of an odd width end mid-word)
      const rows = new Uint8Array(hostIds.length * rb);
      for (let t = 0; t < hostIds.length; t++) {
        const id = hostIds[t]!;
        if (id >= 0 && id < this.num) rows.set(host.subarray(id * rb, (id + 1) * rb), t * rb);
      }
      const r = empty(ctx, [...ids.shape, this.dim], dtype);
      ctx.write(r.buffer, rows);
      const out = dtype === 'f32' ? r : cast(ctx, r, 'f32');
      if (out !== r) ctx.release(r.buffer);
      return new Tensor(ctx, out, false);
    }
    const w = new Tensor(ctx, empty(ctx, [this.num, this.dim], dtype), false);
    ctx.write(w.data.buffer, host);
    const out = embedding(ids, w, { paddingIdx: this.paddingIdx });
    w.dispose();
    return out;
  }

  /**
   * Keep the frozen table in host memory instead of on the GPU until the returned function puts it back (the same
   * bytes, in a new GPU buffer): a LoRA run reads the token embedding once per forward, for a few thousand rows.
   * Meanwhile the parameter holds a 4-byte stand-in (nothing but {@link forward} may read it). A trainable table
   * stays: `ConfigError`.
   */
  async offloadToHost(): Promise<() => void> {
    const { ctx, weight } = this;
    if (weight.requiresGrad) throw new ConfigError('Embedding.offloadToHost: the table trains; only a frozen one can wait on the host');
    if (this.hostTable) return () => {};
    const bytes = storageBytes(weight.dtype, weight.size);
    const host = new Uint8Array(await ctx.read(weight.data.buffer, bytes), 0, bytes);
    const dtype = weight.dtype;
    weight.assign({ buffer: ctx.alloc(4), dtype, shape: [...weight.shape] });
    this.hostTable = host;
    return () => {
      if (this.hostTable !== host) return;
      const t = empty(ctx, [this.num, this.dim], dtype);
      ctx.write(t.buffer, host);
      weight.assign(t);
      this.hostTable = null;
    };
  }
}

/**
 * RMSNorm over the last dimension, computed in f32: x * rsqrt(mean(x^2) + eps) * (weightOffset + w). HF
 * LlamaRMSNorm has offset 0 (weight initialised to ones); Gemma's has offset 1 (weight initialised to zeros).
 */
export class RMSNorm extends Module {
  weight: Tensor;
  constructor(
    ctx: Context,
    readonly dim: number,
    readonly eps: number,
    opts: InitOptions = {},
    readonly weightOffset = 0,
  ) {
    super(ctx);
    this.weight = this.registerParameter('weight', param(ctx, [dim], opts, weightOffset ? 'zeros' : 'ones'));
  }

  forward(x: Tensor): Tensor {
    return rmsNorm(x, this.weight, this.eps, { weightOffset: this.weightOffset });
  }

  /** Fused residual add: returns [x + residual, rmsnorm(x + residual)]. */
  forwardResidual(x: Tensor, residual: Tensor): [Tensor, Tensor] {
    return addRmsNorm(x, residual, this.weight, this.eps, { weightOffset: this.weightOffset });
  }

  /**
   * Where no gradient is recorded (a decoding step): [rmsnorm(x), its int8 limbs] (`rmsNorm`'s `limbs`, the input
   * of the integer int4 GEMV), or with `residual`, [rmsnorm(x + residual), its limbs, x + residual]; the norm's
   * values are {@link forward}'s / {@link forwardResidual}'s to f32 rounding (the sum of squares is added on more
   * threads), the sum bit for bit. x f32 with a last dimension that is a multiple of 16.
   */
  forwardLimbs(x: Tensor): [Tensor, Tensor];
  forwardLimbs(x: Tensor, residual: Tensor): [Tensor, Tensor, Tensor];
  forwardLimbs(x: Tensor, residual?: Tensor): [Tensor, Tensor] | [Tensor, Tensor, Tensor] {
    if (isGradEnabled()) throw new ConfigError('RMSNorm.forwardLimbs: only where no gradient is recorded');
    const opts = { eps: this.eps, weightOffset: this.weightOffset, limbs: true };
    const t = (d: DeviceTensor) => new Tensor(x.ctx, d);
    if (residual) {
      const r = addRmsNormKernel(x.ctx, x.data, residual.data, this.weight.data, opts);
      x.ctx.release(r.rstd.buffer);
      return [t(r.y), t(r.limbs!), t(r.sum)];
    }
    const r = rmsNormKernel(x.ctx, x.data, this.weight.data, opts);
    x.ctx.release(r.rstd.buffer);
    return [t(r.y), t(r.limbs!)];
  }
}
