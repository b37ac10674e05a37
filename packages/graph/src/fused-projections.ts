import { quantTuning, tryGemvParts, type GemvPart } from '@rusty/backend';
import { computeDtype, isGradEnabled, Tensor } from '@rusty/autograd';
import type { Projection } from './attention';
import { Linear } from './layers';
import { QuantLinear } from './quant-linear';

/** Whether {@link fusedProjections} may fuse (a switch for tests and benchmarks; on by default). */
export const fusionSettings = { projections: true };

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
export function fusedProjections(projs: readonly Projection[], x: Tensor): Tensor[] | null {
  if (!fusionSettings.projections || isGradEnabled()) return null;
  const parts: GemvPart[] = [];
  for (const p of projs) {
    const part = partOf(p, x);
    if (!part) return null;
    parts.push(part);
  }
  return tryGemvParts(x.ctx, x.data, parts)?.map((y) => new Tensor(x.ctx, y)) ?? null;
}
