/**
 * What the sections of quant-bench share (quant-bench.ts, quant-bench-gemv.ts): the command-line settings, the log,
 * random data, a call's GPU time through the profiler, the spin-up and the copy bandwidth.
 */
import type { Context } from '../context';
import { kernelsReady } from '../kernel-cache';
import { copy } from '../ops/core/transpose';
import { quantSpec, type QuantSpec } from '../ops/quant/formats';
import { empty, release, type DeviceTensor } from '../tensor';
import { rng } from '../testing';

export const args = process.argv.slice(2);
export const quick = args.includes('--quick');
/** Layouts (gemvLayoutName) of GEMV checks that failed: the sweep leaves them out. */
export const failedLayouts = new Set<string>();
export const spinMs = Number(args.find((a) => a.startsWith('--spin-ms='))?.split('=')[1] ?? 150);
export const settleMs = Number(args.find((a) => a.startsWith('--settle-ms='))?.split('=')[1] ?? (quick ? 10 : 1000));
export const warmMs = Number(args.find((a) => a.startsWith('--warm-ms='))?.split('=')[1] ?? (quick ? 5 : 100));
export const reps = Number(args.find((a) => a.startsWith('--reps='))?.split('=')[1] ?? (quick ? 3 : 20));
export const log = (s: string) => process.stderr.write(s + '\n');

export function randomData(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (2 * r() - 1) * scale;
  return x;
}

/** GPU time (s) per call of f: the profiler's time of every kernel f dispatches (the names are for the log), or
 *  wall time without timestamp queries. */
export async function gpuTime(ctx: Context, names: string[], f: () => void): Promise<number> {
  f();
  await kernelsReady(ctx); // subgroup-matrix kernels are checked asynchronously on first use
  for (let i = 0; i < 2; i++) f();
  await ctx.sync();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) f();
  await ctx.sync();
  const wall = (performance.now() - t0) / 1e3 / reps;
  if (!ctx.profiler.enabled) return wall;
  await ctx.profiler.summary(); // earlier passes' timestamps land before the reset, not in this count
  ctx.profiler.reset();
  for (let i = 0; i < reps; i++) f();
  await ctx.sync();
  const entries = await ctx.profiler.summary();
  if (process.env.QUANT_BENCH_KERNELS) log(`${names[0]}: ${entries.map((e) => e.name).join(', ')}`);
  const sum = entries.reduce((s, e) => s + (e.meanUs * e.count) / reps, 0);
  return sum > 0 ? sum / 1e6 : wall;
}

export const SPECS: [string, QuantSpec][] = [
  ['int8-row', quantSpec('int8', 0)],
  ['int4-g64', quantSpec('int4', 64)],
  ['nf4-g64', quantSpec('nf4', 64)],
  ['nf4-g64-dq', quantSpec('nf4', 64, true)],
];

/** Buffers the spin-up copies between (allocated once). */
let spinBufs: [DeviceTensor, DeviceTensor] | null = null;

/**
 * Keep the GPU busy with back-to-back 256 MiB copies for `ms` milliseconds of wall time. The H100 idles at a low
 * clock (345 MHz seen) and reaches its running clock only under sustained work: every timing below starts with
 * this, so that no measurement pays the ramp.
 */
export async function spinUp(ctx: Context, ms: number): Promise<void> {
  const n = quick ? 1 << 20 : 1 << 26;
  spinBufs ??= [empty(ctx, [n]), empty(ctx, [n])];
  const [a, b] = spinBufs;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    for (let i = 0; i < 4; i++) copy(ctx, a, { out: b });
    await ctx.sync();
  }
  if (ctx.profiler.enabled) {
    await ctx.profiler.summary();
    ctx.profiler.reset();
  }
}

/** The GPU's copy bandwidth (bytes read + written per second) on 1 GiB, after a spin-up: the vec4 copy kernel
 *  at 1, 2, 4 and 8 vec4s per thread (profiler, best of three timings of `reps` each), and the queue's
 *  copyBufferToBuffer (wall time of 16 copies, so slightly low). `GBps` is the best of all: the yardstick. */
export async function measureCopy(ctx: Context): Promise<{ bytes: number; GBps: number; kernel: Record<string, number>; bufferCopy: number }> {
  const n = quick ? 1 << 20 : 1 << 28; // f32 elements: 1 GiB
  const src = empty(ctx, [n]);
  const dst = empty(ctx, [n]);
  await spinUp(ctx, 300);
  const kernel: Record<string, number> = {};
  for (const per of [1, 2, 4, 8]) {
    let best = 0;
    for (let i = 0; i < 3; i++) best = Math.max(best, (8 * n) / (await gpuTime(ctx, ['transpose-copy'], () => copy(ctx, src, { out: dst, perThread: per }))) / 1e9);
    kernel[`perThread${per}`] = best;
  }
  release(ctx, src, dst);
  const dev = ctx.device;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const [a, b] = [dev.createBuffer({ size: 4 * n, usage }), dev.createBuffer({ size: 4 * n, usage })];
  const copies = async (k: number) => {
    const enc = dev.createCommandEncoder();
    for (let i = 0; i < k; i++) enc.copyBufferToBuffer(a, 0, b, 0, 4 * n);
    dev.queue.submit([enc.finish()]);
    await dev.queue.onSubmittedWorkDone();
  };
  await copies(16);
  const t0 = performance.now();
  await copies(16);
  const bufferCopy = (16 * 8 * n) / ((performance.now() - t0) / 1e3) / 1e9;
  a.destroy();
  b.destroy();
  const GBps = Math.max(bufferCopy, ...Object.values(kernel));
  log(`copy (read + written): kernel ${Object.entries(kernel).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}; copyBufferToBuffer ${bufferCopy.toFixed(0)} GB/s`);
  return { bytes: 8 * n, GBps, kernel, bufferCopy };
}

