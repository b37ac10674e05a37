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
import round16Wgsl from '../../../../../shaders/round-f16.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { cachedKernel } from '../../kernel-cache';
import type { DeviceTensor } from '../../tensor';

/** How f32 x f32 products run: 'highest' on the portable f32 kernels, 'high' on f16 tensor cores with three
 *  products per f32 product (about 22 bits) where the adapter has them. */
export type F32MatmulPrecision = 'highest' | 'high';

const precisions = new WeakMap<Context, F32MatmulPrecision>();

/**
 * Tuning of the 'high' path (a benchmark may change it). `minDim`: the smallest min(M, N) it takes; below, the
 * portable f32 kernels run. Its extra passes cost about (M + N) K against the product's M N K, so small outputs
 * lose: on an H100 (2026-11-24, docs/PERFORMANCE.md) the 1.1B LoRA step (min(M, N) = 2048 and up) ran 1.41x
 * faster at 'high', a 33.7M-parameter model from scratch (512-1376) 0.72x.
 */
export const f16x3Tuning = { minDim: 2048 };

/** Set how this context's f32 x f32 matmuls run (default 'highest'); like `torch.set_float32_matmul_precision`. */
export function setF32MatmulPrecision(ctx: Context, p: F32MatmulPrecision): void {
  if (p !== 'highest' && p !== 'high') throw new ConfigError(`f32 matmul precision must be 'highest' or 'high', got ${JSON.stringify(p)}`);
  precisions.set(ctx, p);
}

/** This context's f32 matmul precision (see {@link setF32MatmulPrecision}). */
export function f32MatmulPrecision(ctx: Context): F32MatmulPrecision {
  return precisions.get(ctx) ?? 'highest';
}

/** The f16 copies of both operands and the scale words: f16 buffers of 3x the elements, and `sc`: u32
 *  [2 * 256 + 2], whose words 512 and 513 are 1 / sA and 1 / sB (f32 bits) for the product's epilogue. */
export interface F16x3Operands {
  a3: GpuBuffer;
  b3: GpuBuffer;
  sc: GpuBuffer;
}

/** Which copies along K are lo parts: A [hi, hi, lo], B [hi, lo, hi]. */
const LO = { a: 0b100, b: 0b010 } as const;

/** The element loads (`ld4`, `ld1`) and, for the split, the word stores (`st2`, `st1`) of both operands, each
 *  through one view of its binding (a vec4f / vec2<u32> view where `vec`; one entry point may not use two). */
function views(vec: boolean, split: boolean): string {
  const both = (f: (x: 'a' | 'b') => string) => `if (isb) { ${f('b')} } else { ${f('a')} }`;
  if (vec)
    return (
      `@group(0) @binding(1) var<storage, read> xa4: array<vec4f>;\n@group(0) @binding(2) var<storage, read> xb4: array<vec4f>;\n` +
      `fn ld4(isb: bool, i: u32) -> vec4f { ${both((x) => `return x${x}4[i];`)} }\n` +
      `fn ld1(isb: bool, i: u32) -> f32 { ${both((x) => `return x${x}4[i >> 2u][i & 3u];`)} }\n` +
      (split
        ? `@group(0) @binding(4) var<storage, read_write> outa2: array<vec2<u32>>;\n@group(0) @binding(5) var<storage, read_write> outb2: array<vec2<u32>>;\n` +
          `fn st2(isb: bool, q: u32, v: vec2<u32>) { ${both((x) => `out${x}2[q] = v;`)} }\n` +
          `fn st1(isb: bool, t: u32, w: u32) { ${both((x) => `out${x}2[t >> 1u][t & 1u] = w;`)} }\n`
        : '')
    );
  return (
    `fn ld4(isb: bool, i: u32) -> vec4f { ${both((x) => `return vec4f(read_x${x}(4u * i), read_x${x}(4u * i + 1u), read_x${x}(4u * i + 2u), read_x${x}(4u * i + 3u));`)} }\n` +
    `fn ld1(isb: bool, i: u32) -> f32 { ${both((x) => `return read_x${x}(i);`)} }\n` +
    (split
      ? `fn st2(isb: bool, q: u32, v: vec2<u32>) { ${both((x) => `out${x}[2u * q] = v.x; out${x}[2u * q + 1u] = v.y;`)} }\n` +
        `fn st1(isb: bool, t: u32, w: u32) { ${both((x) => `out${x}[t] = w;`)} }\n`
      : '')
  );
}

/**
 * Encode the operand passes for `op(A) @ op(B)` (f32 operands as `matmul` takes them): max |x| of both (one
 * dispatch), then both splits (one dispatch). A stored `[..., M, K]` gets its copies side by side along K
 * (`[..., M, 3K]`), A stored `[..., K, M]` (transA) stacked (`[..., 3K, M]`); B likewise (`[..., 3K, N]`, or
 * `[..., N, 3K]` with transB). The caller releases the three buffers.
 */
export function splitF16x3(ctx: Context, a: DeviceTensor, b: DeviceTensor, transA: boolean, transB: boolean): F16x3Operands {
  const dims = (x: DeviceTensor) => ({ n: x.shape.reduce((p, d) => p * d, 1), R: x.shape[x.shape.length - 2]!, C: x.shape[x.shape.length - 1]! });
  const A = dims(a);
  const B = dims(b);
  const vecAbs = A.n % 4 === 0 && B.n % 4 === 0;
  const vecSplit = A.C % 4 === 0 && B.C % 4 === 0;
  // absmax: up to 256 workgroups per operand, each over a grid-stride share
  const wgs = (n: number) => Math.max(1, Math.min(256, Math.ceil(n / (vecAbs ? 4 : 1) / 256)));
  const ga = wgs(A.n);
  const gb = wgs(B.n);
  const sc = ctx.alloc((2 * 256 + 2) * 4);
  // both passes: the two operands and the maxima parts / scale words
  const shared = [
    { name: 'xa', access: 'read', dtype: 'f32' },
    { name: 'xb', access: 'read', dtype: 'f32' },
    { name: 'part', access: 'rw', dtype: 'u32' },
  ] as const;
  const am = cachedKernel(ctx, `mm-f16x3-absmax:${+vecAbs}`, () => ({
    name: `matmul_f16x3_absmax${vecAbs ? '_v4' : ''}`,
    code: views(vecAbs, false) + absmaxWgsl,
    bindings: [...shared],
    params: ['u32:na', 'u32:nb', 'u32:ga', 'u32:gb'],
    consts: { VEC: vecAbs },
  }));
  ctx.dispatch(am, [a.buffer, b.buffer, sc], [ga + gb, 1, 1], [A.n, B.n, ga, gb]);
  const words = (x: { n: number }) => Math.ceil((3 * x.n) / 2);
  const a3 = ctx.alloc(words(A) * 4);
  const b3 = ctx.alloc(words(B) * 4);
  const threads = (x: { n: number }) => (vecSplit ? x.n / 4 : words(x));
  const wa = Math.max(1, Math.ceil(threads(A) / 256));
  const wb = Math.max(1, Math.ceil(threads(B) / 256));
  const gx = Math.min(wa + wb, 65535);
  const gy = Math.ceil((wa + wb) / gx);
  if (gy > 65535) throw new ShapeError(`matmul: ${wa + wb} workgroups of the f16x3 split are more than one dispatch takes`);
  const k = cachedKernel(ctx, `mm-f16x3-split:${+vecSplit}`, () => ({
    name: `matmul_f16x3_split${vecSplit ? '_v4' : ''}`,
    code: views(vecSplit, true) + round16Wgsl + splitWgsl,
    bindings: [...shared, { name: 'outa', access: 'rw', dtype: 'u32' }, { name: 'outb', access: 'rw', dtype: 'u32' }],
    params: ['u32:na', 'u32:Ra', 'u32:Ca', 'u32:cola', 'u32:loa', 'u32:ga', 'u32:nb', 'u32:Rb', 'u32:Cb', 'u32:colb', 'u32:lob', 'u32:gb', 'u32:wa', 'u32:wb'],
    consts: { VEC: vecSplit },
  }));
  ctx.dispatch(k, [a.buffer, b.buffer, sc, a3, b3], [gx, gy, 1], [A.n, A.R, A.C, +!transA, LO.a, ga, B.n, B.R, B.C, +transB, LO.b, gb, wa, wb]);
  return { a3, b3, sc };
}
