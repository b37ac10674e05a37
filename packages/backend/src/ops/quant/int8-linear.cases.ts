/**
 * The int8 x int8 checks, shared by `int8-linear.test.ts` (vitest; the tensor-core cases where the adapter has
 * int8 subgroup matrices) and the GPU-machine entry `src/bench/quant-bench.ts --checks` (no vitest there): row
 * quantization against the host, then products on sizes that are and are not tile multiples (odd ones
 * included), with and without bias, each tile, into NaN-poisoned outputs, against float64 of the same int8 values
 * (exact integer sums) and the same scale epilogue, element by element within f32 rounding.
 */
import type { Context } from '../../context';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn } from '../../testing';
import { quantSpec } from './formats';
import { contextI8Plan, I8_TILES, i8TcFailures, i8TensorCoresReady, i8TileProblem, int8Matmul, lastI8Kernel, quantizeRowsI8, type I8Path, type I8TileName } from './int8-linear';
import { roundEven } from './quant.ref';
import { quantize, releaseQuant } from './quantize';

export interface I8Case {
  M: number;
  N: number;
  K: number;
  bias?: boolean;
  path: Exclude<I8Path, 'auto'>;
  tile?: I8TileName;
}

export interface I8Result {
  name: string;
  /** Largest |got - want| over its allowed f32 rounding (<= 1 passes). */
  worst: number;
  kernel: string;
}

/** Codes of an int8 word array: value k of a row in byte k % 4. */
export function i8Codes(words: Uint32Array, rows: number, wpr: number, K: number): Int8Array {
  const b = new Int8Array(words.buffer, words.byteOffset, rows * wpr * 4);
  const out = new Int8Array(rows * K);
  for (let r = 0; r < rows; r++) for (let k = 0; k < K; k++) out[r * K + k] = b[r * wpr * 4 + k]!;
  return out;
}

/** Host int8 row quantization (float64 of f32 values): scale absmax / 127 rounded to f32, codes round-half-even
 *  of x / s rounded to f32. */
export function quantizeRowsRef(x: ArrayLike<number>, M: number, K: number): { codes: Int8Array; scales: Float64Array } {
  const codes = new Int8Array(M * K);
  const scales = new Float64Array(M);
  for (let m = 0; m < M; m++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[m * K + k]!));
    const s = Math.fround(amax / 127);
    scales[m] = s;
    for (let k = 0; k < K; k++) {
      if (s === 0) continue;
      const v = Math.fround(x[m * K + k]! / s);
      codes[m * K + k] = Math.max(-127, Math.min(127, roundEven(v)));
    }
  }
  return { codes, scales };
}

let seed = 9100;

/** Run one int8 product and compare with float64: returns the worst error over its f32-rounding allowance. */
export async function runI8Case(ctx: Context, c: I8Case): Promise<I8Result> {
  const { M, N, K } = c;
  const wt = upload(ctx, randn(N * K, seed++, 0.05), [N, K]);
  const w = quantize(ctx, wt, quantSpec('int8', 0));
  const xt = upload(ctx, randn(M * K, seed++), [M, K]);
  const a = quantizeRowsI8(ctx, xt);
  const biasV = c.bias ? Float64Array.from(Float32Array.from(randn(N, seed++))) : null;
  const bias = biasV ? upload(ctx, biasV, [N]) : undefined;
  const out = empty(ctx, [M, N]);
  poison(ctx, out);
  const tile = c.tile ? I8_TILES[c.tile] : undefined;
  const run = () => int8Matmul(ctx, a, w, { bias, out, path: c.path, tile });
  try {
    run();
  } catch (e) {
    if (!/not ready/.test((e as Error).message)) throw e;
    await i8TensorCoresReady(ctx);
    const failed = [...i8TcFailures(ctx)];
    if (failed.length) throw new Error(failed.map(([k, err]) => `${k}: ${err.message}`).join('\n'));
    run();
  }
  const kernel = lastI8Kernel.get(ctx) ?? '?';
  const got = await download(ctx, out);
  const wpr = Math.ceil(K / 4);
  const ac = i8Codes((await download(ctx, a.codes)) as Uint32Array, M, wpr, K);
  const as = await download(ctx, a.scales);
  const wc = i8Codes((await download(ctx, w.data)) as Uint32Array, N, wpr, K);
  const ws = await download(ctx, w.scales);
  let worst = 0;
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += ac[m * K + k]! * wc[n * K + k]!;
      const prod = s * as[m]! * ws[n]!;
      const want = prod + (biasV ? biasV[n]! : 0);
      // f32(s) (WGSL lets an int-to-float conversion take either neighbour: 2^-23), two correctly rounded
      // products (2^-24 each) and the bias addition (2^-24 of the result)
      const allow = 2 ** -24 * (4.01 * Math.abs(prod) + Math.abs(want)) + 1e-30;
      const e = Math.abs(got[m * N + n]! - want) / allow;
      worst = Math.max(worst, Number.isFinite(got[m * N + n]!) ? e : Infinity);
    }
  release(ctx, wt, xt, out, a.codes, a.scales, ...(bias ? [bias] : []));
  releaseQuant(ctx, w);
  return { name: `${c.path} ${M}x${N}x${K}${c.bias ? ' bias' : ''}${c.tile ? ' ' + c.tile : ''}`, worst, kernel };
}

/** The product cases: the portable kernel always; the tensor-core kernel with each tile where the adapter has
 *  int8 subgroup matrices. */
export function i8Cases(ctx: Context): I8Case[] {
  const shapes: [number, number, number, boolean][] = [
    [1, 1, 1, false],
    [7, 9, 5, true],
    [65, 130, 33, false],
    [129, 67, 200, true],
    [64, 64, 64, false],
  ];
  const cases: I8Case[] = shapes.map(([M, N, K, bias]) => ({ M, N, K, bias, path: 'portable' }));
  const plan = contextI8Plan(ctx);
  if (!('frag' in plan)) return cases;
  for (const [M, N, K, bias] of [...shapes, [256, 256, 256, false], [333, 257, 129, true], [300, 520, 1000, false]] as const)
    cases.push({ M, N, K, bias, path: 'tc' });
  for (const tile of Object.keys(I8_TILES) as I8TileName[])
    if (!i8TileProblem(I8_TILES[tile], plan, ctx.info.limits)) {
      cases.push({ M: 256, N: 256, K: 512, path: 'tc', tile });
      cases.push({ M: 131, N: 69, K: 72, path: 'tc', tile, bias: true });
    }
  return cases;
}
