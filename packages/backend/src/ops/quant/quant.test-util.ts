// Shared helpers of the quantization tests.
import type { Context } from '../../context';
import { download } from '../../tensor';
import { randn, toF32 } from '../../testing';
import { quantLayout, quantSpec, type QuantSpec, type QuantTensor } from './formats';
import { blockErrorBound, dqScalesRef, unpackCodes, type HostQuant } from './quant.ref';
import { expect } from 'vitest';

export const SPECS: QuantSpec[] = [
  quantSpec('int8', 0),
  quantSpec('int8', 32),
  quantSpec('int8', 128),
  quantSpec('int4', 32),
  quantSpec('int4', 64),
  quantSpec('int4', 128),
  quantSpec('nf4', 64),
  quantSpec('nf4', 64, true),
  quantSpec('nf4', 32, true),
];
export const name = (s: QuantSpec) => `${s.format}/${s.groupSize || 'row'}${s.doubleQuant ? '+dq' : ''}`;

/** Weights with a spread of block magnitudes (some blocks tiny, one all zero) so scales differ. */
export function weights(N: number, K: number, seed: number): Float64Array {
  const w = randn(N * K, seed, 0.05);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) w[n * K + k]! *= 1 + ((n * 7 + (k >> 5)) % 5);
  for (let k = 0; k < Math.min(K, 32); k++) w[k] = 0; // a zero block in row 0
  return toF32(w);
}

/** The per-block quantize-then-dequantize check: every element within the format's bound of its block. */
export function checkBlockError(spec: QuantSpec, w: ArrayLike<number>, deq: ArrayLike<number>, scales: ArrayLike<number>, N: number, K: number): void {
  const l = quantLayout(spec, N, K);
  let worst = 0;
  for (let n = 0; n < N; n++)
    for (let b = 0; b < l.nb; b++) {
      let amax = 0;
      for (let k = b * l.G; k < Math.min(K, (b + 1) * l.G); k++) amax = Math.max(amax, Math.abs(w[n * K + k]!));
      // slack: x / s is rounded to f32 on the GPU, which may move a value sitting on a rounding boundary
      const bound = blockErrorBound(spec, amax, scales[n * l.nb + b]!) + 1e-6 * amax;
      for (let k = b * l.G; k < Math.min(K, (b + 1) * l.G); k++) {
        const e = Math.abs(deq[n * K + k]! - w[n * K + k]!);
        worst = Math.max(worst, e / (bound || 1));
        if (!(e <= bound)) throw new Error(`${name(spec)}: element [${n}, ${k}] error ${e} over the block bound ${bound}`);
      }
    }
  expect(worst).toBeLessThanOrEqual(1);
}

/** Read a GPU-quantized tensor back as a HostQuant (codes, decoded first-level scales). */
export async function readQuant(ctx: Context, q: QuantTensor): Promise<HostQuant> {
  const words = (await download(ctx, q.data)) as Uint32Array;
  const codes = unpackCodes(q.spec, q.layout, words);
  let scales: Float64Array;
  let dq: HostQuant['dq'];
  if (q.spec.doubleQuant) {
    const L = q.layout.N * q.layout.nb;
    const cw = (await download(ctx, q.scales)) as Uint32Array;
    dq = {
      codes: new Uint8Array(cw.buffer, 0, L).slice(),
      absmax2: Float64Array.from(await download(ctx, q.absmax2!)),
      offset: (await download(ctx, q.offset!))[0]!,
    };
    scales = dqScalesRef(dq, L);
  } else scales = Float64Array.from(await download(ctx, q.scales));
  return { layout: q.layout, codes, scales, dq };
}

