import type { Context } from '@rusty/backend';
import { geluTanhGate, swiglu, Tensor, tidy, toCompute } from '@rusty/autograd';
import type { ModelConfig } from './config';
import { compute, proj } from './attention';
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

  forward(x: Tensor): Tensor {
    const gate = this.config.hiddenAct === 'gelu_tanh' ? geluTanhGate : swiglu;
    return tidy(() => {
      const xc = toCompute(x); // one f16 copy for gate and up under f16 autocast
      const g = proj(this, 'gate_proj').forward(xc);
      const u = proj(this, 'up_proj').forward(xc);
      const a = gate(g, u);
      // the gate keeps what its backward needs (f16 copies under autocast): the f32 projections and the f32
      // activation (once its compute-dtype copy exists) go now, not after down_proj (3 x [tokens, intermediate] f32)
      g.dispose();
      u.dispose();
      return proj(this, 'down_proj').forward(compute(a));
    });
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
