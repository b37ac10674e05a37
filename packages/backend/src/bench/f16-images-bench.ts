/**
 * Exact f32 products through f16 images (ops/core/matmul-f16-images.ts) against the portable f32 kernels and the
 * 'high' split (ops/core/matmul-f16x3.ts), on the products of the 1.1B LoRA step (TinyLlama's shape, 2048 tokens):
 * accuracy on sampled outputs against float64 (error over sum |a b| of the output: the scale of f32 rounding) and
 * time per product. A: f32 randn with rows scaled over 2^-8 .. 2^8; B: bf16-valued randn * 0.02 (a bf16
 * checkpoint loaded in f32). One JSON line per product and path; exits 1 when the exact path's error exceeds 4x
 * the portable kernel's worst (or 2^-20) or no tensor cores.
 *
 *   node f16-images-bench.js [--reps 20] [--samples 256]
 */
import { createContext } from '../context';
import { contextTcPlan } from '../ops/core/matmul-tc';
import { matmul } from '../ops/core/matmul';
import { f16ImageOf, prepareF16Images } from '../ops/core/matmul-f16-images';
import { release, upload, download, type DeviceTensor } from '../tensor';
import { roundTo } from '../ops/core/core.ref';
import { randn } from '../testing';
import { kernelsReady } from '../kernel-cache';

const arg = (k: string, d: number) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const reps = arg('reps', 20);
const samples = arg('samples', 256);
const ctx = await createContext();
const device = `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim();
const plan = contextTcPlan(ctx);
console.log(JSON.stringify({ bench: 'f16-images', device, tensorCores: 'frag' in plan }));
if (!('frag' in plan)) process.exit(1);

// [M, N, K, B stored [N, K] (NT: y = x W^T) or [K, N] (NN: dx = dY W)]; the k / v projections (N or K of 256)
// are left out: no image is made for them (f16ImageTuning's minima; they measured faster portable)
const shapes: [number, number, number, 'NT' | 'NN', string][] = [
  [2048, 2048, 2048, 'NT', 'q/o forward'],
  [2048, 5632, 2048, 'NT', 'gate/up forward'],
  [2048, 2048, 5632, 'NT', 'down forward'],
  [2048, 2048, 2048, 'NN', 'q/o input grad'],
  [2048, 2048, 5632, 'NN', 'gate/up input grad'],
  [2048, 5632, 2048, 'NN', 'down input grad'],
  [256, 32000, 2048, 'NT', 'LM head chunk forward'],
  [256, 2048, 32000, 'NN', 'LM head chunk input grad'],
];
let bad = 0;
for (const [M, N, K, layout, what] of shapes) {
  const transB = layout === 'NT';
  const av = Float32Array.from(randn(M * K, 1), (v, i) => v * 2 ** ((Math.floor(i / K) % 17) - 8));
  const wv = Float32Array.from(roundTo('bf16', randn(N * K, 2, 0.02)));
  const a = upload(ctx, av, [M, K]);
  const w = upload(ctx, wv, transB ? [N, K] : [K, N]);
  const wPlain = upload(ctx, wv, transB ? [N, K] : [K, N]); // the same values, no image
  await prepareF16Images(ctx, [w]);
  if (!f16ImageOf(ctx, w)) {
    console.log(JSON.stringify({ what, error: 'no image' }));
    bad++;
    continue;
  }
  const paths: [string, () => DeviceTensor][] = [
    ['portable f32', () => matmul(ctx, a, wPlain, { transB })],
    ['image highest', () => matmul(ctx, a, w, { transB })],
    ['image high', () => matmul(ctx, a, w, { transB, precision: 'high' })],
    ['f16x3 high', () => matmul(ctx, a, wPlain, { transB, precision: 'high' })],
  ];
  // sampled outputs in float64
  const idx = Array.from({ length: samples }, (_, s) => Math.floor(((s * 2654435761) % 2 ** 32) / 2 ** 32 * M * N));
  const ref = idx.map((i) => {
    const m = Math.floor(i / N);
    const n = i % N;
    let s = 0;
    let mag = 0;
    for (let k = 0; k < K; k++) {
      const p = av[m * K + k]! * wv[transB ? n * K + k : k * N + n]!;
      s += p;
      mag += Math.abs(p);
    }
    return [s, mag] as const;
  });
  let portableErr = 0;
  for (const [name, f] of paths) {
    ctx.release(f().buffer); // warm-up: starts the tensor-core kernels' checks, which the next call waits for
    await kernelsReady(ctx);
    await ctx.sync();
    const c0 = f();
    const got = await download(ctx, c0);
    ctx.release(c0.buffer);
    let err = 0;
    idx.forEach((i, s) => (err = Math.max(err, Math.abs(got[i]! - ref[s]![0]) / ref[s]![1])));
    // spin up (the GPU idles at a low clock and drops to it within milliseconds): 150 ms of this product, then time
    const h0 = performance.now();
    while (performance.now() - h0 < 150) {
      for (let r = 0; r < 4; r++) ctx.release(f().buffer);
      await ctx.sync();
    }
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) ctx.release(f().buffer);
    await ctx.sync();
    const ms = (performance.now() - t0) / reps;
    if (name === 'portable f32') portableErr = err;
    const ok = name !== 'image highest' || err <= Math.max(4 * portableErr, 2 ** -20);
    if (!ok) bad++;
    console.log(JSON.stringify({ what, M, N, K, layout, path: name, ms: +ms.toFixed(4), tflops: +((2 * M * N * K) / ms / 1e9).toFixed(1), err: +err.toExponential(2), ok }));
  }
  release(ctx, a, w, wPlain);
}
console.log(JSON.stringify({ summary: 'f16-images', failed: bad }));
ctx.destroy();
process.exit(bad ? 1 : 0);
