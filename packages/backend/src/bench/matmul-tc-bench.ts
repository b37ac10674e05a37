/**
 * Tensor-core matmul on the GPU machine (a program, not a test): first the correctness checks that
 * `ops/core/matmul-tc.test.ts` runs under vitest (every layout, batches, odd sizes, epilogues, every tile,
 * and the pipeline-creation regression), then TFLOP/s per tile and layout beside the portable f32 kernel,
 * then LoRA's skinny products (tokens x hidden x r and its transposes). Prints ONE JSON object; exits 1 when a
 * check fails. PyTorch's side of the same shapes: `python3 matmul_torch.py` (same folder).
 *
 *   bash .gpu/run.sh matmul-tc-bench [--no-check] [--no-bench] [--cases=TEXT] [--reps=N] [--tiles=t128x128,t64x64] [--no-direct]
 *                                    [--unroll]   (tcTuning.unroll: named accumulators instead of indexed arrays)
 *       --cases=TEXT runs only the check cases whose JSON contains TEXT (e.g. f32Image; not the pipeline sequence)
 *   bash .gpu/run.sh matmul-tc-bench --probe   # pipeline-creation diagnosis: each variant in its own process
 *   bash .gpu/run.sh matmul-tc-bench --sweep[=v1,v2,...] [--ablate=t128x256k16,v2] [--shapes=4096] [--reps=20]
 *       every kernel variant of TC_TILES (and timing ablations of the variants named) over
 *       4096^3, 8192x2048x5632 and 8192x5632x2048 in NN / NT / TN (--layouts=NT,TN: a subset): TFLOP/s and the largest relative error of
 *       sampled outputs against float64 per variant; the table comes last on stdout. `--shapes=2048` the 1.1B
 *       LoRA step's products instead (2048 tokens), with an unchunked 32000-vocab LM head and a 7B projection. 'auto' is what matmul picks (with wave planning and split
 *       tails where the adapter's compute units are known: `RUSTY_COMPUTE_UNITS` overrides), 'auto0' the same
 *       without any of it, 'auto-notail' / 'auto-novia' / 'auto-neither' without split tails / without x W^T through TN
 *       (tcViaTN) / without both, 'auto-via' with every x W^T it can take through TN, 'auto-two' with its
 *       transposes in two dispatches (tcTuning.viaPair off); 'v65+tail' a tile with its tail
 *       split where it can be. --via-tn=MARGIN sets tcTuning.viaTN's margin (see tcViaTN) for the whole
 *       run, --via-tn=off turns the model off.
 */
import { spawnSync } from 'node:child_process';
import probeWgsl from '../../../../shaders/matmul-tc-probe.wgsl';
import { createContext, type Context } from '../context';
import { matmul, type MatmulOptions } from '../ops/core/matmul';
import { computeUnits } from '../compute-units';
import { contextTcPlan, TC_TILES, tcFailures, tcTileProblem, tcTuning, tcWave, tensorCoresReady, type TcTile, type TcTileName, type TensorCorePlan } from '../ops/core/matmul-tc';
import { pipelineSequence, runTcCase, TC_TOL, tcCases, type TcResult } from '../ops/core/matmul-tc.cases';
import { download, empty, poison, release, upload, type DeviceTensor } from '../tensor';
import { randn, relErr, rng } from '../testing';

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(`--${name}`);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const log = (s: string) => process.stderr.write(s + '\n');

/** Uniform values in [-1, 1] on a 2^-11 grid: exact in f16, so the f16 upload and the f32 copy hold the same
 *  numbers and the float64 reference of a sampled output needs no rounding model. */
function randomData(n: number, seed: number): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (Math.floor(r() * 4096) - 2048) / 2048;
  return x;
}

/** GPU time (s) of one call of f: the sum over its kernels of the profiler's mean per call, each kernel's
 *  'name: us per call', and the wall time between two syncs over `reps` calls. */
async function timeOf(gpu: Context, f: () => void, reps: number): Promise<{ s: number; wall: number; kernels: string[] }> {
  f();
  await tensorCoresReady(gpu); // tensor-core kernels are checked asynchronously on first use
  for (let i = 0; i < 2; i++) f();
  await gpu.sync();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) f();
  await gpu.sync();
  const wall = (performance.now() - t0) / 1e3 / reps;
  if (!gpu.profiler.enabled) return { s: wall, wall, kernels: [] };
  gpu.profiler.reset();
  for (let i = 0; i < reps; i++) f();
  await gpu.sync();
  const sum = await gpu.profiler.summary();
  return { s: sum.reduce((a, e) => a + e.totalMs, 0) / reps / 1e3, wall, kernels: sum.map((e) => `${e.name}: ${((e.totalMs * 1e3) / reps).toFixed(1)}`) };
}

/** One probe variant, in this process: prints {ok, relErr | error}. */
async function child(variant: string): Promise<void> {
  const ctx = await createContext();
  const plan = contextTcPlan(ctx);
  if (!('frag' in plan)) throw new Error(`no tensor cores: ${plan.reason}`);
  if (variant.startsWith('minimal')) {
    const p = plan as TensorCorePlan;
    const { M: SM, N: SN, K: SK } = p.frag;
    const over = variant === 'minimal-override';
    const code =
      `const SM: u32 = ${SM}u;\nconst SN: u32 = ${SN}u;\nconst SK: u32 = ${SK}u;\nconst SG: u32 = ${p.subgroupSize}u;\n` +
      `alias Lm = subgroup_matrix_left<f16, ${SK}, ${SM}>;\nalias Rm = subgroup_matrix_right<f16, ${SN}, ${SK}>;\n` +
      `alias Acc = subgroup_matrix_result<f32, ${SN}, ${SM}>;\n` +
      (over ? 'override PROBE: u32 = 1u;\n' : 'const PROBE: u32 = 0u;\n') +
      probeWgsl;
    const k = ctx.kernel({
      name: `tc-probe-${variant}`,
      code,
      bindings: [
        { name: 'a', access: 'read', dtype: 'f32' },
        { name: 'b', access: 'read', dtype: 'f32' },
        { name: 'c', access: 'rw', dtype: 'f32' },
      ],
      enables: ['f16', 'chromium_experimental_subgroup_matrix'],
      ...(over ? { constants: { PROBE: 0 } } : {}),
    });
    const av = randn(SM * SK, 1).map((x) => Math.fround(x));
    const bv = randn(SK * SN, 2);
    const a = upload(ctx, av, [SM * SK]);
    const b = upload(ctx, bv, [SK * SN]);
    const c = empty(ctx, [SM * SN]);
    poison(ctx, c);
    ctx.dispatch(k, [a.buffer, b.buffer, c.buffer], 1);
    const got = await download(ctx, c);
    const { roundTo } = await import('../ops/core/core.ref');
    const a16 = roundTo('f16', av);
    const b16 = roundTo('f16', bv);
    const want = new Float64Array(SM * SN);
    for (let m = 0; m < SM; m++) for (let n = 0; n < SN; n++) for (let q = 0; q < SK; q++) want[m * SN + n]! += a16[m * SK + q]! * b16[q * SN + n]!;
    console.log(JSON.stringify({ variant, ok: relErr(got, want) < TC_TOL, relErr: relErr(got, want) }));
  } else if (variant === 'invalid-compile') {
    // a subgroup-matrix kernel that breaks the uniformity rule (offsets from lid / SG), checked through
    // ctx.compile as matmulTc does: must come back as a ShaderError, not abort the process
    const p = plan as TensorCorePlan;
    const { tcSource, tcKernelDef } = await import('../ops/core/matmul-tc');
    const code = tcSource(p, TC_TILES.t64x64, false, false)
      .replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_size) sgs_: u32')
      .replace('@builtin(subgroup_invocation_id) lane: u32) {\n', '@builtin(subgroup_invocation_id) lane: u32) {\n  let sg = lid / SG;\n');
    let error = '';
    try {
      await ctx.compile({ name: 'tc-invalid', ...tcKernelDef(code) });
    } catch (e) {
      error = (e as Error).message.slice(0, 300);
    }
    // the context still works afterwards
    const r = await runTcCase(ctx, { M: 64, N: 64, K: 64 });
    console.log(JSON.stringify({ variant, ok: !!error && r.relErr < TC_TOL, shaderError: error, after: r.relErr }));
  } else {
    if (variant === 'full-nodirect') tcTuning.direct = false;
    const r1 = await runTcCase(ctx, { M: 128, N: 128, K: 128 });
    const r2 = await runTcCase(ctx, { M: 65, N: 130, K: 33, transB: true });
    console.log(JSON.stringify({ variant, ok: r1.relErr < TC_TOL && r2.relErr < TC_TOL, relErr: [r1.relErr, r2.relErr] }));
  }
  ctx.destroy();
}

/** Run each probe variant in a child process (a crash ends only that child) and report how each ended. */
function probe(): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  for (const [variant, safe] of [
    ['minimal', false],
    ['minimal-override', false],
    ['minimal-override', true],
    ['full', false],
    ['full', true],
    ['full-nodirect', false],
    ['invalid-compile', false],
  ] as const) {
    const r = spawnSync(process.execPath, [process.argv[1]!, `--child=${variant}`], {
      env: { ...process.env, ...(safe ? { RUSTY_SAFE: '1' } : {}) },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const row = { variant, safe, status: r.status, signal: r.signal, stdout: r.stdout.trim().slice(-400), stderr: r.stderr.trim().slice(-400) };
    log(JSON.stringify(row));
    rows.push(row);
  }
  return rows;
}

/**
 * The variant sweep: each variant of TC_TILES (or --sweep=names) and the ablations, over the three products in
 * NN / NT / TN. Three passes, so that no compile or host work idles the GPU just before a timing (on
 * 2026-11-24 the H200 idled at 345 MHz and timings taken right after a compile or a 184 MB read-back varied 2-3x
 * for the same pipeline): (1) every pipeline is built first; (2) each timing follows at least `SPIN_MS` of
 * back-to-back runs of the same product, then `reps` runs timed by the wall clock between two syncs and `reps`
 * more by the profiler; (3) a correctness pass: NaN-poisoned output, one run, `SAMPLES` outputs against float64
 * (relative to the largest sampled reference value) per variant, shape and layout.
 */
async function sweep(names: string[]): Promise<{ rows: Record<string, unknown>[]; table: Record<string, unknown> }> {
  const gpu = await createContext({ profile: true });
  const plan = contextTcPlan(gpu);
  if (!('frag' in plan)) throw new Error(`no tensor cores: ${plan.reason}`);
  const reps = Number(opt('reps') ?? 20);
  // the 1.1B LoRA step's products (2048 tokens) and two more 2048-token shapes only with --shapes=2048
  const shapes = ([
    [4096, 4096, 4096],
    [8192, 2048, 5632],
    [8192, 5632, 2048],
    [2048, 2048, 2048],
    [2048, 5632, 2048],
    [2048, 2048, 5632],
    [2048, 256, 2048],
    [2048, 32000, 2048], // the LM head at 2048 tokens (not the step's: its loss runs the head in 256-row chunks)
    [2048, 4096, 4096], // a 7B projection at 2048 tokens
  ] as [number, number, number][]).filter(([M]) => (opt('shapes') ? opt('shapes')!.split(',').includes(String(M)) : M !== 2048));
  const maxEl = Math.max(...shapes.flatMap(([M, N, K]) => [M * K, N * K, M * N]));
  const hostA = randomData(maxEl, 1);
  const hostB = randomData(maxEl, 2);
  const A16 = upload(gpu, hostA, [maxEl], 'f16');
  const B16 = upload(gpu, hostB, [maxEl], 'f16');
  const C = empty(gpu, [maxEl]);
  const view = (t: DeviceTensor, shape: number[]): DeviceTensor => ({ buffer: t.buffer, dtype: t.dtype, shape });
  const variants: [string, Variant][] = names.map((n) => [n, variantOf(n)]);
  log(JSON.stringify({ device: gpu.info.device, description: gpu.info.description, computeUnits: computeUnits(gpu.info), wave: tcWave(gpu), viaTN: tcTuning.viaTN }));
  for (const v of opt('ablate')?.split(',') ?? [])
    for (const ablate of ['nomma', 'nostage', 'nostore'] as const) variants.push([`${v}-${ablate}`, { tile: { ...TC_TILES[v as TcTileName], ablate } }]);
  const layouts = opt('layouts')?.split(',') ?? ['NN', 'NT', 'TN'];
  if (!layouts.every((x) => ['NN', 'NT', 'TN'].includes(x))) throw new Error(`matmul-tc-bench: --layouts takes NN, NT, TN, not '${opt('layouts')}'`);
  const product = (v: Variant, M: number, N: number, K: number, layout: string) => {
    const transA = layout[0] === 'T';
    const transB = layout[1] === 'T';
    const a = view(A16, transA ? [K, M] : [M, K]);
    const b = view(B16, transB ? [N, K] : [K, N]);
    const c = view(C, [M, N]);
    return () => {
      const { units, tail, viaTN, viaPair } = tcTuning;
      if (v.two) tcTuning.viaPair = false;
      if (v.noWaves) tcTuning.units = null;
      if (v.noTail) tcTuning.tail = false;
      if (v.noViaTN) tcTuning.viaTN = null;
      try {
        matmul(gpu, a, b, { transA, transB, out: c, tensorCores: true, tcTile: v.tile, tcTail: v.tail, tcViaTN: v.viaTN });
      } finally {
        Object.assign(tcTuning, { units, tail, viaTN, viaPair });
      }
    };
  };
  const fits = (v: Variant, layout: string) => !v.tile || !tcTileProblem(v.tile, plan, gpu.info.limits, layout[0] === 'T', layout[1] === 'T');
  // (1) build every pipeline (auto's tile depends on the shape)
  const t0 = performance.now();
  for (const [, v] of variants)
    for (const [M, N, K] of shapes)
      for (const layout of layouts)
        if (fits(v, layout))
          try {
            product(v, M, N, K, layout)();
          } catch (e) {
            if (!/not ready/.test((e as Error).message)) throw e;
          }
  await tensorCoresReady(gpu);
  log(`pipelines built in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
  const failed = new Set([...tcFailures(gpu)].map(([k]) => k));
  const rows: Record<string, unknown>[] = [];
  const table: Record<string, Record<string, unknown>> = {};
  // (2) timings, after 3 s of work that bring the clocks up from idle (1 s was too little for 2048-row products: H100, 2026-12-07)
  {
    const [n0, t0v] = variants[0]!;
    const f = product(t0v, ...shapes[0]!, layouts[0]!);
    const s0 = performance.now();
    while (performance.now() - s0 < 3000) {
      for (let i = 0; i < 5; i++) f();
      await gpu.sync();
    }
    log(`warmed up on ${n0}`);
  }
  for (const [name, v] of variants) {
    const entry: Record<string, unknown> = (table[name] = {});
    for (const [M, N, K] of shapes)
      for (const layout of layouts) {
        const key = `${M}x${N}x${K} ${layout}`;
        if (!fits(v, layout)) {
          entry[key] = null;
          continue;
        }
        const f = product(v, M, N, K, layout);
        const row: Record<string, unknown> = { variant: name, M, N, K, layout };
        try {
          const s0 = performance.now();
          while (performance.now() - s0 < SPIN_MS) {
            for (let i = 0; i < 5; i++) f();
            await gpu.sync();
          }
          const t = await timeOf(gpu, f, reps);
          const tflops = +((2 * M * N * K) / t.s / 1e12).toPrecision(4);
          Object.assign(row, { us: +(t.s * 1e6).toFixed(1), wallUs: +(t.wall * 1e6).toFixed(1), tflops, wallTflops: +((2 * M * N * K) / t.wall / 1e12).toPrecision(4), kernels: t.kernels });
          entry[key] = tflops;
        } catch (e) {
          row.error = (e as Error).message.slice(0, 400);
          entry[key] = 'error';
        }
        log(JSON.stringify(row));
        rows.push(row);
      }
  }
  // (3) correctness of sampled outputs
  const r = rng(99);
  for (const [name, v] of variants) {
    let worst = 0;
    for (const [M, N, K] of shapes)
      for (const layout of layouts) {
        if (!fits(v, layout)) continue;
        const transA = layout[0] === 'T';
        const transB = layout[1] === 'T';
        const c = view(C, [M, N]);
        poison(gpu, c);
        try {
          product(v, M, N, K, layout)();
        } catch (e) {
          worst = Infinity;
          continue;
        }
        const got = (await download(gpu, c)) as Float32Array;
        let num = 0;
        let den = 0;
        for (let q = 0; q < SAMPLES; q++) {
          // half of them in the last 256 rows (where a split tail's tiles are)
          const m = q % 2 ? M - 1 - Math.floor(r() * Math.min(256, M)) : Math.floor(r() * M);
          const n = Math.floor(r() * N);
          let want = 0;
          for (let k = 0; k < K; k++) want += hostA[transA ? k * M + m : m * K + k]! * hostB[transB ? n * K + k : k * N + n]!;
          const g = got[m * N + n]!;
          num = Number.isFinite(g) ? Math.max(num, Math.abs(g - want)) : Infinity;
          den = Math.max(den, Math.abs(want));
        }
        worst = Math.max(worst, num / den);
      }
    table[name]!.maxRelErr = v.tile?.ablate ? `ablation (${worst.toPrecision(3)})` : +worst.toPrecision(3);
  }
  if (failed.size) (table as Record<string, unknown>).tcFailures = [...tcFailures(gpu)].map(([k, e]) => `${k}: ${e.message.slice(0, 600)}`);
  release(gpu, A16, B16, C);
  gpu.destroy();
  return { rows, table };
}

/** Milliseconds of back-to-back runs of a product before it is timed. */
const SPIN_MS = 200;
const SAMPLES = 48;
/** What the sweep runs for one of its names: a tile of TC_TILES (`v65`), one with its tail split (`v65+tail`: with
 *  the adapter's wave), or `auto` (what matmul picks), `auto0` (auto without wave planning, which also turns off
 *  split tails and x W^T through TN), `auto-notail` (no split tails), `auto-novia` (no x W^T through TN),
 *  `auto-neither`. */
interface Variant {
  tile?: TcTile;
  tail?: boolean;
  noWaves?: boolean;
  noTail?: boolean;
  noViaTN?: boolean;
  viaTN?: boolean;
  two?: boolean;
}

function variantOf(name: string): Variant {
  if (name === 'auto') return {};
  if (name === 'auto0') return { noWaves: true };
  if (name === 'auto-notail') return { noTail: true };
  if (name === 'auto-novia') return { noViaTN: true };
  if (name === 'auto-neither') return { noTail: true, noViaTN: true };
  if (name === 'auto-via') return { viaTN: true };
  if (name === 'auto-two') return { two: true };
  const [n, tail] = name.split('+');
  if (!Object.hasOwn(TC_TILES, n!) || (tail !== undefined && tail !== 'tail')) throw new Error(`matmul-tc-bench: unknown variant '${name}'`);
  return { tile: TC_TILES[n as TcTileName], ...(tail ? { tail: true } : {}) };
}

async function main() {
  const via = opt('via-tn');
  if (via) {
    const margin = Number(via);
    if (via !== 'off' && !(Number.isFinite(margin) && margin > -1 && margin < 1 && tcTuning.viaTN)) throw new Error(`matmul-tc-bench: --via-tn=MARGIN (with the model on) or off, not '${via}'`);
    tcTuning.viaTN = via === 'off' ? null : { ...tcTuning.viaTN!, margin };
  }
  const c = opt('child');
  if (c) return child(c);
  if (flag('probe')) {
    console.log(JSON.stringify({ probe: probe() }));
    return;
  }
  const sw = args.find((a) => a === '--sweep' || a.startsWith('--sweep='));
  if (sw) {
    const names = sw.includes('=') ? sw.split('=')[1]!.split(',') : Object.keys(TC_TILES);
    const { rows, table } = await sweep(names);
    console.log(JSON.stringify({ sweep: rows }));
    console.log(JSON.stringify({ table }));
    return;
  }
  if (flag('no-direct')) tcTuning.direct = false;
  if (flag('unroll')) tcTuning.unroll = true;
  const ctx = await createContext();
  const info = ctx.info;
  const out: Record<string, unknown> = {
    adapter: { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description },
    features: info.features,
    subgroupSizes: info.subgroupSizes,
    subgroupMatrixConfigs: info.subgroupMatrixConfigs,
    limits: {
      maxComputeWorkgroupStorageSize: info.limits.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: info.limits.maxComputeInvocationsPerWorkgroup,
    },
  };
  const plan = contextTcPlan(ctx);
  out.plan = plan;
  let failed = false;
  if (!flag('no-check')) {
    const results: TcResult[] = [];
    if ('frag' in plan) {
      const only = opt('cases');
      for (const c of tcCases(ctx)) {
        if (only && !JSON.stringify(c).includes(only)) continue;
        let r: TcResult;
        try {
          r = await runTcCase(ctx, c);
        } catch (e) {
          r = { name: JSON.stringify(c), relErr: Infinity, kernel: (e as Error).message };
        }
        log(`check ${r.name}: ${r.relErr}`);
        results.push(r);
      }
      // (a filtered run checks its cases only)
      if (!only) {
        log('pipeline sequence');
        results.push(...(await pipelineSequence(ctx)));
      }
    }
    const bad = results.filter((r) => !(r.relErr < (r.tol ?? TC_TOL)));
    failed = bad.length > 0 || !('frag' in plan);
    out.check = { cases: results.length, tol: TC_TOL, maxRelErr: Math.max(0, ...results.map((r) => r.relErr)), failures: bad };
  }
  ctx.destroy();
  if (!flag('no-bench') && 'frag' in plan) {
    const gpu = await createContext({ profile: true });
    const reps = Number(opt('reps') ?? 10);
    const maxEl = 8192 * 5632;
    const A32 = upload(gpu, randomData(maxEl, 1), [maxEl]);
    const B32 = upload(gpu, randomData(maxEl, 2), [maxEl]);
    const A16 = upload(gpu, randomData(maxEl, 1), [maxEl], 'f16');
    const B16 = upload(gpu, randomData(maxEl, 2), [maxEl], 'f16');
    const view = (t: DeviceTensor, shape: number[]): DeviceTensor => ({ buffer: t.buffer, dtype: t.dtype, shape });
    const rows: Record<string, unknown>[] = [];
    const run = async (label: string, M: number, N: number, K: number, layout: string, dtype: 'f16' | 'f32', o: MatmulOptions = {}) => {
      const transA = layout[0] === 'T';
      const transB = layout[1] === 'T';
      const a = view(dtype === 'f16' ? A16 : A32, transA ? [K, M] : [M, K]);
      const b = view(dtype === 'f16' ? B16 : B32, transB ? [N, K] : [K, N]);
      const c = empty(gpu, [M, N]);
      const row: Record<string, unknown> = { label, M, N, K, layout, dtype, ...(o.tcTile ? { tile: Object.entries(TC_TILES).find(([, t]) => t === o.tcTile)?.[0] } : {}) };
      try {
        const f = () => void matmul(gpu, a, b, { transA, transB, out: c, ...o });
        f();
        await tensorCoresReady(gpu);
        // clocks up from idle before timing (see sweep)
        const s0 = performance.now();
        while (performance.now() - s0 < SPIN_MS) {
          for (let i = 0; i < 5; i++) f();
          await gpu.sync();
        }
        const t = await timeOf(gpu, f, reps);
        Object.assign(row, { us: +(t.s * 1e6).toFixed(1), wallUs: +(t.wall * 1e6).toFixed(1), tflops: +((2 * M * N * K) / t.s / 1e12).toPrecision(4), kernels: t.kernels });
      } catch (e) {
        row.error = (e as Error).message;
      }
      release(gpu, c);
      log(JSON.stringify(row));
      rows.push(row);
    };
    const tiles = (opt('tiles')?.split(',') ?? Object.keys(TC_TILES)) as TcTileName[];
    const big: [number, number, number][] = [
      [4096, 4096, 4096],
      [8192, 2048, 5632],
      [8192, 5632, 2048],
    ];
    for (const [M, N, K] of big)
      for (const layout of ['NN', 'NT', 'TN']) {
        for (const tile of tiles)
          if (!tcTileProblem(TC_TILES[tile], plan, gpu.info.limits, layout[0] === 'T', layout[1] === 'T'))
            await run('tile', M, N, K, layout, 'f16', { tcTile: TC_TILES[tile] });
        await run('auto', M, N, K, layout, 'f16');
        if (M === 4096) await run('portable-f32', M, N, K, layout, 'f32');
      }
    // LoRA r=16 on a 2048-hidden projection, 4 x 512 tokens: forward x A^T, (xA^T) B^T; backward dY B, dY^T u, du^T x, du A
    const T = 2048;
    const H = 2048;
    const r = 16;
    const lora: [string, number, number, number, string][] = [
      ['x A^T', T, r, H, 'NT'],
      ['u B^T', T, H, r, 'NT'],
      ['dY B', T, r, H, 'NN'],
      ['dY^T u (dB)', H, r, T, 'TN'],
      ['du^T x (dA)', r, H, T, 'TN'],
      ['du A (dx)', T, H, r, 'NN'],
    ];
    for (const [label, M, N, K, layout] of lora) {
      // before: what auto ran until this change (the 64x64 tile; split-K 8 only for TN products)
      await run(`lora ${label} before (v1)`, M, N, K, layout, 'f32', { variant: 'v1', splitK: layout === 'TN' ? 8 : 1 });
      await run(`lora ${label}`, M, N, K, layout, 'f32');
      await run(`lora ${label}`, M, N, K, layout, 'f16');
    }
    out.bench = rows;
    out.tcFailures = [...tcFailures(gpu)].map(([k, e]) => `${k}: ${e.message.slice(0, 300)}`);
    release(gpu, A32, B32, A16, B16);
    gpu.destroy();
  }
  console.log(JSON.stringify(out));
  if (failed) process.exit(1);
}

main().catch((e) => {
  console.log(JSON.stringify({ error: (e as Error).stack ?? String(e) }));
  process.exit(1);
});
