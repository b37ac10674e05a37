import type { Context } from '@rusty/backend';
import { Tensor, tidy } from '@rusty/autograd';
import type { DecoderLayer } from './architecture';
import { Attention, compute, type CacheSlot } from './attention';
import type { ModelConfig } from './config';
import { RMSNorm, type InitOptions } from './layers';
import { limbsWanted } from './fused-projections';
import { GatedMLP } from './mlp';
import { Module } from './module';

/**
 * The pre-norm decoder layer of Llama, Mistral and Qwen2/3: h + attn(norm(h)), then + mlp(norm(.)); the
 * first residual add is fused into the second norm, and the second one into the MLP (in a decoding step, into its
 * down projection's GEMV).
 */
export class PreNormDecoderLayer extends Module implements DecoderLayer {
  readonly selfAttn: Attention;
  readonly mlp: GatedMLP;
  readonly inputLayernorm: RMSNorm;
  readonly postAttentionLayernorm: RMSNorm;

  constructor(ctx: Context, c: ModelConfig, init: InitOptions, layer: number) {
    super(ctx);
    this.selfAttn = this.registerModule('self_attn', new Attention(ctx, c, init, layer));
    this.mlp = this.registerModule('mlp', new GatedMLP(ctx, c, init, layer));
    this.inputLayernorm = this.registerModule('input_layernorm', new RMSNorm(ctx, c.hiddenSize, c.rmsNormEps, init, c.normWeightOffset));
    this.postAttentionLayernorm = this.registerModule(
      'post_attention_layernorm',
      new RMSNorm(ctx, c.hiddenSize, c.rmsNormEps, init, c.normWeightOffset),
    );
  }

  /** Intermediates that nothing reads any more are disposed as soon as their last reader has run instead of at
   *  the end of the layer (the graph keeps what backward needs): the normed states in f32 once their compute-dtype
   *  copies exist, the attention output once the residual add has read it. Under f16 autocast that is 48 MiB less
   *  at a time per 2048 x 2048 tokens x hidden: the recomputed layer of gradient checkpointing peaks lower. */
  forward(h: Tensor, invFreq: Tensor, cache?: CacheSlot): Tensor {
    return tidy(() => {
      // a decoding step with int4 projections: the norms also write their output as int8 limbs (`limbsWanted`)
      let a: Tensor;
      if (limbsWanted(this.selfAttn.inputProjections(), h)) {
        const [x, l] = this.inputLayernorm.forwardLimbs(h);
        a = this.selfAttn.forward(x, invFreq, cache, l);
      } else a = this.selfAttn.forward(compute(this.inputLayernorm.forward(h)), invFreq, cache);
      if (limbsWanted(this.mlp.inputProjections(), a)) {
        const [x, l, h1] = this.postAttentionLayernorm.forwardLimbs(a, h);
        a.dispose();
        return this.mlp.forward(x, h1, l);
      }
      const [h1, x] = this.postAttentionLayernorm.forwardResidual(a, h);
      a.dispose();
      return this.mlp.forward(compute(x), h1);
    });
  }

  /** Parameter names (relative to the layer) and shapes, in registration order. */
  static parameterShapes(c: ModelConfig): [string, number[]][] {
    return [
      ...Attention.parameterShapes(c).map(([n, s]): [string, number[]] => [`self_attn.${n}`, s]),
      ...GatedMLP.parameterShapes(c).map(([n, s]): [string, number[]] => [`mlp.${n}`, s]),
      ['input_layernorm.weight', [c.hiddenSize]],
      ['post_attention_layernorm.weight', [c.hiddenSize]],
    ];
  }
}
