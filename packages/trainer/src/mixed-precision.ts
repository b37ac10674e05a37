import { cast, ConfigError, isHalf, storageBytes, type DType } from '@rusty/backend';
import { noGrad, type Tensor } from '@rusty/autograd';

/** 16-bit storage formats for frozen weights. */
export type HalfDType = 'f16' | 'bf16';

/** Anything with named parameters (a `Module`). */
export interface HasNamedParameters {
  namedParameters(): Iterable<[string, Tensor]>;
}

/** What `castFrozenParameters` did. */
export interface CastReport {
  /** Names of the parameters now stored in 16 bits. */
  cast: string[];
  /** Storage bytes the cast freed (the pool's size classes may round the live figure). */
  bytesSaved: number;
}

/**
 * Mixed precision for fine-tuning: store every frozen (`requiresGrad === false`) f32 parameter in 16-bit `dtype`
 * (f16 or bf16, round-to-nearest-even on the GPU), halving the memory of the base weights, while the trainable
 * parameters stay f32 master weights that the optimizer updates. The kernels read 16-bit weights directly
 * (matmul, embedding, RMSNorm) and compute in f32. Parameters matching `skip` stay f32.
 */
export function castFrozenParameters(model: HasNamedParameters, dtype: HalfDType, opts: { skip?: (name: string) => boolean } = {}): CastReport {
  if (!isHalf(dtype)) throw new ConfigError(`castFrozenParameters: dtype must be 'f16' or 'bf16', got '${dtype}'`);
  const seen = new Set<Tensor>();
  const report: CastReport = { cast: [], bytesSaved: 0 };
  noGrad(() => {
    for (const [name, p] of model.namedParameters()) {
      if (seen.has(p)) continue;
      seen.add(p);
      if (p.requiresGrad || p.dtype !== 'f32' || opts.skip?.(name)) continue;
      const before = storageBytes(p.dtype, p.size);
      p.assign(cast(p.ctx, p.data, dtype));
      report.cast.push(name);
      report.bytesSaved += before - storageBytes(dtype as DType, p.size);
    }
  });
  return report;
}
