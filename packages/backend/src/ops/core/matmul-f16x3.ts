/**
 * f32 matmul on f16 tensor cores at "high" precision (PyTorch's `torch.set_float32_matmul_precision('high')`
 * names the same trade; there it means TF32 or three bf16 products). Each f32 operand is scaled by a power of two
 * s (from its max |x|, computed on the GPU) and split into f16 parts, hi = f16(s x) and lo = f16(s x - hi); one
 * tensor-core product over K' = 3K of [hiA | hiA | loA] and [hiB ; loB ; hiB] sums hiA hiB + hiA loB + loA hiB,
 * and its epilogue multiplies by 1 / (sA sB). That is A B to about 22 significant bits (f32 has 24; TF32 11),
 * with f32 accumulation; the dropped loA loB term is 2^-22 of the product. Kernels
 * `shaders/matmul-f16x3-{absmax,split}.wgsl`; the product is `shaders/matmul-tc.wgsl` with GSCALE.
 *
 * Off by default ('highest': the portable f32 kernels, f32 FMA throughout). {@link setF32MatmulPrecision} turns
 * it on for a context; `matmul`'s `precision` option per call.
 */
import absmaxWgsl from '../../../../../shaders/matmul-f16x3-absmax.wgsl';
import splitWgsl from '../../../../../shaders/matmul-f16x3-split.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError } from '../../errors';
import { grid1d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import type { DeviceTensor } from '../../tensor';
import { fill } from './elementwise';

/** How f32 x f32 products run: 'highest' on the portable f32 kernels, 'high' on f16 tensor cores with three
 *  products per f32 product (about 22 bits) where the adapter has them. */
export type F32MatmulPrecision = 'highest' | 'high';

const precisions = new WeakMap<Context, F32MatmulPrecision>();

/** Set how this context's f32 x f32 matmuls run (default 'highest'); like `torch.set_float32_matmul_precision`. */
export function setF32MatmulPrecision(ctx: Context, p: F32MatmulPrecision): void {
  if (p !== 'highest' && p !== 'high') throw new ConfigError(`f32 matmul precision must be 'highest' or 'high', got ${JSON.stringify(p)}`);
  precisions.set(ctx, p);
}

/** This context's f32 matmul precision (see {@link setF32MatmulPrecision}). */
export function f32MatmulPrecision(ctx: Context): F32MatmulPrecision {
  return precisions.get(ctx) ?? 'highest';
}

/** The f16 copies of both operands and the scale words: f16 buffers of 3x the elements, and `sc`: u32 [4]. */
export interface F16x3Operands {
  a3: GpuBuffer;
  b3: GpuBuffer;
  sc: GpuBuffer;
}

/** Which copies along K are lo parts: A [hi, hi, lo], B [hi, lo, hi]. */
const LO = { a: 0b100, b: 0b010 } as const;

/**
 * Encode the operand passes for `op(A) @ op(B)` (f32 operands as `matmul` takes them): the two max |x| passes, then
 * the splits. A stored `[..., M, K]` gets its copies side by side along K (`[..., M, 3K]`), A stored `[..., K, M]`
 * (transA) stacked (`[..., 3K, M]`); B likewise (`[..., 3K, N]`, or `[..., N, 3K]` with transB). The caller
 * releases the three buffers.
 */
export function splitF16x3(ctx: Context, a: DeviceTensor, b: DeviceTensor, transA: boolean, transB: boolean): F16x3Operands {
  const sc = fill(ctx, [4], 0, 'u32').buffer;
  const bufs: GpuBuffer[] = [];
  for (const [slot, x] of [[0, a], [1, b]] as const) {
    const n = x.shape.reduce((p, d) => p * d, 1);
    const g = grid1d(Math.min(n, 256 * 1024), 256);
    const am = cachedKernel(ctx, 'mm-f16x3-absmax', () => ({
      name: 'matmul_f16x3_absmax',
      code: absmaxWgsl,
      bindings: [
        { name: 'x', access: 'read', dtype: 'f32' },
        { name: 'sc', access: 'rw', dtype: 'u32', atomic: true },
      ],
      params: ['u32:n', 'u32:row', 'u32:slot'],
    }));
    ctx.dispatch(am, [x.buffer, sc], g.wg, [n, g.row, slot]);
  }
  for (const [slot, x, kAlongCols, lo] of [[0, a, !transA, LO.a], [1, b, transB, LO.b]] as const) {
    const n = x.shape.reduce((p, d) => p * d, 1);
    const R = x.shape[x.shape.length - 2]!;
    const C = x.shape[x.shape.length - 1]!;
    const words = Math.ceil((3 * n) / 2);
    const out = ctx.alloc(words * 4);
    const g = grid1d(words, 256);
    const k = cachedKernel(ctx, `mm-f16x3-split:${+kAlongCols}:${lo}`, () => ({
      name: `matmul_f16x3_split_${kAlongCols ? 'cols' : 'rows'}_${lo}`,
      code: splitWgsl,
      bindings: [
        { name: 'x', access: 'read', dtype: 'f32' },
        { name: 'sc', access: 'rw', dtype: 'u32', atomic: true },
        { name: 'out', access: 'rw', dtype: 'f16' },
      ],
      params: ['u32:n', 'u32:R', 'u32:C', 'u32:row', 'u32:slot'],
      consts: { COLS: kAlongCols, LO: lo },
    }));
    ctx.dispatch(k, [x.buffer, sc, out], g.wg, [n, R, C, g.row, slot]);
    bufs.push(out);
  }
  return { a3: bufs[0]!, b3: bufs[1]!, sc };
}
