import { accumulate, cast as castKernel, ConfigError, matmul as mm, type DeviceTensor } from '@rusty/backend';
import { add, computeDtype, linear, loraLinear, noGrad, quantLoraLinear, randu, releaseRef, scale, Tensor, tidy, toCompute } from '@rusty/autograd';
import { Linear } from './layers';
import { Module } from './module';
import { QuantLinear } from './quant-linear';

/** LoRA settings (PEFT's names in comments). */
export interface LoraConfig {
  /** Rank (`r`). */
  r: number;
  /** Scale numerator (`lora_alpha`): the update is scaled by alpha / r. */
  alpha: number;
  /** `lora_dropout` (only 0 is supported so far). */
  dropout?: number;
  /** Modules to adapt (`target_modules`): names matched as a suffix of a Linear's dotted name (`q_proj`,
   *  `self_attn.q_proj`), or a RegExp that must match the whole name (PEFT's string form). */
  targetModules: string[] | RegExp;
  /** Seed of the A init. */
  seed?: number;
  /** rsLoRA: scale by alpha / sqrt(r) instead of alpha / r (PEFT `use_rslora`). */
  useRslora?: boolean;
}

/** A Linear with a low-rank update: y = x W^T + b + (alpha / r) * (x A^T) B^T. W and b are frozen; the base may be
 *  a {@link QuantLinear} (QLoRA). */
export class LoraLinear extends Module {
  readonly loraA: Tensor;
  readonly loraB: Tensor;
  readonly scaling: number;
  merged = false;

  constructor(
    public base: Linear | QuantLinear,
    readonly r: number,
    readonly alpha: number,
    seed = 0,
    useRslora = false,
  ) {
    super(base.ctx);
    const ctx = base.ctx;
    base.weight.requiresGrad = false;
    if (base.bias) base.bias.requiresGrad = false;
    this.registerParameter('weight', base.weight);
    if (base.bias) this.registerParameter('bias', base.bias);
    // PEFT: A ~ kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); B = 0
    const bound = 1 / Math.sqrt(base.inFeatures);
    this.loraA = this.registerParameter(
      'lora_A.weight',
      Tensor.fromArray(ctx, randu(r * base.inFeatures, seed, -bound, bound), [r, base.inFeatures], { requiresGrad: true }),
    );
    this.loraB = this.registerParameter('lora_B.weight', Tensor.zeros(ctx, [base.outFeatures, r], { requiresGrad: true }));
    this.scaling = useRslora ? alpha / Math.sqrt(r) : alpha / r;
  }

  /** Under an f16 autocast scope the base product and both low-rank products run on f16 inputs (one f16 copy
   *  of x shared by the base and A), as one fused op: `loraLinear` on a plain base, `quantLoraLinear` on a
   *  quantized one (QLoRA; unless the QuantLinear's own `compute` is `'f32'`): the low-rank update added into the
   *  base product in place, no separate `[tokens, out]` tensors for the update, its scale and the sum (forward or
   *  backward), the skinny products on the low-rank kernels. In f32 the composition runs: the fused op sums in
   *  another order, and that alone flipped one of `rusty demo`'s four taught answers (its 4 of 4 sits on a knife
   *  edge). */
  forward(x: Tensor): Tensor {
    if (this.merged) return this.base.forward(x);
    if (computeDtype() === 'f16') {
      const b = this.base;
      if (b instanceof Linear) return loraLinear(x, b.weight, b.bias, this.loraA, this.loraB, this.scaling);
      if (b.compute !== 'f32') return quantLoraLinear(x, b.quant, b.bias, this.loraA, this.loraB, this.scaling);
    }
    return tidy(() => {
      const xc = toCompute(x);
      const y = this.base.forward(this.base instanceof QuantLinear ? x : xc);
      return add(y, scale(linear(linear(xc, this.loraA), this.loraB), this.scaling));
    });
  }

  /** As `Linear.gradInF16`: true where {@link forward} runs the fused op (f16 compute), which rounds the output's
   *  gradient to f16 for every product (the base's bias is frozen); not for the f32 composition. */
  gradInF16(): boolean {
    if (this.merged) return this.base.gradInF16();
    const b = this.base;
    return computeDtype() === 'f16' && (b instanceof Linear || b.compute !== 'f32') && !b.bias?.requiresGrad;
  }

  /** The wrapped layer is no child module: its state (a quantized base's scales) goes with this one. */
  override releaseState(): void {
    this.base.releaseState();
  }

  /** Swap the wrapped layer for one of the same shape (a quantized base for its dequantized Linear before a merge). */
  replaceBase(base: Linear | QuantLinear): void {
    if (base.inFeatures !== this.base.inFeatures || base.outFeatures !== this.base.outFeatures)
      throw new ConfigError(`LoRA: a base of [${base.outFeatures}, ${base.inFeatures}] cannot replace [${this.base.outFeatures}, ${this.base.inFeatures}]`);
    this.base = base;
    base.weight.requiresGrad = false;
    this.registerParameter('weight', base.weight);
    if (base.bias) this.registerParameter('bias', base.bias);
  }

  /** W += scaling * B A (or -= to unmerge), in W's storage dtype. */
  setMerged(on: boolean): void {
    if (on === this.merged) return;
    if (this.base instanceof QuantLinear)
      throw new ConfigError(`LoRA merge: the base weight is quantized (${this.base.spec.format}); dequantize it first (dequantizeLinears)`);
    const ctx = this.ctx;
    noGrad(() => {
      const delta = mm(ctx, this.loraB.data, this.loraA.data);
      const w = this.base.weight;
      const sign = on ? 1 : -1;
      if (w.dtype === 'f32') accumulate(ctx, w.data, delta, sign * this.scaling);
      else {
        const w32: DeviceTensor = castKernel(ctx, w.data, 'f32');
        accumulate(ctx, w32, delta, sign * this.scaling);
        w.assign(castKernel(ctx, w32, w.dtype));
        releaseRef(ctx, w32.buffer);
      }
      releaseRef(ctx, delta.buffer);
    });
    this.merged = on;
  }
}

/**
 * Freeze the model and wrap every Linear whose name ends in one of `targetModules` with a LoRA update
 * (PEFT's defaults: A kaiming-uniform, B zero, scale alpha / r). Returns the wrapped modules by name.
 */
export function applyLora(model: Module, cfg: LoraConfig): Map<string, LoraLinear> {
  if (!Number.isInteger(cfg.r) || cfg.r < 1) throw new ConfigError(`LoRA rank r must be a positive integer, got ${cfg.r}`);
  if (!(cfg.alpha > 0)) throw new ConfigError(`LoRA alpha must be > 0, got ${cfg.alpha}`);
  if (cfg.dropout) throw new ConfigError('LoRA dropout > 0 is not supported yet (use 0)');
  const targets = cfg.targetModules;
  if (Array.isArray(targets) && !targets.length) throw new ConfigError('LoRA needs at least one target module');
  const matches = (full: string) =>
    targets instanceof RegExp
      ? new RegExp(`^(?:${targets.source})$`, targets.flags).test(full)
      : targets.some((t) => full === t || full.endsWith(`.${t}`));
  for (const [, p] of model.namedParameters()) p.requiresGrad = false;
  const wrapped = new Map<string, LoraLinear>();
  let i = 0;
  for (const [name, m] of [...model.namedModules()]) {
    for (const [childName, child] of [...m.namedChildren()]) {
      const full = name ? `${name}.${childName}` : childName;
      if (!(child instanceof Linear || child instanceof QuantLinear) || !matches(full)) continue;
      const l = new LoraLinear(child, cfg.r, cfg.alpha, (cfg.seed ?? 0) * 100003 + i++, cfg.useRslora);
      m.registerModule(childName, l);
      wrapped.set(full, l);
    }
  }
  const missing = Array.isArray(targets) ? targets.filter((t) => ![...wrapped.keys()].some((k) => k.endsWith(`.${t}`) || k === t)) : [];
  if (missing.length || !wrapped.size)
    throw new ConfigError(`LoRA target modules not found in the model: ${missing.length ? missing.join(', ') : String(targets)}`);
  return wrapped;
}

/** The LoRA-wrapped modules of a model, by name. */
export function loraModules(model: Module): Map<string, LoraLinear> {
  const out = new Map<string, LoraLinear>();
  for (const [n, m] of model.namedModules()) if (m instanceof LoraLinear) out.set(n, m);
  return out;
}

/** Fold every LoRA update into its base weight (inference without the extra matmuls); `unmergeLora` undoes it. */
export function mergeLora(model: Module): void {
  for (const m of loraModules(model).values()) m.setMerged(true);
}

export function unmergeLora(model: Module): void {
  for (const m of loraModules(model).values()) m.setMerged(false);
}
