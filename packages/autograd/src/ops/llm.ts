import {
  addRmsNorm as addRmsNormKernel,
  cast as castKernel,
  crossEntropy as crossEntropyKernel,
  embedding as embeddingKernel,
  embeddingBackward,
  geluTanhGate as geluTanhGateKernel,
  geluTanhGateBackward,
  scaleInPlace,
  ShapeError,
  swiglu as swigluKernel,
  swigluBackward,
  rmsNorm as rmsNormKernel,
  rmsNormBackward,
  rope as ropeKernel,
  ropeBackward,
  ropePair as ropePairKernel,
  ConfigError,
  type Context,
  type RopeStore,
  type DeviceTensor,
} from '@rusty/backend';
import { defineOp } from '../op';
import { isGradEnabled } from '../scope';
import { releaseRef, retain } from '../storage';
import { Tensor } from '../tensor';
import { computeDtype } from './autocast';
import { reshape } from './shape';

/** Options of {@link rmsNorm} and {@link addRmsNorm}. */
export interface RmsNormOpts {
  /** Added to every weight before it scales, in f32: `* (w + weightOffset)`. Default 0; 1 for Gemma's
   *  RMSNorm (`* (1.0 + weight.float())`). */
  weightOffset?: number;
}

const rmsNormOp = defineOp<{ eps: number; weightOffset: number }>({
  name: 'rms_norm',
  forward: (ctx, [x, w], { eps, weightOffset }) => {
    const { y, rstd } = rmsNormKernel(ctx, x!, w!, { eps, weightOffset });
    return { outputs: y, saved: [x!, w!, rstd] };
  },
  backward: (ctx, [g], [x, w, rstd], [mx, mw], { weightOffset }) => {
    const { dx, dw } = rmsNormBackward(ctx, g!, x!, w!, rstd!, { weightOffset });
    return [keepIf(ctx, dx, mx!.requiresGrad), keepIf(ctx, dw, mw!.requiresGrad)];
  },
});

/** HF LlamaRMSNorm over the last dim: x * rsqrt(mean(x^2) + eps) * w (`* (1 + w)` with weightOffset 1, HF
 *  Gemma3RMSNorm), in f32. */
export const rmsNorm = (x: Tensor, w: Tensor, eps: number, opts: RmsNormOpts = {}): Tensor =>
  rmsNormOp([x, w], { eps, weightOffset: opts.weightOffset ?? 0 });

const addRmsNormOp = defineOp<{ eps: number; weightOffset: number }>({
  name: 'add_rms_norm',
  forward: (ctx, [x, r, w], { eps, weightOffset }) => {
    const { y, rstd, sum } = addRmsNormKernel(ctx, x!, r!, w!, { eps, weightOffset });
    return { outputs: [sum, y], saved: [sum, w!, rstd] };
  },
  backward: (ctx, [gSum, gY], [sum, w, rstd], [mx, mr, mw], { weightOffset }) => {
    let d: DeviceTensor;
    let dw: DeviceTensor | null = null;
    if (gY) {
      const r = rmsNormBackward(ctx, gY, sum!, w!, rstd!, gSum ? { residualGrad: gSum, weightOffset } : { weightOffset });
      d = r.dx;
      dw = keepIf(ctx, r.dw, mw!.requiresGrad);
    } else {
      d = gSum!;
      retain(d.buffer);
    }
    // the sum's gradient reaches both addends
    if (mx!.requiresGrad && mr!.requiresGrad) retain(d.buffer);
    else if (!mx!.requiresGrad && !mr!.requiresGrad) releaseRef(ctx, d.buffer);
    return [mx!.requiresGrad ? d : null, mr!.requiresGrad ? d : null, dw];
  },
});

/** Fused residual add + RMSNorm: returns [x + residual, rmsNorm(x + residual)] from one pass. */
export function addRmsNorm(x: Tensor, residual: Tensor, w: Tensor, eps: number, opts: RmsNormOpts = {}): [Tensor, Tensor] {
  const [s, y] = addRmsNormOp.multi([x, residual, w], { eps, weightOffset: opts.weightOffset ?? 0 });
  return [s!, y!];
}

const ropeOp = defineOp<{ positionOffset: number; attentionScaling: number }>({
  name: 'rope',
  forward: (ctx, [x, inv], o) => ({ outputs: ropeKernel(ctx, x!, inv!, o), saved: [inv!] }),
  backward: (ctx, [g], [inv], _m, o) => [ropeBackward(ctx, g!, inv!, o), null],
});

/**
 * Rotary position embedding on x [B, T, H, D] (HF `rotate_half` layout) with inverse frequencies `invFreq`
 * [D/2] (from `ropeInvFreq`); token t sits at position `positionOffset + t`.
 */
export function rope(x: Tensor, invFreq: Tensor, opts: { positionOffset?: number; attentionScaling?: number } = {}): Tensor {
  return ropeOp([x, invFreq], { positionOffset: opts.positionOffset ?? 0, attentionScaling: opts.attentionScaling ?? 1 });
}

/**
 * {@link rope} of a layer's queries q [B, T, Hq, D] and keys k [B, T, Hkv, D] at the same positions: one dispatch
 * where no gradient is recorded for them (decoding), else one rope op each. The values are the same either way.
 * `store` (only where no gradient is recorded): the same dispatch also writes the rotated keys and the values into
 * a KV cache's layer (the backend's `ropePair`).
 */
export function ropePair(q: Tensor, k: Tensor, invFreq: Tensor, opts: { positionOffset?: number; attentionScaling?: number; store?: RopeStore } = {}): [Tensor, Tensor] {
  if (isGradEnabled() && (q.requiresGrad || k.requiresGrad)) {
    if (opts.store) throw new ConfigError('ropePair: store only where no gradient is recorded');
    return [rope(q, invFreq, opts), rope(k, invFreq, opts)];
  }
  const [a, b] = ropePairKernel(q.ctx, q.data, k.data, invFreq.data, { positionOffset: opts.positionOffset ?? 0, attentionScaling: opts.attentionScaling ?? 1, store: opts.store });
  return [new Tensor(q.ctx, a), new Tensor(q.ctx, b)];
}

function keepIf(ctx: Parameters<typeof releaseRef>[0], t: DeviceTensor, keep: boolean): DeviceTensor | null {
  if (keep) return t;
  releaseRef(ctx, t.buffer);
  return null;
}

/** What a gated activation keeps for backward: its inputs, or f16 copies of them under an f16 autocast scope
 *  (the gradient reads them in f32 arithmetic either way; half the memory of the MLP's widest activations). */
function gateSaved(ctx: Context, g: DeviceTensor, u: DeviceTensor, f16: boolean): DeviceTensor[] {
  return f16 ? [g, u].map((t) => (t.dtype === 'f16' ? t : castKernel(ctx, t, 'f16'))) : [g, u];
}

/** Options of the gated activations ({@link swiglu}, {@link geluTanhGate}). Both take effect only under an f16
 *  autocast scope and for an even last dim (16-bit words), and give their reader the values it read before, bit
 *  for bit (rounded from the same f32 values as `cast` rounds them). */
export interface GateOptions {
  /** The output in f16: for a reader that rounds it to f16 anyway (a projection's input under f16 autocast). */
  outputInCompute?: boolean;
  /** The gradients of gate and up in f16: for inputs whose one reader in backward reads them only rounded to f16
   *  (a projection's output under f16 autocast without a trainable bias: `Linear.gradInF16`). */
  gradsInCompute?: boolean;
}

interface GateAttrs {
  f16: boolean;
  /** Storage dtype of the output and of the input gradients. */
  out: 'f32' | 'f16';
  grads: 'f32' | 'f16';
}

function gateAttrs(gate: Tensor, o: GateOptions): GateAttrs {
  const f16 = computeDtype() === 'f16';
  const words = gate.rank > 0 && gate.shape[gate.rank - 1]! % 2 === 0;
  return { f16, out: f16 && words && o.outputInCompute ? 'f16' : 'f32', grads: f16 && words && o.gradsInCompute ? 'f16' : 'f32' };
}

const swigluOp = defineOp<GateAttrs>({
  name: 'swiglu',
  forward: (ctx, [g, u], { f16, out }) => ({ outputs: swigluKernel(ctx, g!, u!, { dtype: out }), saved: gateSaved(ctx, g!, u!, f16) }),
  backward: (ctx, [d], [g, u], [mg, mu], { grads }) => {
    const { dgate, dup } = swigluBackward(ctx, d!, g!, u!, { dtype: grads });
    return [keepIf(ctx, dgate, mg!.requiresGrad), keepIf(ctx, dup, mu!.requiresGrad)];
  },
});

/** Fused SwiGLU: silu(gate) * up (in f32; under an f16 autocast scope its inputs are kept in f16 for backward,
 *  and the output or the gradients may be stored in f16: {@link GateOptions}). */
export const swiglu = (gate: Tensor, up: Tensor, opts: GateOptions = {}): Tensor => swigluOp([gate, up], gateAttrs(gate, opts));

const geluTanhGateOp = defineOp<GateAttrs>({
  name: 'gelu_tanh_gate',
  forward: (ctx, [g, u], { f16, out }) => ({ outputs: geluTanhGateKernel(ctx, g!, u!, { dtype: out }), saved: gateSaved(ctx, g!, u!, f16) }),
  backward: (ctx, [d], [g, u], [mg, mu], { grads }) => {
    const { dgate, dup } = geluTanhGateBackward(ctx, d!, g!, u!, { dtype: grads });
    return [keepIf(ctx, dgate, mg!.requiresGrad), keepIf(ctx, dup, mu!.requiresGrad)];
  },
});

/** Fused GELU-tanh gating (Gemma's MLP, HF `gelu_pytorch_tanh`): gelu_tanh(gate) * up with
 *  gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); saved and stored like {@link swiglu}. */
export const geluTanhGate = (gate: Tensor, up: Tensor, opts: GateOptions = {}): Tensor => geluTanhGateOp([gate, up], gateAttrs(gate, opts));

const embeddingOp = defineOp<{ paddingIdx: number | null }>({
  name: 'embedding',
  forward: (ctx, [ids, w]) => ({ outputs: embeddingKernel(ctx, ids!, w!), saved: [ids!] }),
  backward: (ctx, [g], [ids], [, mw], { paddingIdx }) => [null, embeddingBackward(ctx, ids!, g!, mw!.shape[0]!, { paddingIdx })],
});

/**
 * Rows of `weight` [V, D] gathered by integer `ids` (i32, any shape) -> [...ids.shape, D]. `paddingIdx`
 * (PyTorch's `nn.Embedding(padding_idx=)`): the lookup gives that row no gradient.
 */
export const embedding = (ids: Tensor, weight: Tensor, opts: { paddingIdx?: number | null } = {}): Tensor =>
  embeddingOp([ids, weight], { paddingIdx: opts.paddingIdx ?? null });

const crossEntropyOp = defineOp<{ ignoreIndex: number; labelSmoothing: number; needGrad: boolean }>({
  name: 'cross_entropy',
  forward: (ctx, [logits, targets], o) => {
    const r = crossEntropyKernel(ctx, logits!, targets!, {
      ignoreIndex: o.ignoreIndex,
      labelSmoothing: o.labelSmoothing,
      computeGrad: o.needGrad,
    });
    releaseRef(ctx, r.rowLoss.buffer);
    releaseRef(ctx, r.count.buffer);
    return { outputs: r.loss, saved: r.dlogits ? [r.dlogits] : [] };
  },
  backward: (ctx, [g], [dlogits]) => {
    // dlogits was computed in the forward pass (one read of the logits); scale it by the upstream gradient
    scaleInPlace(ctx, dlogits!, g!);
    retain(dlogits!.buffer);
    return [dlogits!, null];
  },
});

/**
 * PyTorch's `F.cross_entropy(logits [N, V], targets [N])` with `ignoreIndex` (default -100) and mean reduction
 * over the targets that are not ignored; fused with log-softmax, the gradient computed in the same pass.
 */
export function crossEntropy(logits: Tensor, targets: Tensor, opts: { ignoreIndex?: number; labelSmoothing?: number } = {}): Tensor {
  return crossEntropyOp([logits, targets], {
    ignoreIndex: opts.ignoreIndex ?? -100,
    labelSmoothing: opts.labelSmoothing ?? 0,
    needGrad: isGradEnabled() && logits.requiresGrad,
  });
}

Tensor.crossEntropyLoss = (logits, targets, opts = {}) => {
  const v = logits.shape[logits.rank - 1]!;
  const n = logits.size / v;
  const t = 'isTensor' in targets ? targets : Tensor.fromArray(logits.ctx, targets, [n], { dtype: 'i32' });
  if (t.size !== n) throw new ShapeError(`crossEntropyLoss: ${t.size} targets for logits [${logits.shape.join(', ')}]`);
  const flatT = t.rank === 1 ? t : reshape(t, [n]);
  const loss = crossEntropy(logits.rank === 2 ? logits : reshape(logits, [n, v]), flatT, opts);
  if (flatT !== t) flatT.dispose();
  if (t !== targets) t.dispose();
  return loss;
};
