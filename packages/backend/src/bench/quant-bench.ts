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
 *   of X on int4/64 and f16 weights: the chosen tuning is the best geometric mean; last, the probes
 *   (`gemvTuning.probe`: the int4 one-row kernel with a stage left out, and `limbs`, the
 *   integer int4 GEMV on X as int8 limbs; times only) on 4096^2, 14336 x 4096 and 28672 x 4096 (or the `--gemv-shapes`);
 *   `--probes-only` skips the table, `--probe-layouts=r8t128cw2,...` times the kernel and `limbs` under each
 *   one-row layout (rows, threads, chunk words) instead;
 * - `decode` (`--decode`): the int4/64 GEMV at 1 and 4 rows under the current layouts, decoded both ways
 *   (`gemvTuning.decode` 'shift' and 'mask'), with the stage-leaving probes (no decoding, X as ones) and the f16
 *   GEMV beside it, on the 7B decode shapes and a small one (the per-dispatch floor);
 * - `placement` (`--placement`, after `--gemv` where both run, so under its chosen layouts): one int4/64 and one
 *   f16 GEMV at one row timed again and again, with fresh X and Y buffers each time (same weights) and with fresh
 *   weights: how much a timing depends on where the buffers landed;
 * - `read-floor` (`--read-floor`): the fastest kernel that only reads the bytes of each decode shape's int4 GEMV,
 *   timed the same way (`readFloorBench`): the ceiling any GEMV reading those bytes can reach here;
 *   `--gemv-shapes=NxK,...` replaces the weight shapes of the GEMV sweep and of both tables (`gemv` and `read-floor`);
 * - `parts` (`--parts`): a 7B layer's q/k/v and gate/up at one row, one GEMV dispatch per weight against one
 *   `gemvParts` dispatch per group, int4/64 and f16 (`partsBench`);
 * - `int8` (`--int8`): int8 x int8 TOPS at 4096^3 (each tensor-core tile, the portable kernel, and int8Linear with
 *   the row quantization) beside the f16 tensor-core `matmul` TFLOP/s of the same shape;
 * - `memory` (`--memory`), `tiled` (`--training`): as measured before (docs/PERFORMANCE.md).
 * The GEMV sections live in quant-bench-gemv.ts, what every section shares in quant-bench-common.ts.
 *
 *   bash .gpu/run.sh quant-bench [--quick] [--reps=N] [--spin-ms=150] [--warm-ms=100] [--settle-ms=1000] [--no-sweep | --sweep=int4One,int4Few,int4Many,f16One,f16Few,f16Many] [--checks | --gemv-checks | --i8-checks] [--trace-cases] [--gemv] [--decode] [--placement] [--read-floor] [--parts] [--gemv-shapes=28672x4096,...] [--probes-only] [--probe-layouts=r8t128cw2,...] [--int8] [--all]
 */
import i8ProbeWgsl from '../../../../shaders/quant-i8-probe.wgsl';
import { createContext, type Context } from '../context';
import { matmul, matmulPath } from '../ops/core/matmul';
import { quantBytes, quantSpec } from '../ops/quant/formats';
import type { GemvSetting } from '../ops/quant/gemv';
import { GEMV_TOL, gemvCaseName, gemvGpuCases, gemvLayoutName, runGemvCase } from '../ops/quant/gemv.cases';
import { contextI8Plan, I8_TILES, i8Tuning, i8TcFailures, i8TensorCoresReady, i8TileProblem, int8Linear, int8Matmul, lastI8Kernel, quantizeRowsI8 } from '../ops/quant/int8-linear';
import { i8Cases, runI8Case } from '../ops/quant/int8-linear.cases';
import { quantLinear, quantLinearBackward } from '../ops/quant/qmatmul';
import { dequantize, quantize, releaseQuant } from '../ops/quant/quantize';
import { download, empty, poison, release, upload, uploadBytes, type DeviceTensor } from '../tensor';
import { relErr, rng } from '../testing';
import { args, failedLayouts, gpuTime, log, measureCopy, quick, randomData, reps, SPECS } from './quant-bench-common';
import { decodeBench, gemvBench, partsBench, placementBench, readFloorBench } from './quant-bench-gemv';

const flag = (n: string) => args.includes(`--${n}`) || args.includes('--all');
const only = ['checks', 'gemv-checks', 'i8-checks', 'gemv', 'decode', 'placement', 'read-floor', 'parts', 'int8', 'memory', 'training', 'probe'].some((n) => args.includes(`--${n}`));
const section = (n: string) => flag(n) || (n.endsWith('-checks') && flag('checks')) || (!only && ['gemv-checks', 'i8-checks', 'gemv', 'int8'].includes(n));

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
      // --trace-cases: each case's name before it runs (to find the one a crash of the process stopped at)
      if (args.includes('--trace-cases')) log(`gemv check: ${gemvCaseName(c)}`);
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
  if (section('read-floor')) await readFloorBench(ctx, out);
  if (section('parts')) await partsBench(ctx, out);

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
