import {
  cast,
  describeQuant,
  dequantize,
  numel,
  quantBytes,
  quantize,
  ShapeError,
  storageBytes,
  type Context,
  type DeviceTensor,
  type DType,
  type QuantSpec,
  type QuantTensor,
} from '@rusty/backend';
import { computeDtype, noGrad, quantLinear, releaseRef, Tensor } from '@rusty/autograd';
import { Linear } from './layers';
import { Module } from './module';

/**
 * A Linear whose weight `[out, in]` is stored quantized (int8 / int4 / NF4, see `@rusty/backend`'s quantized
 * formats) and frozen: `y = x W^T + b` through the fused dequantizing kernels, gradients to x only. It is a valid
 * LoRA base (`applyLora` wraps it; LoRA's A and B train on top in f32: QLoRA).
 *
 * Parameters: `weight` is the packed codes (u32 `[out, wpr]`, never trained) so that the module tree keeps HF's
 * names; the scales live beside it in {@link QuantLinear.quant} (not parameters: mixed-precision casts and
 * optimizers leave them alone). `sourceDtype` is the dtype the weight had before quantization (what
 * {@link QuantLinear.toLinear} restores).
 */
export class QuantLinear extends Module {
  readonly weight: Tensor;
  readonly bias: Tensor | null;
  private state: Omit<QuantTensor, 'data'>;
  private stateReleased = false;
  /**
   * The products' precision: `'f16'` dequantizes W into a transient f16 matrix per call and multiplies on f16
   * inputs with f32 accumulation (QLoRA's compute dtype; tensor cores where the adapter has them), `'f32'` runs
   * the fused dequantizing kernels on the input as given. Unset: `'f16'` for an f16 input, else the enclosing
   * `autocast` scope's compute dtype (a model's `computeDtype`, the Trainer's `mixedPrecision`).
   */
  compute?: 'f32' | 'f16';

  constructor(
    ctx: Context,
    q: QuantTensor,
    bias: Tensor | null,
    readonly sourceDtype: DType,
  ) {
    super(ctx);
    const { data, ...rest } = q;
    this.state = rest;
    this.weight = this.registerParameter('weight', new Tensor(ctx, data, false));
    this.bias = bias ? this.registerParameter('bias', bias) : null;
    if (this.bias) this.bias.requiresGrad = false;
  }

  get inFeatures(): number {
    return this.state.layout.K;
  }

  get outFeatures(): number {
    return this.state.layout.N;
  }

  get spec(): QuantSpec {
    return this.state.spec;
  }

  /** The quantized weight as the backend kernels take it (codes from `weight`, scales beside them). */
  get quant(): QuantTensor {
    return { ...this.state, data: this.weight.data };
  }

  /** GPU bytes of the quantized weight (codes, scales and double-quantization state; bias not included). */
  get weightBytes(): number {
    return quantBytes(this.state.spec, this.outFeatures, this.inFeatures);
  }

  forward(x: Tensor): Tensor {
    return quantLinear(x, this.quant, this.bias, { compute: this.compute });
  }

  /** As `Linear.gradInF16`: the f16 op (this layer's `compute`, else the scope's) rounds the output's gradient to
   *  f16 for its product; a trainable bias would sum it in f32. */
  gradInF16(): boolean {
    return (this.compute ?? computeDtype()) === 'f16' && !this.bias?.requiresGrad;
  }

  /** Quantize a float weight [out, in] on the GPU (the caller keeps, and releases, `w`). */
  static fromWeight(ctx: Context, w: DeviceTensor, spec: QuantSpec, bias: Tensor | null = null): QuantLinear {
    if (w.shape.length !== 2) throw new ShapeError(`QuantLinear: weight [${w.shape.join(', ')}] must be [out, in]`);
    return new QuantLinear(ctx, quantize(ctx, w, spec), bias, w.dtype);
  }

  /** Quantize a Linear's weight (its bias is shared, its weight left to the caller). */
  static fromLinear(l: Linear, spec: QuantSpec): QuantLinear {
    return QuantLinear.fromWeight(l.ctx, l.weight.data, spec, l.bias);
  }

  /** The dequantized weight [out, in] in `dtype` (default: the dtype it was quantized from). */
  dequantizedWeight(dtype: DType = this.sourceDtype): DeviceTensor {
    if (dtype === 'f32' || dtype === 'f16') return dequantize(this.ctx, this.quant, dtype);
    const w32 = dequantize(this.ctx, this.quant, 'f32');
    const out = cast(this.ctx, w32, dtype);
    this.ctx.release(w32.buffer);
    return out;
  }

  /** A dense Linear with the dequantized weight in `dtype` (default `sourceDtype`) and this layer's bias. */
  toLinear(dtype: DType = this.sourceDtype): Linear {
    const l = new Linear(this.ctx, this.inFeatures, this.outFeatures, { empty: true, dtype, bias: !!this.bias, requiresGrad: false });
    noGrad(() => {
      l.weight.assign(this.dequantizedWeight(dtype));
      if (this.bias && l.bias) l.bias.assign(cast(this.ctx, this.bias.data, this.bias.dtype));
    });
    return l;
  }

  /** The GPU tensors of the quantized weight: codes, scales and the double-quantization state. */
  get quantTensors(): DeviceTensor[] {
    return [this.weight.data, this.state.scales, this.state.absmax2, this.state.offset].filter((t): t is DeviceTensor => !!t);
  }

  /** Put each of {@link quantTensors} where `move` copies it (the same bytes, see {@link packQuantized}) and
   *  release the old buffers. */
  relocate(move: (t: DeviceTensor) => DeviceTensor): void {
    const st = this.state;
    const moved = (t: DeviceTensor | undefined): DeviceTensor | undefined => {
      if (!t) return t;
      const n = move(t);
      releaseRef(this.ctx, t.buffer);
      return n;
    };
    this.state = { ...st, scales: moved(st.scales)!, absmax2: moved(st.absmax2), offset: moved(st.offset) };
    this.weight.assign(move(this.weight.data));
  }

  /** The scales and double-quantization state (the codes are the `weight` parameter, which `dispose` releases). */
  override releaseState(): void {
    if (this.stateReleased) return;
    this.stateReleased = true;
    for (const t of [this.state.scales, this.state.absmax2, this.state.offset]) if (t) releaseRef(this.ctx, t.buffer);
  }

  override toString(): string {
    return `QuantLinear(${describeQuant(this.quant)})`;
  }
}

/** Options of {@link quantizeLinears}. */
export interface QuantizeLinearsOptions {
  /** Leave the Linears whose dotted name this returns true for (default: names ending in `lm_head`). */
  skip?: (name: string) => boolean;
}

const defaultSkip = (name: string) => name === 'lm_head' || name.endsWith('.lm_head');

/**
 * Replace every Linear of `model` (except the LM head, unless `skip` says otherwise) by a {@link QuantLinear} in
 * `spec`, quantized on the GPU one layer at a time; each dense weight is released once its layer is quantized.
 * Returns the replaced modules' names.
 */
export function quantizeLinears(model: Module, spec: QuantSpec, opts: QuantizeLinearsOptions = {}): string[] {
  const skip = opts.skip ?? defaultSkip;
  const names: string[] = [];
  noGrad(() => {
    for (const [name, m] of [...model.namedModules()])
      for (const [childName, child] of [...m.namedChildren()]) {
        const full = name ? `${name}.${childName}` : childName;
        if (!(child instanceof Linear) || skip(full)) continue;
        const q = QuantLinear.fromLinear(child, spec);
        m.registerModule(childName, q);
        child.weight.dispose();
        names.push(full);
      }
  });
  return names;
}

/** Bytes of one arena of {@link packQuantized}. */
const ARENA_BYTES = 64 * 2 ** 20;

/**
 * Move the quantized weights of `layers` (codes, scales, double-quantization state) into shared buffers: arenas of
 * at most 64 MiB in which every tensor is a sub-buffer. The buffer pool rounds each buffer up to a size class
 * (the NF4 codes of a 5632 x 2048 projection: 5.5 MiB in a 6 MiB class, 32 MiB over TinyLlama's 154 projections,
 * 7% of the codes); an arena rounds the sum of its tensors once. A tensor larger than an arena keeps its own
 * buffer. Kernels see no difference (the context binds sub-buffers at their offsets). The old buffers are
 * destroyed as each arena is filled (the GPU is synced and the pool emptied), so the whole model never exists
 * twice. An arena goes back to the pool when its last tensor is released. Returns the bytes saved (the buffers'
 * size classes before, less the arenas').
 */
export async function packQuantized(ctx: Context, layers: readonly QuantLinear[]): Promise<number> {
  const align = ctx.bindingAlignment;
  const exact = (t: DeviceTensor) => Math.ceil(storageBytes(t.dtype, numel(t.shape)) / 4) * 4;
  const up = (b: number) => Math.ceil(b / align) * align;
  let saved = 0;
  let group: QuantLinear[] = [];
  let bytes = 0;
  const flush = async () => {
    if (!group.length) return;
    const arena = ctx.alloc(bytes);
    saved -= arena.size;
    let off = 0;
    for (const q of group)
      q.relocate((t) => {
        const n = exact(t);
        saved += t.buffer.size;
        const sub = ctx.subBuffer(arena, off, n);
        ctx.copy(t.buffer, sub, n);
        off += up(n);
        return { ...t, buffer: sub };
      });
    ctx.release(arena); // the arena's own reference: it returns to the pool with its last sub-buffer
    group = [];
    bytes = 0;
    await ctx.sync();
    ctx.trimPool();
  };
  for (const q of layers) {
    const need = q.quantTensors.reduce((n, t) => n + up(exact(t)), 0);
    if (need > ARENA_BYTES) continue;
    if (bytes + need > ARENA_BYTES) await flush();
    group.push(q);
    bytes += need;
  }
  await flush();
  return saved;
}

/** A LoRA wrapper (or anything else) that can swap the layer it wraps. */
interface Rebaseable {
  base: unknown;
  replaceBase(base: Linear): void;
}

const isRebaseable = (m: unknown): m is Rebaseable => typeof (m as Rebaseable).replaceBase === 'function';

/**
 * Replace every {@link QuantLinear} of `model` (also those wrapped by LoRA) by a dense Linear with the
 * dequantized weight in the dtype it was quantized from (or `dtype`): what merging an adapter into a quantized
 * base needs. Returns the replaced modules' names.
 */
export function dequantizeLinears(model: Module, dtype?: DType): string[] {
  const names: string[] = [];
  for (const [name, m] of [...model.namedModules()]) {
    if (isRebaseable(m) && m.base instanceof QuantLinear) {
      const q = m.base;
      m.replaceBase(q.toLinear(dtype));
      q.dispose();
      names.push(name);
      continue;
    }
    for (const [childName, child] of [...m.namedChildren()]) {
      if (!(child instanceof QuantLinear)) continue;
      m.registerModule(childName, child.toLinear(dtype));
      child.dispose();
      names.push(name ? `${name}.${childName}` : childName);
    }
  }
  return names;
}

/** The quantized layers of a model, by name. */
export function quantizedLinears(model: Module): Map<string, QuantLinear> {
  const out = new Map<string, QuantLinear>();
  for (const [n, m] of model.namedModules()) if (m instanceof QuantLinear) out.set(n, m);
  return out;
}
