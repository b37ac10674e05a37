import finalWgsl from '../../../../../shaders/grad-norm-final.wgsl';
import partialWgsl from '../../../../../shaders/grad-norm.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { assertBindable, assertFloat, assertWords, cachedKernel } from './common';

/** Most workgroups (so partial sums) per tensor in the first pass of `gradNorm`. */
const MAX_WG = 1024;
/** Elements per workgroup the first pass aims for before it caps the workgroup count. */
const PER_WG = 2048;

/** Options of `gradNorm`. */
export interface GradNormOptions {
  /** The clip threshold (`max_norm` of torch.nn.utils.clip_grad_norm_). Default Infinity (coefficient 1). */
  maxNorm?: number;
  /** Write the result into this f32 tensor of at least 2 elements instead of a new one. */
  out?: DeviceTensor;
}

/**
 * The global L2 norm over a list of gradients and PyTorch's clip coefficient, entirely on the GPU: result
 * f32[2] = [clipCoef, norm] with norm = sqrt(sum of all squares) and clipCoef = min(1, maxNorm / (norm + 1e-6))
 * (NaN when the norm is NaN). Element 0 is laid out to be passed straight to an optimizer as `gradScale`, which
 * then applies the clipping inside its step (the gradients in memory are not changed; `scaleInPlace(ctx, g,
 * result)` does that if wanted). Read element 1 back to log the norm. Deterministic: partial sums per tensor in
 * a fixed order and a fixed tree, then one workgroup sums them in list order (one dispatch per non-empty tensor
 * plus one). Gradients may be f32, f16 or bf16. For a flat arena pass the arena: its gaps count too.
 */
export function gradNorm(ctx: Context, grads: readonly DeviceTensor[], opts: GradNormOptions = {}): DeviceTensor {
  const op = 'gradNorm';
  const maxNorm = opts.maxNorm ?? Infinity;
  if (!(maxNorm > 0)) throw new ConfigError(`${op}: maxNorm must be > 0, got ${maxNorm}`);
  grads.forEach((g, i) => {
    assertFloat(g, `grads[${i}]`, op);
    assertBindable(ctx, g, `grads[${i}]`, op);
  });
  if (opts.out) assertWords(opts.out, 2, 'out', op, ['f32']);
  const plan = grads.map((g) => {
    const n = numel(g.shape);
    return { g, n, nwg: n ? Math.min(MAX_WG, Math.ceil(n / PER_WG)) : 0 };
  });
  const total = plan.reduce((s, p) => s + p.nwg, 0);
  const res = opts.out ?? empty(ctx, [2]);
  if (grads.some((g) => g.buffer.id === res.buffer.id)) throw new ShapeError(`${op}: out must not be one of the grads`);
  const part = ctx.alloc(Math.max(4, total * 4));
  let base = 0;
  for (const { g, n, nwg } of plan) {
    if (!nwg) continue;
    const k = cachedKernel(ctx, `grad-norm:${g.dtype}`, () => ({
      name: 'grad-norm',
      code: partialWgsl,
      bindings: [
        { name: 'g', access: 'read', dtype: g.dtype },
        { name: 'part', access: 'rw', dtype: 'f32' },
      ],
      params: ['u32:n', 'u32:base', 'u32:nwg'],
    }));
    ctx.dispatch(k, [g.buffer, part], nwg, [n, base, nwg]);
    base += nwg;
  }
  const kf = cachedKernel(ctx, 'grad-norm-final', () => ({
    name: 'grad-norm-final',
    code: finalWgsl,
    bindings: [
      { name: 'part', access: 'read', dtype: 'f32' },
      { name: 'res', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:total', 'f32:max_norm'],
  }));
  ctx.dispatch(kf, [part, res.buffer], 1, [total, Math.min(maxNorm, 3.4e38)]);
  ctx.release(part);
  return res;
}
