/**
 * X as int8 limbs: the input of the integer int4 GEMV (`GemvShape.xLimbs`), which multiplies 4-bit codes by X
 * with `dot4I8Packed` instead of decoding every code to a float (about 3 instructions per element and row; the
 * seventh session found the one-row int4 GEMV bound by them, docs/PERFORMANCE.md).
 *
 * Layout (owned here; written by `shaders/x-limbs-write.wgsl`): a row of K elements (K a multiple of 16) is
 * 7 K / 8 u32 words. Each group of 16 elements with largest magnitude m is a 24-bit fixed-point image with a
 * power-of-two step 2^e, e the least exponent with m 2^-e <= QM = 127 (2^16 + 2^8 + 1): q_e = round(x_e 2^-e),
 * split into balanced signed bytes q = a 2^16 + b 2^8 + c. Words 12 g .. 12 g + 11 hold group g's limbs: for the
 * elements 8 j .. 8 j + 7 (j = 0, 1) and limb L (a, b, c = 0, 1, 2), word 6 j + 2 L the even elements and word
 * 6 j + 2 L + 1 the odd ones, one per byte (the even / odd split of an int4 word's high / low nibbles). Word
 * 3 K / 4 + g is the group's step 2^e (f32 bits), word 3 K / 4 + K / 16 + g is 8 (q_0 + ... + q_15) (i32, exact:
 * what the GEMV subtracts for the codes' offset 8). x_e = q_e 2^e to within m 2^-23: as close as f32 comes for the
 * group's largest elements; smaller ones keep their error relative to m. No division is involved, so the words
 * are the same on every GPU ({@link limbsRef} computes them on the host).
 */
import xLimbsWgsl from '../../../../../shaders/x-limbs.wgsl';
import xLimbsWriteWgsl from '../../../../../shaders/x-limbs-write.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { cachedKernel, checkOut, fmtShape } from '../core/util';

/** Elements per limb group (one scale). */
export const LIMB_GROUP = 16;
/** The largest |q|: a, b and c all 127. */
export const LIMB_QMAX = 127 * (65536 + 256 + 1);

/** u32 words of one row of K elements as limbs. */
export const limbWords = (K: number): number => (7 * K) / 8;

/** Whether this context's WGSL has `dot4I8Packed` and `pack4xI8` (the language feature
 *  `packed_4x8_integer_dot_product`) and subgroups (the writer's quad operations). */
export function xLimbsAvailable(ctx: Context): boolean {
  return !!ctx.info.wgslFeatures?.includes('packed_4x8_integer_dot_product') && ctx.info.features.subgroups;
}

/** The WGSL of `shaders/x-limbs-write.wgsl` (the writer's `write_limbs`), for kernels that write limbs. */
export const xLimbsWriteCode = xLimbsWriteWgsl;

/**
 * X [..., K] (f32, K a multiple of 16) as int8 limbs: u32 [..., 7 K / 8] in the layout above. A kernel of its
 * own; `rmsNorm(..., { limbs: true })` writes them in the norm's dispatch.
 */
export function xLimbs(ctx: Context, x: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  if (x.dtype !== 'f32') throw new ShapeError(`xLimbs: x must be f32, got ${x.dtype}`);
  const K = x.shape[x.shape.length - 1];
  if (K === undefined || K % LIMB_GROUP) throw new ShapeError(`xLimbs: the last dimension of x ${fmtShape(x.shape)} must be a multiple of ${LIMB_GROUP}`);
  if (!xLimbsAvailable(ctx)) throw new ShapeError('xLimbs: the adapter has no packed_4x8_integer_dot_product');
  const shape = [...x.shape.slice(0, -1), limbWords(K)];
  if (opts.out) checkOut(opts.out, shape, 'xLimbs', 'u32', [x]);
  const y = opts.out ?? empty(ctx, shape, 'u32');
  const rows = numel(x.shape) / K;
  if (rows === 0 || K === 0) return y;
  const k = cachedKernel(ctx, 'x-limbs', () => ({
    name: 'x-limbs',
    code: xLimbsWgsl + xLimbsWriteWgsl,
    enables: ['subgroups'],
    bindings: [
      { name: 'x', access: 'read', dtype: 'f32' },
      { name: 'xl', access: 'rw', dtype: 'u32' },
    ],
    params: ['u32:rows', 'u32:K', 'u32:row'],
  }));
  const { wg, row } = grid1d((rows * K) / 4, 64);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [rows, K, row]);
  return y;
}

/** The limbs of f32 rows of K elements, computed on the host as the GPU does (tests). Groups whose largest
 *  magnitude is below 2^-100 are not handled here. */
export function limbsRef(x: ArrayLike<number>, K: number): Uint32Array {
  const rows = x.length / K;
  const W = limbWords(K);
  const out = new Uint32Array(rows * W);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const round = (v: number) => {
    const r = Math.round(v);
    return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r; // half to even
  };
  for (let r = 0; r < rows; r++)
    for (let g = 0; g < K / 16; g++) {
      const v = Array.from({ length: 16 }, (_, i) => Math.fround(x[r * K + 16 * g + i]!));
      const m = Math.max(...v.map(Math.abs));
      f[0] = m;
      let e = m === 0 ? -23 : ((u[0]! >>> 23) & 255) - 126 - 23; // frexp's exponent - 23
      if (m * 2 ** -e > LIMB_QMAX) e += 1;
      const bytes = [0, 0, 0].map(() => new Array<number>(16));
      let qs = 0;
      for (let i = 0; i < 16; i++) {
        const q = round(v[i]! * 2 ** -e);
        qs += q;
        const c = ((q + 128) & 255) - 128;
        const q1 = (q - c) / 256;
        const b = ((q1 + 128) & 255) - 128;
        bytes[0]![i] = (q1 - b) / 256;
        bytes[1]![i] = b;
        bytes[2]![i] = c;
      }
      for (let j = 0; j < 2; j++)
        for (let par = 0; par < 2; par++)
          for (let L = 0; L < 3; L++) {
            let w = 0;
            for (let k = 0; k < 4; k++) w |= (bytes[L]![8 * j + 2 * k + par]! & 255) << (8 * k);
            out[r * W + 12 * g + 6 * j + 2 * L + par] = w >>> 0;
          }
      f[0] = 2 ** e;
      out[r * W + (3 * K) / 4 + g] = u[0]!;
      out[r * W + (3 * K) / 4 + K / 16 + g] = (8 * qs) >>> 0;
    }
  return out;
}

/** Host decoding of limbs (tests): the values x_e = q_e s of rows of K elements. */
export function decodeLimbs(words: Uint32Array, K: number): Float64Array {
  const W = limbWords(K);
  const rows = words.length / W;
  const out = new Float64Array(rows * K);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const byte = (w: number, k: number) => ((w << (24 - 8 * k)) >> 24); // signed byte k
  for (let r = 0; r < rows; r++)
    for (let g = 0; g < K / 16; g++) {
      u[0] = words[r * W + (3 * K) / 4 + g]!;
      const s = f[0]!;
      for (let e = 0; e < 16; e++) {
        const j = e >> 3;
        const par = e & 1;
        const k = (e & 7) >> 1;
        const at = (L: number) => byte(words[r * W + 12 * g + 6 * j + 2 * L + par]!, k);
        out[r * K + 16 * g + e] = (at(0) * 65536 + at(1) * 256 + at(2)) * s;
      }
    }
  return out;
}
