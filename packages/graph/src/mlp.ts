import type { Context } from '@rusty/backend';
import { add, geluTanhGate, swiglu, Tensor, tidy, toCompute } from '@rusty/autograd';
import type { ModelConfig } from './config';
import { compute, proj, type Projection } from './attention';
import { fusedProjections, gatedProjection, projectionPlusResidual } from './fused-projections';
import { Linear, type InitOptions } from './layers';
import { Module } from './module';

/**
 * Gated MLP: down(act(gate(x)) * up(x)), with the activation and its product fused in one kernel: SwiGLU
 * (`silu`, Llama, Mistral, Qwen) or GELU-tanh (`gelu_tanh`, Gemma). HF names gate_proj, up_proj, down_proj.
 */
export class GatedMLP extends Module {
  constructor(
    ctx: Context,
    readonly config: ModelConfig,
    init: InitOptions,
    layer: number,
  ) {
    super(ctx);
    const { hiddenSize: h, intermediateSize: i, mlpBias: bias } = config;
    const s = (init.seed ?? 0) * 1000 + layer * 10;
    this.registerModule('gate_proj', new Linear(ctx, h, i, { ...init, bias, seed: s + 5 }));
    this.registerModule('up_proj', new Linear(ctx, h, i, { ...init, bias, seed: s + 6 }));
    this.registerModule('down_proj', new Linear(ctx, i, h, { ...init, bias, seed: s + 7 }));
  }

  /** down(act(gate(x)) * up(x)), plus `residual` where given (`residual + mlp(x)`). In a decoding step the
   *  activation, down_proj and the add are one GEMV (`gatedProjection`, else `projectionPlusResidual`). `limbs`: x
   *  as int8 limbs (see `limbsWanted`) for gate and up. */
  forward(x: Tensor, residual?: Tensor, limbs?: Tensor): Tensor {
    const gate = this.config.hiddenAct === 'gelu_tanh' ? geluTanhGate : swiglu;
    return tidy(() => {
      const xc = toCompute(x); // one f16 copy for gate and up under f16 autocast
      const [gp, up, down] = (['gate_proj', 'up_proj', 'down_proj'] as const).map((n) => proj(this, n));
      // decoding: gate and up in one GEMV dispatch where they allow it
      const [g, u] = fusedProjections([gp!, up!], xc, limbs) ?? [gp!.forward(xc), up!.forward(xc)];
      // decoding: the activation inside down_proj's GEMV (and the residual add as its bias)
      const fused = gatedProjection(down!, g, u, this.config.hiddenAct === 'gelu_tanh' ? 'gelu_tanh' : 'silu', residual);
      if (fused) return fused;
      // under f16 autocast the activation is written in f16 (down_proj rounds its input to f16: no f32 copy and
      // cast), and so are the gradients of gate and up where both projections round them so (saves
      // 2 x [tokens, intermediate] f32 in backward); either way the projections read the same values, bit for bit
      const a = gate(g, u, { outputInCompute: true, gradsInCompute: !!(gp!.gradInF16?.() && up!.gradInF16?.()) });
      // the gate keeps what its backward needs (f16 copies under autocast): the f32 projections go now, not after
      // down_proj (2 x [tokens, intermediate] f32; an f32 activation goes once its compute-dtype copy exists)
      g.dispose();
      u.dispose();
      const ac = compute(a);
      if (!residual) return down!.forward(ac);
      return projectionPlusResidual(down!, ac, residual) ?? add(residual, down!.forward(ac));
    });
  }

  /** The projections of the input: gate and up. */
  inputProjections(): Projection[] {
    return [proj(this, 'gate_proj'), proj(this, 'up_proj')];
  }

  /** HF parameter names (relative to the module) and shapes for a config. */
  static parameterShapes(c: ModelConfig): [string, number[]][] {
    const { hiddenSize: h, intermediateSize: i, mlpBias: bias } = c;
    const out: [string, number[]][] = [];
    for (const [name, o, n] of [['gate_proj', i, h], ['up_proj', i, h], ['down_proj', h, i]] as const) {
      out.push([`${name}.weight`, [o, n]]);
      if (bias) out.push([`${name}.bias`, [o]]);
    }
    return out;
  }
}
