import { empty, type Context, type DType } from '@rusty/backend';
import { addRmsNorm, computeDtype, embedding, linear, rmsNorm, Tensor } from '@rusty/autograd';
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

  forward(ids: Tensor): Tensor {
    return embedding(ids, this.weight, { paddingIdx: this.paddingIdx });
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
}
