import finalWgsl from '../../../../../shaders/grad-norm-final.wgsl';
import partialWgsl from '../../../../../shaders/grad-norm.wgsl';
import { ioBindings } from '../../kernel';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
import type { GpuBuffer } from '../../buffer-pool';
import { grid2d } from '../../grid';
import { assertBindable, assertFloat, assertWords, cachedKernel, cachedTable } from './common';

/** Most workgroups (so partial sums) per tensor in the first pass of `gradNorm`. */
const MAX_WG = 1024;
/** Elements per workgroup the first pass aims for before it caps the workgroup count. */
const PER_WG = 2048;

/** A tensor stored at element `offset` of a flat arena (`length` elements): `gradNorm` reads the pieces of one
 *  arena in one dispatch. */
export interface ArenaPiece {
  arena: DeviceTensor;
  offset: number;
  length: number;
}

/** Options of `gradNorm`. */
export interface GradNormOptions {
  /** The clip threshold (`max_norm` of torch.nn.utils.clip_grad_norm_). Default Infinity (coefficient 1). */
  maxNorm?: number;
  /** Write the result into this f32 tensor of at least 2 elements instead of a new one. */
  out?: DeviceTensor;
}

function partialKernel(ctx: Context, dtype: DeviceTensor['dtype'], multi: boolean) {
  return cachedKernel(ctx, `grad-norm:${dtype}:${multi}`, () => ({
    name: 'grad-norm',
    // one tensor: `multi`'s table is a private stand-in (the module holds both entry points)
    code: (multi ? '' : 'var<private> table: array<u32, 5>;\n') + partialWgsl,
    entryPoint: multi ? 'multi' : 'main',
    bindings: [
      { name: 'g', access: 'read', dtype },
      { name: 'part', access: 'rw', dtype: 'f32' },
      ...(multi ? [{ name: 'table', access: 'read' as const, dtype: 'u32' as const }] : []),
    ],
    params: ['u32:n', 'u32:base', 'u32:nwg'],
  }));
}

/**
 * The global L2 norm over a list of gradients and PyTorch's clip coefficient, entirely on the GPU: result
 * f32[2] = [clipCoef, norm] with norm = sqrt(sum of all squares) and clipCoef = min(1, maxNorm / (norm + 1e-6))
 * (NaN when the norm is NaN). Element 0 is laid out to be passed straight to an optimizer as `gradScale`, which
 * then applies the clipping inside its step (the gradients in memory are not changed; `scaleInPlace(ctx, g,
 * result)` does that if wanted). Read element 1 back to log the norm. Deterministic: partial sums per gradient in
 * a fixed order and a fixed tree, then one workgroup sums them in list order (one dispatch per tensor and one per
 * arena of {@link ArenaPiece}s, plus one; a piece's partials are exactly those of the same data as a tensor).
 * Gradients may be f32, f16 or bf16.
 */
export function gradNorm(ctx: Context, grads: readonly (DeviceTensor | ArenaPiece)[], opts: GradNormOptions = {}): DeviceTensor {
  const op = 'gradNorm';
  const maxNorm = opts.maxNorm ?? Infinity;
  if (!(maxNorm > 0)) throw new ConfigError(`${op}: maxNorm must be > 0, got ${maxNorm}`);
  const plan = grads.map((x, i) => {
    const piece = 'arena' in x ? x : null;
    const g = piece ? piece.arena : (x as DeviceTensor);
    assertFloat(g, `grads[${i}]`, op);
    assertBindable(ctx, g, `grads[${i}]`, op);
    const n = piece ? piece.length : numel(g.shape);
    if (piece && !(Number.isInteger(n) && n >= 0 && Number.isInteger(piece.offset) && piece.offset >= 0 && piece.offset + n <= numel(g.shape)))
      throw new ShapeError(`${op}: grads[${i}] covers [${piece.offset}, ${piece.offset + n}) of an arena of ${numel(g.shape)} elements`);
    return { g, off: piece ? piece.offset : -1, n, nwg: n ? Math.min(MAX_WG, Math.ceil(n / PER_WG)) : 0 };
  });
  if (opts.out) assertWords(opts.out, 2, 'out', op, ['f32']);
  const total = plan.reduce((s, p) => s + p.nwg, 0);
  const res = opts.out ?? empty(ctx, [2]);
  if (plan.some((p) => p.g.buffer.id === res.buffer.id)) throw new ShapeError(`${op}: out must not be one of the grads`);
  const part = ctx.alloc(Math.max(4, total * 4));
  // the pieces of each arena: one table entry (offset, n, nwg, w, partial slot) per workgroup
  const arenas = new Map<GpuBuffer, { g: DeviceTensor; words: number[] }>();
  let base = 0;
  for (const { g, off, n, nwg } of plan) {
    if (!nwg) continue;
    if (off < 0) ctx.dispatch(partialKernel(ctx, g.dtype, false), [g.buffer, part], nwg, [n, base, nwg]);
    else {
      let a = arenas.get(g.buffer);
      if (!a) arenas.set(g.buffer, (a = { g, words: [] }));
      for (let w = 0; w < nwg; w++) a.words.push(off, n, nwg, w, base + w);
    }
    base += nwg;
  }
  for (const [buf, { g, words }] of arenas) {
    const count = words.length / 5;
    ctx.dispatch(partialKernel(ctx, g.dtype, true), [buf, part, cachedTable(ctx, buf, 'grad-norm', words)], grid2d(count), [count, 0, 0]);
  }
  const kf = cachedKernel(ctx, 'grad-norm-final', () => ({
    name: 'grad-norm-final',
    code: finalWgsl,
    bindings: ioBindings('f32', 'f32', ['part', 'res']),
    params: ['u32:total', 'f32:max_norm'],
  }));
  ctx.dispatch(kf, [part, res.buffer], 1, [total, Math.min(maxNorm, 3.4e38)]);
  ctx.release(part);
  return res;
}
