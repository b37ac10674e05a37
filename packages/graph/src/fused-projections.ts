import { gemv16, gemvGated, gemvTakesLimbs, quantLinear, quantTuning, tryGemvParts, type GateActivation, type GemvPart } from '@rusty/backend';
import { computeDtype, isGradEnabled, Tensor } from '@rusty/autograd';
import type { Projection } from './attention';
import { Linear } from './layers';
import { QuantLinear } from './quant-linear';

/** Whether {@link fusedProjections} (`projections`), {@link projectionPlusResidual} (`projections` and
 *  `residual`), {@link gatedProjection} (`projections` and `gated`) and the attention's `ropePair` (`projections`
 *  and `rope`) may fuse, whether that `ropePair` also stores a decoding step's keys and values in the KV cache
 *  (`projections`, `rope` and `kv`: no copy of its own), and whether a decoder layer's norms write int8 limbs of
 *  their output for int4 projections that multiply on them (`projections` and `limbs`, {@link limbsWanted}):
 *  switches for tests and benchmarks, on by default. */
export const fusionSettings = { projections: true, residual: true, rope: true, gated: true, limbs: true, kv: true };

/** out_features of a part's weight (quantized, or a float matrix [N, K]). */
const outFeatures = (w: GemvPart['weight']): number => ('spec' in w ? w.layout.N : w.shape[0]!);

/** The GEMV part of a projection that the decoding GEMV would run alone anyway, or null. */
function partOf(p: Projection, x: Tensor): GemvPart | null {
  if (p instanceof QuantLinear) {
    if ((p.compute ?? (x.dtype === 'f16' ? 'f16' : computeDtype())) !== 'f32' || quantTuning.gemv !== 'auto') return null;
    return { weight: p.quant, bias: p.bias?.data };
  }
  if (p instanceof Linear && p.constructor === Linear) {
    if (computeDtype() !== 'f32' || (p.weight.dtype !== 'f16' && p.weight.dtype !== 'bf16' && p.weight.dtype !== 'f32')) return null;
    return { weight: p.weight.data, bias: p.bias?.data };
  }
  return null;
}

/**
 * Projections of one input (a layer's q, k and v, or its gate and up) as one GEMV dispatch (`gemvParts`) in a
 * decoding step: where no gradient is recorded, x has 1..16 rows (quantized weights: fewer rows than `quantLinear`
 * runs on tensor cores, where the adapter has them; see `tryGemvParts`), and each projection is a plain frozen weight
 * that the decode GEMV reads (a `QuantLinear`, or a `Linear` with an f16, bf16 or f32 weight, under f32 compute) of
 * one storage format. The results are those of each `forward(x)`, up to f32 rounding. Returns null where it
 * does not apply (then the caller runs each projection).
 */
export function fusedProjections(projs: readonly Projection[], x: Tensor, limbs?: Tensor): Tensor[] | null {
  if (!fusionSettings.projections || isGradEnabled()) return null;
  const parts: GemvPart[] = [];
  for (const p of projs) {
    const part = partOf(p, x);
    if (!part) return null;
    parts.push(part);
  }
  return tryGemvParts(x.ctx, x.data, parts, { xLimbs: limbs?.data })?.map((y) => new Tensor(x.ctx, y)) ?? null;
}

/**
 * Whether the norm before `projs` should also write its output x as int8 limbs (`rmsNorm`'s `limbs`) for
 * {@link fusedProjections} to multiply int4 codes by (the integer int4 GEMV, `gemvTakesLimbs`): in a decoding
 * step (no gradient recorded, one row of `x`, f32 compute) where every projection is a `QuantLinear` that the
 * decode GEMV reads and that takes limbs. `x` is the norm's input (the norm keeps its shape and, here, f32).
 */
export function limbsWanted(projs: readonly Projection[], x: Tensor): boolean {
  if (!fusionSettings.projections || !fusionSettings.limbs || isGradEnabled() || x.dtype !== 'f32' || x.size !== x.shape[x.rank - 1]) return false;
  return projs.every((p) => p instanceof QuantLinear && partOf(p, x) !== null && gemvTakesLimbs(x.ctx, p.quant, 1));
}

/**
 * `p(x) + r` in one GEMV dispatch for one row of x (a decoding step's down projection and the residual add after
 * it): r goes in as the bias of a projection that has none, so the GEMV adds it to each sum, the same f32 addition
 * as the separate add, bit for bit. Applies where {@link fusedProjections} would take p (no gradient recorded, a
 * plain frozen weight the decode GEMV reads, f32 compute), x has one row and r is f32 with one value per output;
 * returns null elsewhere (then the caller runs p and the add).
 */
export function projectionPlusResidual(p: Projection, x: Tensor, r: Tensor): Tensor | null {
  if (!fusionSettings.projections || !fusionSettings.residual || isGradEnabled()) return null;
  const part = partOf(p, x);
  if (!part || part.bias || x.size !== x.shape[x.rank - 1] || r.dtype !== 'f32') return null;
  const w = part.weight;
  if (r.size !== outFeatures(w)) return null;
  const y = 'spec' in w ? quantLinear(x.ctx, x.data, w, { bias: r.data }) : gemv16(x.ctx, x.data, w, { bias: r.data });
  return new Tensor(x.ctx, y);
}

/**
 * `p(act(g) * u)`, plus `r` where given, in one GEMV dispatch (`gemvGated`): a gated MLP's activation and its down
 * projection in a decoding step, each x element the value the activation kernel writes. Applies where
 * {@link fusedProjections} would take p, g and u are f32 with 1..16 rows, and (with r) x has one row, p no bias of
 * its own and r is f32 with one value per output; returns null elsewhere (then the caller runs the activation, p
 * and the add).
 */
export function gatedProjection(p: Projection, g: Tensor, u: Tensor, act: GateActivation, r?: Tensor): Tensor | null {
  if (!fusionSettings.projections || !fusionSettings.gated || isGradEnabled()) return null;
  const part = partOf(p, g);
  if (!part) return null;
  const w = part.weight;
  if (r && (part.bias || !fusionSettings.residual || g.size !== g.shape[g.rank - 1] || r.dtype !== 'f32' || r.size !== outFeatures(w))) return null;
  const y = gemvGated(g.ctx, g.data, u.data, act, w, { bias: r ? r.data : part.bias });
  return y ? new Tensor(g.ctx, y) : null;
}
