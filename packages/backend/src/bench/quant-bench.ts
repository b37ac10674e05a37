/**
 * Quantized weights on the GPU machine (a program, not a test). Prints ONE JSON object; exits 1 when a check
 * fails. Sections (default: --checks --gemv --int8; --all adds the older --memory and --training and --probe):
 * - `adapter`: the adapter and its subgroup-matrix configurations, with the int8 ones (i8/u8 -> i32/u32) apart;
 * - `gemvChecks` (`--gemv-checks`) and `i8Checks` (`--i8-checks`; `--checks`: both): the GPU check list: every GEMV
 *   case of `gemvGpuCases` (unrolled kernels, every format, 1-16 rows, odd sizes, each swept tuning) and every int8
 *   case of `i8Cases` (portable and tensor-core kernels, every tile) against float64;
 * - `copy`: the GPU's copy bandwidth (bytes read + written) after a spin-up: the vec4 copy kernel at 1-8 vec4s per
 *   thread and copyBufferToBuffer; the best is the GEMV's yardstick;
 * - `gemv` (`--gemv`): the decode shapes (1, 4 and 16 rows): time per GEMV dispatched back to back in one pass
 *   (each after a spin-up of the GPU's clock, median of 5 passes) with the weight rotated over enough copies to
 *   exceed the L2 cache several times, bytes the kernel reads (codes + scales + x), GB/s and the fraction of the
 *   copy bandwidth, beside the f16 GEMV (`gemv16`, same generator, its own tuned layout) and the f16 `matmul`;
 *   first (`gemvSweep`, unless `--no-sweep`: then the layouts of `gemvTuning` as committed) a sweep of the layouts (entry point, rows, threads, prefetch) for one, few and many rows
 *   of X on int4/64 and f16 weights: the chosen tuning is the best geometric mean;
 * - `decode` (`--decode`): the int4/64 GEMV at 1 and 4 rows under the current layouts, decoded both ways
 *   (`gemvTuning.decode` 'shift' and 'mask'), with the stage-leaving probes (no decoding, X as ones) and the f16
 *   GEMV beside it, on the 7B decode shapes and a small one (the per-dispatch floor);
 * - `placement` (`--placement`, after `--gemv` where both run, so under its chosen layouts): one int4/64 and one
 *   f16 GEMV at one row timed again and again, with fresh X and Y buffers each time (same weights) and with fresh
 *   weights: how much a timing depends on where the buffers landed;
 * - `int8` (`--int8`): int8 x int8 TOPS at 4096^3 (each tensor-core tile, the portable kernel, and int8Linear with
 *   the row quantization) beside the f16 tensor-core `matmul` TFLOP/s of the same shape;
 * - `memory` (`--memory`), `tiled` (`--training`): as measured before (docs/PERFORMANCE.md).
 *
 *   bash .gpu/run.sh quant-bench [--quick] [--reps=N] [--spin-ms=150] [--warm-ms=100] [--settle-ms=1000] [--no-sweep | --sweep=int4One,int4Few,int4Many,f16One,f16Few,f16Many] [--checks | --gemv-checks | --i8-checks] [--gemv] [--int8] [--all]
 */
import i8ProbeWgsl from '../../../../shaders/quant-i8-probe.wgsl';
import { createContext, type Context } from '../context';
import { kernelsReady } from '../kernel-cache';
import { matmul, matmulPath } from '../ops/core/matmul';
import { copy } from '../ops/core/transpose';
import { quantBytes, quantLayout, quantSpec, type QuantSpec, type QuantTensor } from '../ops/quant/formats';
import { gemv16Dispatch, gemvTuning, gemvTuningCopy, quantGemvDispatch, type GemvClass, type GemvDispatch, type GemvSetting } from '../ops/quant/gemv';
import { GEMV_SWEEP_LAYOUTS, GEMV_TOL, gemvCaseName, gemvGpuCases, gemvLayoutName, runGemvCase } from '../ops/quant/gemv.cases';
import { contextI8Plan, I8_TILES, i8Tuning, i8TcFailures, i8TensorCoresReady, i8TileProblem, int8Linear, int8Matmul, lastI8Kernel, quantizeRowsI8 } from '../ops/quant/int8-linear';
import { i8Cases, runI8Case } from '../ops/quant/int8-linear.cases';
import { quantLinear, quantLinearBackward } from '../ops/quant/qmatmul';
import { dequantize, quantize, quantScales, releaseQuant } from '../ops/quant/quantize';
import { download, empty, poison, release, upload, uploadBytes, type DeviceTensor } from '../tensor';
import { relErr, rng } from '../testing';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const flag = (n: string) => args.includes(`--${n}`) || args.includes('--all');
const only = ['checks', 'gemv-checks', 'i8-checks', 'gemv', 'decode', 'placement', 'int8', 'memory', 'training', 'probe'].some((n) => args.includes(`--${n}`));
const section = (n: string) => flag(n) || (n.endsWith('-checks') && flag('checks')) || (!only && ['gemv-checks', 'i8-checks', 'gemv', 'int8'].includes(n));
/** Layouts (gemvLayoutName) of GEMV checks that failed: the sweep leaves them out. */
const failedLayouts = new Set<string>();
const spinMs = Number(args.find((a) => a.startsWith('--spin-ms='))?.split('=')[1] ?? 150);
const settleMs = Number(args.find((a) => a.startsWith('--settle-ms='))?.split('=')[1] ?? (quick ? 10 : 1000));
const warmMs = Number(args.find((a) => a.startsWith('--warm-ms='))?.split('=')[1] ?? (quick ? 5 : 100));
const reps = Number(args.find((a) => a.startsWith('--reps='))?.split('=')[1] ?? (quick ? 3 : 20));
const log = (s: string) => process.stderr.write(s + '\n');

function randomData(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (2 * r() - 1) * scale;
  return x;
}

/** GPU time (s) per call of f: the profiler's time of every kernel f dispatches (the names are for the log), or
 *  wall time without timestamp queries. */
async function gpuTime(ctx: Context, names: string[], f: () => void): Promise<number> {
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

const SPECS: [string, QuantSpec][] = [
  ['int8-row', quantSpec('int8', 0)],
  ['int4-g64', quantSpec('int4', 64)],
  ['nf4-g64', quantSpec('nf4', 64)],
  ['nf4-g64-dq', quantSpec('nf4', 64, true)],
];

async function main() {
  const ctx = await createContext({ profile: true });
  const info = ctx.info;
  const out: Record<string, unknown> = { date: new Date().toISOString(), quick, reps, args };
  const configs = (info.subgroupMatrixConfigs ?? []) as unknown as Record<string, unknown>[];
  out.adapter = {
    vendor: info.vendor,
    architecture: info.architecture,
    description: info.description,
    isSoftware: info.isSoftware,
    features: info.features,
    subgroupSizes: info.subgroupSizes,
    subgroupMatrixConfigs: configs,
    int8SubgroupMatrix: configs.filter((c) => /^[iu]8$/.test(String(c.componentType))),
    int8Plan: contextI8Plan(ctx),
  };
  log(`adapter: ${info.description} (${info.vendor}); int8 subgroup matrices: ${JSON.stringify((out.adapter as { int8SubgroupMatrix: unknown }).int8SubgroupMatrix)}`);
  let failed = 0;

  if (section('gemv-checks')) {
    const t0 = performance.now();
    const gemv: Record<string, unknown>[] = [];
    for (const c of gemvGpuCases()) {
      let err: number;
      try {
        err = await runGemvCase(ctx, c);
      } catch (e) {
        err = Infinity;
        log(`gemv check ${gemvCaseName(c)}: ${(e as Error).message.slice(0, 400)}`);
      }
      if (!(err < GEMV_TOL)) {
        failed++;
        gemv.push({ name: gemvCaseName(c), relErr: err });
        for (const set of [c.tune?.few, c.tune?.many]) if (set && 'rows' in set && 'threads' in set) failedLayouts.add(gemvLayoutName(set as GemvSetting));
      }
    }
    out.gemvChecks = { cases: gemvGpuCases().length, tol: GEMV_TOL, failures: gemv, seconds: (performance.now() - t0) / 1e3 };
    log(`gemv checks: ${JSON.stringify(out.gemvChecks)}`);
  }
  if (section('i8-checks')) {
    const t0 = performance.now();
    const i8: Record<string, unknown>[] = [];
    let i8Worst = 0;
    const i8All = i8Cases(ctx);
    for (const c of i8All) {
      try {
        const r = await runI8Case(ctx, c);
        i8Worst = Math.max(i8Worst, r.worst);
        const kernelOk = c.path === 'tc' ? /-tc-/.test(r.kernel) : r.kernel === 'quant-i8-matmul';
        if (!(r.worst <= 1) || !kernelOk) {
          failed++;
          i8.push({ ...r });
        }
      } catch (e) {
        failed++;
        i8.push({ name: `${c.path} ${c.M}x${c.N}x${c.K} ${c.tile ?? ''}`, error: (e as Error).message.slice(0, 600) });
      }
    }
    out.i8Checks = {
      i8Cases: i8All.length,
      i8TcCases: i8All.filter((c) => c.path === 'tc').length,
      i8WorstOverF32Rounding: i8Worst,
      i8Failures: i8,
      seconds: (performance.now() - t0) / 1e3,
    };
    // tensor-core failures: try the other offset unit of the int8 fragment loads (see i8Tuning.unit)
    if (i8.some((r) => String(r.name).startsWith('tc'))) {
      const first = i8Tuning.unit;
      i8Tuning.unit = first === 4 ? 1 : 4;
      let bad = 0;
      for (const c of i8All.filter((c) => c.path === 'tc'))
        try {
          if (!((await runI8Case(ctx, c)).worst <= 1)) bad++;
        } catch {
          bad++;
        }
      (out.i8Checks as Record<string, unknown>).otherUnit = { unit: i8Tuning.unit, tcFailures: bad };
      if (bad) i8Tuning.unit = first;
      else {
        // the other unit passes every tensor-core case: those failures were the unit's
        const tcFails = i8.filter((r) => String(r.name).startsWith('tc')).length;
        failed -= tcFails;
        (out.i8Checks as Record<string, unknown>).failuresWithFirstUnit = tcFails;
        (out.i8Checks as Record<string, unknown>).i8Failures = i8.filter((r) => !String(r.name).startsWith('tc'));
      }
    }
    log(`int8 checks: ${JSON.stringify(out.i8Checks)}`);
  }

  out.copy = await measureCopy(ctx);

  // weight memory of the 1.1B configuration
  if (section('memory')) {
    const h = quick ? 256 : 2048;
    const inter = quick ? 704 : 5632;
    const layers = quick ? 2 : 22;
    const kv = quick ? 32 : 256;
    const shapes: [number, number][] = [
      [h, h],
      [kv, h],
      [kv, h],
      [h, h],
      [inter, h],
      [inter, h],
      [h, inter],
    ];
    const src = new Map<string, DeviceTensor>();
    for (const [N, K] of shapes) if (!src.has(`${N}x${K}`)) src.set(`${N}x${K}`, upload(ctx, randomData(N * K, N + K, 0.02), [N, K], 'bf16'));
    const linearParams = layers * shapes.reduce((s, [N, K]) => s + N * K, 0);
    const embed = 2 * 32000 * h;
    const mem: Record<string, unknown> = { linearParams, f32Bytes: 4 * linearParams };
    for (const [name, spec] of SPECS) {
      await ctx.sync();
      const before = ctx.memory.live;
      const qs = [];
      for (let l = 0; l < layers; l++) for (const [N, K] of shapes) qs.push(quantize(ctx, src.get(`${N}x${K}`)!, spec));
      await ctx.sync();
      const bytes = ctx.memory.live - before;
      const exact = layers * shapes.reduce((t, [N, K]) => t + quantBytes(spec, N, K), 0);
      mem[name] = {
        bytes,
        exactBytes: exact,
        ratioLinearsExact: exact / (4 * linearParams),
        ratioLinears: bytes / (4 * linearParams),
        ratioWholeModel: (bytes + 2 * embed) / (4 * (linearParams + embed)),
      };
      for (const q of qs) releaseQuant(ctx, q);
      ctx.trimPool();
    }
    for (const t of src.values()) release(ctx, t);
    out.memory = mem;
    log(`memory: ${JSON.stringify(mem)}`);
  }

  // decode GEMV
  if (section('decode')) await decodeBench(ctx, out);
  if (section('gemv')) await gemvBench(ctx, out);
  if (section('placement')) await placementBench(ctx, out);

  // training shape
  if (section('training')) {
    const [M, N, K] = quick ? [256, 704, 256] : [4096, 5632, 2048];
    const flops = 2 * M * N * K;
    const w32 = upload(ctx, randomData(N * K, 3, 0.02), [N, K]);
    const w16 = upload(ctx, randomData(N * K, 3, 0.02), [N, K], 'f16');
    const x = upload(ctx, randomData(M * K, 4), [M, K]);
    const dy = upload(ctx, randomData(M * N, 5), [M, N]);
    const y = empty(ctx, [M, N]);
    const dx = empty(ctx, [M, K]);
    const mm = ['matmul-v0', 'matmul-v1', 'matmul-v4', 'matmul-v5'];
    const t32 = await gpuTime(ctx, mm, () => matmul(ctx, x, w32, { transB: true, out: y }));
    const t16 = await gpuTime(ctx, mm, () => matmul(ctx, x, w16, { transB: true, out: y }));
    const tb32 = await gpuTime(ctx, mm, () => matmul(ctx, dy, w32, { out: dx }));
    const rows: Record<string, unknown>[] = [{ format: 'f32-weight', fwdTflops: flops / t32 / 1e12, bwdTflops: flops / tb32 / 1e12 }, { format: 'f16-weight', fwdTflops: flops / t16 / 1e12 }];
    const all = ['dequant-matmul', 'dequant-dq-scales', 'dequant-weight', ...mm, 'matmul-tc'];
    for (const [name, spec] of SPECS) {
      const q = quantize(ctx, w32, spec);
      const wd = dequantize(ctx, q);
      const refF = await download(ctx, matmul(ctx, x, wd, { transB: true }));
      const refB = await download(ctx, matmul(ctx, dy, wd));
      for (const variant of ['tiled', 'dequant'] as const) {
        const tf = await gpuTime(ctx, all, () => quantLinear(ctx, x, q, { out: y, variant }));
        const errF = relErr(await download(ctx, y), refF);
        const tb = await gpuTime(ctx, all, () => quantLinearBackward(ctx, dy, q, dx, variant));
        const errB = relErr(await download(ctx, dx), refB);
        rows.push({ format: name, variant, fwdTflops: flops / tf / 1e12, bwdTflops: flops / tb / 1e12, fwdMs: tf * 1e3, bwdMs: tb * 1e3, relErrFwd: errF, relErrBwd: errB });
        log(`${variant} ${name}: fwd ${(flops / tf / 1e12).toFixed(2)} TFLOP/s, bwd ${(flops / tb / 1e12).toFixed(2)}`);
      }
      releaseQuant(ctx, q);
      release(ctx, wd);
    }
    out.tiled = { M, N, K, rows };
  }
  if (section('int8')) out.int8 = await int8Bench(ctx);
  // the probe last: the JSON so far goes to the log first, in case the probe does not return
  if (section('probe')) {
    log(`results before the int8 probe: ${JSON.stringify(out)}`);
    out.int8Probe = await int8Probe(ctx, configs);
  }
  out.failedChecks = failed;
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  if (failed) process.exitCode = 1;
  ctx.destroy();
}

/** Buffers the spin-up copies between (allocated once). */
let spinBufs: [DeviceTensor, DeviceTensor] | null = null;

/**
 * Keep the GPU busy with back-to-back 256 MiB copies for `ms` milliseconds of wall time. The H100 idles at a low
 * clock (345 MHz seen) and reaches its running clock only under sustained work: every timing below starts with
 * this, so that no measurement pays the ramp.
 */
async function spinUp(ctx: Context, ms: number): Promise<void> {
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
async function measureCopy(ctx: Context): Promise<{ bytes: number; GBps: number; kernel: Record<string, number>; bufferCopy: number }> {
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

/** Sum over shapes of log(time / the shape's best time): lower is better (a geometric-mean ranking). */
function rank(times: number[][]): number[] {
  const best = times[0]!.map((_, si) => Math.min(...times.map((t) => t[si]!)));
  return times.map((t) => t.reduce((s, v, si) => s + Math.log(v / best[si]!), 0));
}

/**
 * GPU time (s) per dispatch of GEMVs encoded back to back in one compute pass, timestamps at its start and end
 * (no pass per dispatch as under the profiler): `rounds` rounds over `list` (weights rotated over copies that
 * exceed the L2 cache several times). Each dispatch writes the same y, so consecutive ones are ordered as a
 * decode step's layers are (the barrier between them is part of the time). After a spin-up (`--spin-ms`, default
 * 150) ONE submission holds a warm-up pass (the same list for about `warmMs` of GPU time, untimed) and six timed
 * passes, so that the GPU never idles between them: with a submission and a read-back per timed pass (before
 * 2026-11-24's sixth session) nvidia-smi saw the clock drop to 345 MHz between them and one layout timed up to 4x
 * apart. The median of the last five passes (`min` the fastest, `spread` (max - min) / median).
 */
async function streamTime(ctx: Context, list: GemvDispatch[], rounds: number): Promise<{ t: number; min: number; spread: number }> {
  const dev = ctx.device;
  const passes = 6;
  const qs = dev.createQuerySet({ type: 'timestamp', count: 2 * passes });
  const res = dev.createBuffer({ size: 16 * passes, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const rd = dev.createBuffer({ size: 16 * passes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const ub = dev.createBuffer({ size: 256 * list.length, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  const u = new Uint32Array(64 * list.length);
  list.forEach((d, i) => u.set(d.params, 64 * i));
  dev.queue.writeBuffer(ub, 0, u);
  const bgs = list.map((d) =>
    dev.createBindGroup({
      layout: d.kernel.layout,
      entries: [{ binding: 0, resource: { buffer: ub, offset: 0, size: 256 } }, ...d.buffers.map((b, i) => ({ binding: i + 1, resource: { buffer: b.gpu } }))],
    }),
  );
  const encodeRounds = (pass: GPUComputePassEncoder, n: number) => {
    for (let r = 0; r < n; r++)
      list.forEach((d, i) => {
        pass.setPipeline(d.kernel.pipeline);
        pass.setBindGroup(0, bgs[i]!, [256 * i]);
        pass.dispatchWorkgroups(...d.workgroups);
      });
  };
  // the warm-up's length from one timed pass
  const timeOnce = async (): Promise<number> => {
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
    encodeRounds(pass, rounds);
    pass.end();
    enc.resolveQuerySet(qs, 0, 2, res, 0);
    enc.copyBufferToBuffer(res, 0, rd, 0, 16);
    dev.queue.submit([enc.finish()]);
    await rd.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(rd.getMappedRange().slice(0, 16));
    rd.unmap();
    return Number(t[1]! - t[0]!) / 1e9 / (rounds * list.length);
  };
  await spinUp(ctx, spinMs);
  const per = await timeOnce();
  const warmRounds = Math.min(2000, Math.max(1, Math.ceil(warmMs / 1e3 / (per * list.length))));
  const enc = dev.createCommandEncoder();
  const warm = enc.beginComputePass();
  encodeRounds(warm, warmRounds);
  warm.end();
  for (let p = 0; p < passes; p++) {
    const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * p, endOfPassWriteIndex: 2 * p + 1 } });
    encodeRounds(pass, rounds);
    pass.end();
  }
  enc.resolveQuerySet(qs, 0, 2 * passes, res, 0);
  enc.copyBufferToBuffer(res, 0, rd, 0, 16 * passes);
  dev.queue.submit([enc.finish()]);
  await rd.mapAsync(GPUMapMode.READ);
  const ts = new BigUint64Array(rd.getMappedRange().slice(0));
  rd.unmap();
  const times: number[] = [];
  for (let p = 1; p < passes; p++) times.push(Number(ts[2 * p + 1]! - ts[2 * p]!) / 1e9 / (rounds * list.length));
  for (const b of [qs, res, rd, ub]) b.destroy();
  times.sort((a, b) => a - b);
  const med = times[Math.floor(times.length / 2)]!;
  return { t: med, min: times[0]!, spread: (times[times.length - 1]! - times[0]!) / med };
}


/** A weight rotated over copies for timing: its dispatch list for x and y (under the current tuning). */
interface Rotated {
  bytes: number;
  /** Whether {@link timeRotated} has let the GPU settle since these weights were made. */
  settled?: boolean;
  plan: (x: DeviceTensor, y: DeviceTensor) => GemvDispatch[];
  free: () => void;
}

const copiesFor = (bytes: number) => Math.max(2, Math.min(64, Math.ceil((quick ? 1 << 24 : 400e6) / bytes)));

function rotatedQuant(ctx: Context, w16: DeviceTensor, spec: QuantSpec): Rotated & { qs: QuantTensor[] } {
  const [N, K] = w16.shape as [number, number];
  const l = quantLayout(spec, N, K);
  const qs = Array.from({ length: copiesFor(quantBytes(spec, N, K)) }, () => quantize(ctx, w16, spec));
  const sc = qs.map((q) => quantScales(ctx, q));
  // the bytes the GEMV kernel reads of W: codes and its scales as it reads them (double-quantized scales are
  // decoded to f32 by a separate dispatch first, not timed here)
  const scaleBytes = N * l.nb * (spec.doubleQuant || l.scaleDtype !== 'f16' ? 4 : 2);
  return {
    qs,
    bytes: N * l.wpr * 4 + scaleBytes,
    plan: (x, y) => qs.map((q, j) => quantGemvDispatch(ctx, x, q, sc[j]!.scales, y)),
    free: () => {
      for (const v of sc) if (v.owned) ctx.release(v.scales.buffer);
      for (const q of qs) releaseQuant(ctx, q);
    },
  };
}

function rotatedF16(ctx: Context, w16: DeviceTensor): Rotated {
  const [N, K] = w16.shape as [number, number];
  const ws = Array.from({ length: copiesFor(2 * N * K) }, () => copy(ctx, w16));
  return { bytes: 2 * N * K, plan: (x, y) => ws.map((w) => gemv16Dispatch(ctx, x, w, y)), free: () => release(ctx, ...ws) };
}

/** Time (s, median) per GEMV of M rows over a rotated weight, under the current tuning. */
async function timeRotated(ctx: Context, w: Rotated, M: number, K: number, N: number) {
  // the first timing after a shape's weights were uploaded and made can read up to 3x slow (H100, 2026-11-24,
  // sixth session: the sweep's first layout of each shape; in --placement the first of six timings of one kernel
  // with fresh X and Y, 55.8 / 41.4 / 19.0 / 19.0 ... us, and 41.6 / 19.0 / 19.0 ... after a second of other GPU
  // work): once per weight, a settling time of GPU work and one whole timing, thrown away
  if (!w.settled) {
    await spinUp(ctx, settleMs);
    w.settled = true;
    await timeRotated(ctx, w, M, K, N);
  }
  const x = upload(ctx, randomData(M * K, 9), [M, K]);
  const y = empty(ctx, [M, N]);
  const list = w.plan(x, y);
  const r = await streamTime(ctx, list, Math.max(2, Math.ceil(150 / list.length)));
  release(ctx, x, y);
  return r;
}

/** The decode GEMV section (see the header). */
async function gemvBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copyGBps = (out.copy as { GBps: number }).GBps;
  const int4 = quantSpec('int4', 64);
  const t0 = performance.now();
  // sweep: the layouts of each class of row counts (M = 1, 4, 16), int4/64 and f16 weights
  const bigShapes: [number, number][] = quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [2048, 5632]];
  const sweepOf = async (kind: 'int4' | 'f16', cls: GemvClass, M: number, shapes: [number, number][]) => {
    // every swept layout on every shape (the small-weight layout of one row off meanwhile)
    const small = gemvTuning.oneSmall;
    gemvTuning.oneSmall = undefined;
    const layouts = GEMV_SWEEP_LAYOUTS[cls].filter((v) => !failedLayouts.has(gemvLayoutName(v)));
    const times: number[][] = layouts.map(() => []);
    for (const [N, K] of shapes) {
      const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
      const w = kind === 'int4' ? rotatedQuant(ctx, w16, int4) : rotatedF16(ctx, w16);
      for (const [vi, v] of layouts.entries()) {
        (kind === 'int4' ? gemvTuning : gemvTuning.float)[cls] = { ...v };
        times[vi]!.push((await timeRotated(ctx, w, M, K, N)).t * 1e6);
      }
      w.free();
      release(ctx, w16);
      ctx.trimPool();
    }
    gemvTuning.oneSmall = small;
    const r = rank(times);
    const best = layouts[r.indexOf(Math.min(...r))]!;
    (kind === 'int4' ? gemvTuning : gemvTuning.float)[cls] = { ...best };
    const res = { M, shapes, chosen: gemvLayoutName(best), us: Object.fromEntries(layouts.map((v, vi) => [gemvLayoutName(v), times[vi]!.map((t) => +t.toFixed(2))])) };
    log(`gemv sweep ${kind} ${cls}: chosen ${res.chosen}; ${JSON.stringify(res.us)}`);
    return res;
  };
  if (args.includes('--no-sweep')) out.gemvSweep = { skipped: true, tuning: gemvTuningCopy() };
  else {
    // --sweep=int4One,int4Few,... sweeps only those (default: all six)
    const classes = args.find((a) => a.startsWith('--sweep='))?.slice(8).split(',');
    const run = async (name: string, f: () => ReturnType<typeof sweepOf>) => (!classes || classes.includes(name) ? await f() : undefined);
    const sweep = {
      int4One: await run('int4One', () => sweepOf('int4', 'one', 1, bigShapes)),
      int4Few: await run('int4Few', () => sweepOf('int4', 'few', 4, bigShapes)),
      int4Many: await run('int4Many', () => sweepOf('int4', 'many', 16, bigShapes.slice(0, 3))),
      f16One: await run('f16One', () => sweepOf('f16', 'one', 1, bigShapes.slice(0, 3))),
      f16Few: await run('f16Few', () => sweepOf('f16', 'few', 4, bigShapes.slice(0, 3))),
      f16Many: await run('f16Many', () => sweepOf('f16', 'many', 16, bigShapes.slice(0, 2))),
      chosen: gemvTuningCopy(),
      seconds: (performance.now() - t0) / 1e3,
    };
    out.gemvSweep = sweep;
    log(`gemv sweep chosen: ${JSON.stringify(sweep.chosen)} (${sweep.seconds.toFixed(0)} s)`);
  }

  // the decode table: f16 GEMV, f16 matmul and each quantized format at 1, 4 and 16 rows
  const shapes: [number, number][] = quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [5632, 2048], [2048, 5632], [2048, 2048], [256, 2048]];
  const Ms = [1, 4, 16];
  const rows: Record<string, Record<string, unknown>>[] = [];
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const byM: Record<string, Record<string, unknown>>[] = Ms.map((M) => ({ shape: { N, K, M } }));
    const f16 = rotatedF16(ctx, w16);
    for (const [mi, M] of Ms.entries()) {
      const { t, spread } = await timeRotated(ctx, f16, M, K, N);
      const read = f16.bytes + 4 * M * K;
      byM[mi]!.f16Gemv = { us: t * 1e6, spread, GBps: read / t / 1e9, ofCopy: read / t / 1e9 / copyGBps };
      const x = upload(ctx, randomData(M * K, 9), [M, K]);
      const y = empty(ctx, [M, N]);
      const tM = await gpuTime(ctx, ['matmul'], () => matmul(ctx, x, w16, { transB: true, out: y }));
      byM[mi]!.f16Matmul = { us: tM * 1e6 };
      release(ctx, x, y);
    }
    f16.free();
    for (const [name, spec] of SPECS) {
      const q = rotatedQuant(ctx, w16, spec);
      for (const [mi, M] of Ms.entries()) {
        const { t, spread } = await timeRotated(ctx, q, M, K, N);
        const read = q.bytes + 4 * M * K;
        const x = upload(ctx, randomData(M * K, 9), [M, K]);
        const y = empty(ctx, [M, N]);
        quantLinear(ctx, x, q.qs[0]!, { out: y, variant: 'gemv' });
        const ref = matmul(ctx, x, dequantize(ctx, q.qs[0]!), { transB: true });
        const err = relErr(await download(ctx, y), await download(ctx, ref));
        release(ctx, x, y, ref);
        const tG = (byM[mi]!.f16Gemv as { us: number }).us / 1e6;
        byM[mi]![name] = { us: t * 1e6, spread, bytesRead: read, GBps: read / t / 1e9, ofCopy: read / t / 1e9 / copyGBps, vsF16Gemv: tG / t, relErrVsDequantMatmul: err };
      }
      q.free();
    }
    for (const r of byM) log(`gemv ${JSON.stringify(r)}`);
    rows.push(...byM);
    release(ctx, w16);
    ctx.trimPool();
  }
  // leave a stage out (results wrong, times only): where the int4 kernel's time goes at one row
  const probes: Record<string, unknown>[] = [];
  for (const [N, K] of quick ? [[256, 512]] : [[4096, 4096], [14336, 4096]]) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const q = rotatedQuant(ctx, w16, int4);
    for (const probe of [undefined, 'no-x', 'no-deq'] as const) {
      gemvTuning.probe = probe;
      probes.push({ N, K, probe: probe ?? 'none', us: (await timeRotated(ctx, q, 1, K, N)).t * 1e6 });
    }
    gemvTuning.probe = undefined;
    q.free();
    release(ctx, w16);
  }
  log(`gemv probes: ${JSON.stringify(probes)}`);
  // the yardstick: the best copy of the process, before or after (the first ran at 2.5 TB/s, the last at 3.0 on
  // 2026-11-24: the clock had not finished ramping); every fraction against it
  const copyAfter = await measureCopy(ctx);
  const yardstick = Math.max(copyGBps, copyAfter.GBps);
  for (const r of rows) for (const v of Object.values(r)) if ('GBps' in v && typeof v.GBps === 'number') (v as { ofCopy: number }).ofCopy = v.GBps / yardstick;
  out.gemv = { copyGBps: yardstick, copyBefore: copyGBps, copyAfter, rows, probes, seconds: (performance.now() - t0) / 1e3 };
}

/** The decode section (see the header). */
async function decodeBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copy = out.copy as { GBps: number };
  const t0 = performance.now();
  const shapes: [number, number][] = quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [2048, 5632], [256, 2048]];
  const saved = { decode: gemvTuning.decode, probe: gemvTuning.probe };
  const rows: Record<string, unknown>[] = [];
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const f16 = rotatedF16(ctx, w16);
    const q = rotatedQuant(ctx, w16, quantSpec('int4', 64));
    for (const M of [1, 4]) {
      const row: Record<string, unknown> = { N, K, M };
      const tF = (await timeRotated(ctx, f16, M, K, N)).t;
      row.f16 = { us: tF * 1e6, ofCopy: (f16.bytes + 4 * M * K) / tF / 1e9 / copy.GBps };
      for (const [name, decode, probe] of [['shift', 'shift'], ['mask', 'mask'], ['mask no-deq', 'mask', 'no-deq'], ['mask no-x', 'mask', 'no-x']] as const) {
        gemvTuning.decode = decode;
        gemvTuning.probe = probe;
        const { t, spread } = await timeRotated(ctx, q, M, K, N);
        const read = q.bytes + 4 * M * K;
        row[name] = { us: +(t * 1e6).toFixed(2), spread: +spread.toFixed(3), ofCopy: +(read / t / 1e9 / copy.GBps).toFixed(3), vsF16: +(tF / t).toFixed(3) };
      }
      gemvTuning.decode = saved.decode;
      gemvTuning.probe = saved.probe;
      log(`decode ${JSON.stringify(row)}`);
      rows.push(row);
    }
    q.free();
    f16.free();
    release(ctx, w16);
    ctx.trimPool();
  }
  out.decode = { copyGBps: copy.GBps, layouts: { one: gemvTuning.one, few: gemvTuning.few }, rows, seconds: (performance.now() - t0) / 1e3 };
}

/** The placement section (see the header). */
async function placementBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const res: Record<string, unknown>[] = [];
  for (const [N, K] of quick ? [[256, 512]] : [[14336, 4096], [4096, 4096]]) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    for (const kind of ['int4', 'f16'] as const) {
      const make = () => (kind === 'int4' ? rotatedQuant(ctx, w16, quantSpec('int4', 64)) : rotatedF16(ctx, w16));
      let w = make();
      const freshXY: number[] = [];
      for (let i = 0; i < 6; i++) freshXY.push(+((await timeRotated(ctx, w, 1, K, N)).t * 1e6).toFixed(2));
      w.free();
      const freshW: number[] = [];
      for (let i = 0; i < 3; i++) {
        w = make();
        freshW.push(+((await timeRotated(ctx, w, 1, K, N)).t * 1e6).toFixed(2));
        w.free();
        ctx.trimPool();
      }
      const r = { N, K, kind, bytes: w.bytes, freshXY, freshW };
      log(`placement ${JSON.stringify(r)}`);
      res.push(r);
    }
    release(ctx, w16);
    ctx.trimPool();
  }
  out.placement = res;
}

/** The int8 section (see the header). */
async function int8Bench(ctx: Context): Promise<Record<string, unknown>> {
  const S = quick ? 256 : 4096;
  const flops = 2 * S * S * S;
  const res: Record<string, unknown> = { shape: [S, S, S], plan: contextI8Plan(ctx), unit: i8Tuning.unit };
  const w = quantize(ctx, upload(ctx, randomData(S * S, 3, 0.05), [S, S]), quantSpec('int8', 0));
  const x = upload(ctx, randomData(S * S, 4), [S, S]);
  const a = quantizeRowsI8(ctx, x);
  const y = empty(ctx, [S, S]);
  const tP = await gpuTime(ctx, ['quant-i8-matmul'], () => int8Matmul(ctx, a, w, { out: y, path: 'portable' }));
  const yPortable = await download(ctx, y);
  res.portable = { ms: tP * 1e3, TOPS: flops / tP / 1e12 };
  log(`int8 portable: ${(flops / tP / 1e12).toFixed(1)} TOPS`);
  const plan = contextI8Plan(ctx);
  if ('frag' in plan) {
    const tiles: Record<string, unknown> = {};
    for (const [name, tile] of Object.entries(I8_TILES)) {
      if (i8TileProblem(tile, plan, ctx.info.limits)) continue;
      try {
        int8Matmul(ctx, a, w, { out: y, tile });
        await i8TensorCoresReady(ctx);
        const fails = [...i8TcFailures(ctx)].map(([k, e]) => `${k}: ${e.message.slice(0, 400)}`);
        if (fails.length) {
          tiles[name] = { error: fails };
          continue;
        }
        poison(ctx, y);
        const t = await gpuTime(ctx, ['quant-i8-matmul-tc'], () => int8Matmul(ctx, a, w, { out: y, path: 'tc', tile }));
        const got = await download(ctx, y);
        let diff = 0;
        for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i]! - yPortable[i]!));
        tiles[name] = { ms: t * 1e3, TOPS: flops / t / 1e12, maxAbsDiffVsPortable: diff };
        log(`int8 tc ${name}: ${(flops / t / 1e12).toFixed(1)} TOPS, max |diff| vs portable ${diff}`);
      } catch (e) {
        tiles[name] = { error: (e as Error).message.slice(0, 400) };
      }
    }
    res.tensorCores = tiles;
    const tL = await gpuTime(ctx, ['quant-rows-i8', 'quant-i8-matmul-tc'], () => int8Linear(ctx, x, w, { out: y }));
    res.int8LinearWithRowQuantization = { ms: tL * 1e3, TOPS: flops / tL / 1e12, kernel: lastI8Kernel.get(ctx) };
  }
  const a16 = upload(ctx, randomData(S * S, 1), [S, S], 'f16');
  const b16 = upload(ctx, randomData(S * S, 2), [S, S], 'f16');
  const c32 = empty(ctx, [S, S]);
  const t16 = await gpuTime(ctx, ['matmul'], () => matmul(ctx, a16, b16, { transB: true, out: c32 }));
  res.f16MatmulTflops = flops / t16 / 1e12;
  res.f16MatmulPath = matmulPath(ctx, 'f16', 'f16');
  log(`f16 matmul: ${(flops / t16 / 1e12).toFixed(1)} TFLOP/s`);
  release(ctx, a16, b16, c32, x, y, a.codes, a.scales);
  releaseQuant(ctx, w);
  return res;
}

/**
 * The int8 tensor-core probe (shaders/quant-i8-probe.wgsl) at 4096^3 beside the f16 `matmul` of the same shape:
 * TOPS, and a sampled check of the i32 results against the host. Any failure is reported, not thrown.
 */
async function int8Probe(ctx: Context, configs: Record<string, unknown>[]): Promise<unknown> {
  const cfg = configs.find((c) => c.componentType === 'i8' && c.resultComponentType === 'i32');
  if (!cfg) return { available: false, reason: 'the adapter offers no i8 -> i32 subgroup-matrix configuration' };
  const S = quick ? 256 : 4096;
  const res: Record<string, unknown> = { available: true, config: cfg, shape: [S, S, S] };
  try {
    const [SM, SN, SK] = [Number(cfg.M), Number(cfg.N), Number(cfg.K)];
    const SG = ctx.info.subgroupSizes?.max ?? 32;
    const r = rng(5);
    const a8 = new Int8Array(S * S).map(() => Math.floor(r() * 255) - 127);
    const b8 = new Int8Array(S * S).map(() => Math.floor(r() * 255) - 127);
    const a = uploadBytes(ctx, a8, [S, S / 4], 'i32');
    const b = uploadBytes(ctx, b8, [S, S / 4], 'i32');
    const c = empty(ctx, [S, S], 'i32');
    const k = await ctx.compile({
      name: 'quant-i8-probe',
      code:
        `const SM: u32 = ${SM}u;\nconst SN: u32 = ${SN}u;\nconst SK: u32 = ${SK}u;\nconst SG: u32 = ${SG}u;\n` +
        `alias Lm = subgroup_matrix_left<i8, ${SK}, ${SM}>;\nalias Rm = subgroup_matrix_right<i8, ${SN}, ${SK}>;\n` +
        `alias Acc = subgroup_matrix_result<i32, ${SN}, ${SM}>;\n` +
        i8ProbeWgsl,
      bindings: [
        { name: 'a', access: 'read', dtype: 'i32' },
        { name: 'b', access: 'read', dtype: 'i32' },
        { name: 'c', access: 'rw', dtype: 'i32' },
      ],
      params: ['u32:M', 'u32:N', 'u32:K'],
      enables: ['subgroups', 'chromium_experimental_subgroup_matrix'],
    });
    const run = () => ctx.dispatch(k, [a.buffer, b.buffer, c.buffer], [S / SN, S / SM, 1], [S, S, S]);
    const t = await gpuTime(ctx, ['quant-i8-probe'], run);
    const got = (await download(ctx, c)) as Int32Array;
    let bad = 0;
    const rr = rng(9);
    for (let s = 0; s < 64; s++) {
      const i = Math.floor(rr() * S);
      const j = Math.floor(rr() * S);
      let want = 0;
      for (let x = 0; x < S; x++) want += a8[i * S + x]! * b8[j * S + x]!;
      if (got[i * S + j] !== want) bad++;
    }
    res.tops = (2 * S * S * S) / t / 1e12;
    res.ms = t * 1e3;
    res.sampledMismatches = bad;
    release(ctx, a, b, c);
  } catch (e) {
    res.error = String((e as Error).message ?? e).slice(0, 500);
  }
  try {
    const a16 = upload(ctx, randomData(S * S, 1), [S, S], 'f16');
    const b16 = upload(ctx, randomData(S * S, 2), [S, S], 'f16');
    const c32 = empty(ctx, [S, S]);
    const t = await gpuTime(ctx, ['matmul'], () => matmul(ctx, a16, b16, { transB: true, out: c32 }));
    res.f16MatmulTflops = (2 * S * S * S) / t / 1e12;
    release(ctx, a16, b16, c32);
  } catch (e) {
    res.f16Error = String((e as Error).message ?? e).slice(0, 300);
  }
  return res;
}

main().catch((e) => {
  process.stderr.write(`quant-bench: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
