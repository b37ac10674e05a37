/**
 * The checks of the fused dequantize + tensor-core kernel (`qmatmul-tc.ts`), shared by `qmatmul-tc.test.ts`
 * (vitest: the scalar reference on any adapter) and the GPU-machine entry `src/bench/qtc-bench.ts --checks`
 * (subgroup matrices): results into NaN-poisoned outputs against float64 of the f16-rounded operands (X rounded
 * to f16's 11 significant bits, beyond f16's range too; W's dequantized values rounded as the kernel rounds them:
 * code times scale in f32, then to f16).
 */
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { f16BitsToF32, f32ToF16Bits } from '../../format';
import { kernelsReady } from '../../kernel-cache';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { quantSpec, type QuantSpec } from './formats';
import { refLinear } from './gemv.cases';
import { lastQtcKernel, QTC_TILES, qtcFailures, quantLinearTc, type QtcTileName } from './qmatmul-tc';
import { dequantizeRef } from './quant.ref';
import { quantize, releaseQuant } from './quantize';
import { name, readQuant, weights } from './quant.test-util';

export interface QtcCase {
  w: QuantSpec;
  M: number;
  N: number;
  K: number;
  x?: DType;
  bias?: boolean;
  tile?: QtcTileName;
  /** Splits of K (QtcOptions.split). */
  split?: number;
  /** X beyond f16's range: X[0, 0] = -big / 16 and the last row times `big` from the middle of K on. */
  big?: number;
  /** Elements of X set to given values: [flat index, value]. */
  xSet?: [number, number][];
}

/** Relative error (max-abs over the max-abs of the result's row, worst row) a result must stay under: the operands are the
 *  reference's, so only f32 accumulation order is left (measured in the 1e-7..1e-6 range). */
export const QTC_TOL = 1e-4;

export function qtcCaseName(c: QtcCase): string {
  return `${name(c.w)} [${c.M}, ${c.K}] x [${c.N}, ${c.K}]^T x ${c.x ?? 'f32'}${c.big ? ` up to ${c.big}` : ''}${c.xSet ? ` with ${c.xSet.map(([, v]) => v).join(', ')}` : ''}${c.bias ? ' bias' : ''} ${c.tile ?? 'default'}${c.split ? ` split ${c.split}` : ''}`;
}

const f16 = (v: number) => f16BitsToF32(f32ToF16Bits(Math.fround(v)));
/** v rounded to f16's 11 significant bits, at any magnitude (f16 itself up to its largest finite value). */
const f16Bits = (v: number) => {
  if (!(Math.abs(v) > 65504) || !Number.isFinite(v)) return f16(v);
  const s = 2 ** (Math.floor(Math.log2(Math.abs(v))) - 14);
  return f16(v / s) * s;
};

/** X of a case: randn, and with `big` its large entries. */
function caseX(c: QtcCase): Float64Array {
  const x = randn(c.M * c.K, c.M + c.K + 5);
  if (c.big) {
    for (let k = c.K >> 1; k < c.K; k++) x[(c.M - 1) * c.K + k]! *= c.big;
    x[0] = -c.big / 16;
  }
  for (const [i, v] of c.xSet ?? []) x[i] = v;
  return x;
}

/** The largest relative error of a row (max-abs over the row's max-abs reference). */
function rowRelErr(got: Float32Array | Int32Array | Uint32Array, want: Float64Array, M: number, N: number): number {
  let worst = 0;
  for (let m = 0; m < M; m++) worst = Math.max(worst, relErr(got.subarray(m * N, (m + 1) * N), want.subarray(m * N, (m + 1) * N)));
  return worst;
}

/** Run one case through the fused kernel (`scalar`: the portable reference) and return its relative error and
 *  the kernel's name. Waits for the tensor-core kernel's check; a kernel that failed it throws. */
export async function runQtcCase(ctx: Context, c: QtcCase, scalar: boolean): Promise<{ err: number; kernel: string }> {
  const { M, N, K } = c;
  const xt = upload(ctx, caseX(c), [M, K], c.x ?? 'f32');
  const x = Float64Array.from(await download(ctx, xt), f16Bits);
  const bias = c.bias ? upload(ctx, randn(N, 3), [N], 'f16') : undefined;
  const b = bias ? Float64Array.from(await download(ctx, bias)) : null;
  const wt = upload(ctx, weights(N, K, N + K), [N, K]);
  const q = quantize(ctx, wt, c.w);
  const w = dequantizeRef(c.w, await readQuant(ctx, q)).map(f16);
  const out = empty(ctx, [M, N]);
  poison(ctx, out);
  const opts = { scalar, ...(c.tile ? { tile: QTC_TILES[c.tile] } : {}), ...(c.split ? { split: c.split } : {}) };
  lastQtcKernel.delete(ctx);
  if (!quantLinearTc(ctx, xt, q, bias, out, M, opts)) {
    await kernelsReady(ctx);
    if (!quantLinearTc(ctx, xt, q, bias, out, M, opts)) {
      const fails = [...qtcFailures(ctx).values()].map((e) => e.message.split('\n').slice(0, 6).join(' | '));
      throw new Error(`the tensor-core kernel did not run: ${fails[0] ?? 'no f16 subgroup matrices'}`);
    }
  }
  const err = rowRelErr(await download(ctx, out), refLinear(x, w, b, M, N, K), M, N);
  const kernel = lastQtcKernel.get(ctx) ?? '';
  release(ctx, xt, wt, out, ...(bias ? [bias] : []));
  releaseQuant(ctx, q);
  return { err, kernel };
}

/** The GPU check list: every format, 1 to 64 rows (row tiles cut), odd N and K (partial steps and tiles, rows
 *  without 16-byte loads), every x dtype, bias, and every tile. */
export function qtcGpuCases(): QtcCase[] {
  const specs = [quantSpec('int8', 0), quantSpec('int8', 32), quantSpec('int4', 32), quantSpec('int4', 64), quantSpec('int4', 128), quantSpec('nf4', 64), quantSpec('nf4', 64, true)];
  const cases: QtcCase[] = [];
  for (const w of specs) {
    for (const M of [1, 5, 16, 17, 64]) cases.push({ w, M, N: 300, K: 512 });
    cases.push({ w, M: 7, N: 129, K: 1000, bias: true });
    cases.push({ w, M: 16, N: 2048, K: 2048, x: 'f16' });
    cases.push({ w, M: 3, N: 77, K: 203, x: 'bf16' });
  }
  const i4 = quantSpec('int4', 64);
  for (const tile of Object.keys(QTC_TILES) as QtcTileName[])
    for (const [M, N, K] of [
      [16, 520, 1024],
      [9, 100, 320],
      [40, 260, 4096],
    ] as const)
      cases.push({ w: i4, M, N, K, tile }, { w: quantSpec('nf4', 64, true), M, N, K, tile, bias: true });
  // X beyond f16's range: f32 and bf16, with and without a K split, every tile
  for (const tile of Object.keys(QTC_TILES) as QtcTileName[]) cases.push({ w: i4, M: 20, N: 260, K: 1024, big: 1e6, tile });
  cases.push({ w: quantSpec('nf4', 64, true), M: 16, N: 300, K: 4000, big: 3e5, x: 'bf16', bias: true }, { w: i4, M: 16, N: 300, K: 4000, big: 1e6, split: 3 });
  cases.push({ w: i4, M: 20, N: 260, K: 1024, xSet: [[5, 65504], [1024 + 7, -65520], [2 * 1024 + 9, 1e37]] });
  // K split (the last split shorter, bias added once)
  for (const split of [2, 3, 8])
    cases.push({ w: i4, M: 16, N: 300, K: 4000, split, bias: true }, { w: quantSpec('int8', 0), M: 5, N: 64, K: 1030, split, x: 'f16' });
  return cases;
}
