/**
 * qtc-bench: the fused dequantize + tensor-core kernel (`ops/quant/qmatmul-tc.ts`) on the GPU machine. Prints one
 * JSON object on stdout (progress on stderr); exit code 1 when a check fails.
 * - `--checks`: the GPU check list (`qtcGpuCases`: every format, 1-64 rows, odd sizes, x dtypes, bias, every
 *   tile) against float64 of the f16-rounded operands, into poisoned outputs.
 * - `--bench`: time per product of M rows for each weight shape (weights rotated over copies that exceed the L2
 *   cache, dispatches back to back in one pass: `timeRotated` of quant-bench): every tile of `QTC_TILES`, the
 *   subgroup GEMV (M <= 16, its committed layouts) and the f16 GEMV of the same shape, all int4/64 (and
 *   NF4/64 + double quantization at 16 rows); the `dequant` path (W dequantized to f16, then the tensor-core
 *   matmul; profiler time of its two kernels) for M > 16.
 *   `--shapes=NxK,...` (default: the 7B and 1.1B projections), `--rows=4,8,16,32,64`, `--tiles=name,...`.
 *
 * - `--auto`: quantLinear's own choice against the GEMV and dequant paths (see autoBench; `--nf4`, `--x=f16`).
 * - `--split`: K split targets for each tile (see splitBench), `--targets=0,264,...`, `--x=f16` (X's dtype),
 *   `--probe=1|2|3` (the kernel without X staging / W decoding / multiply-accumulates: wrong results, for timing).
 *   `--scalar` runs the portable reference instead (a smoke test of this entry on any adapter).
 *
 *   bash .gpu/run.sh qtc-bench [--checks] [--bench] [--scalar] [--reps=N] [--shapes=...] [--rows=...] [--tiles=...]
 */
import { createContext, type Context } from '../context';
import { kernelsReady } from '../kernel-cache';
import { quantSpec, type QuantSpec, type QuantTensor } from '../ops/quant/formats';
import { quantLinear } from '../ops/quant/qmatmul';
import { lastQtcKernel, planQtc, QTC_TILES, qtcFailures, qtcTuning, quantLinearTc, type QtcTileName } from '../ops/quant/qmatmul-tc';
import { QTC_TOL, qtcCaseName, qtcGpuCases, runQtcCase } from '../ops/quant/qmatmul-tc.cases';
import { empty, release, upload } from '../tensor';
import { args, gpuTime, log, randomData, settleMs, spinUp } from './quant-bench-common';
import { rotatedF16, rotatedQuant, timeRotated, type Rotated } from './quant-bench-gemv';

const opt = (n: string) => args.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3);
const shapes: [number, number][] = opt('shapes')?.split(',').map((s) => s.split('x').map(Number) as [number, number]) ?? [
  [4096, 4096],
  [14336, 4096],
  [4096, 14336],
  [28672, 4096],
  [2048, 2048],
  [5632, 2048],
  [2048, 5632],
];
const rows = opt('rows')?.split(',').map(Number) ?? [4, 8, 16, 32, 64];
/** `--scalar`: the portable reference instead of subgroup matrices (a smoke test of this entry off the GPU machine). */
const scalar = args.includes('--scalar');
const tiles = (opt('tiles')?.split(',') ?? Object.keys(QTC_TILES)) as QtcTileName[];

/** The first timing of freshly made weights can read up to 3x slow (quant-bench's timeRotated): a settling time of
 *  GPU work and one whole timing thrown away, once per weight. */
async function settle(ctx: Context, f: () => Promise<unknown>): Promise<void> {
  await spinUp(ctx, settleMs);
  await f();
}

async function checks(ctx: Context, out: Record<string, unknown>): Promise<number> {
  const t0 = performance.now();
  const all = qtcGpuCases();
  const failures: Record<string, unknown>[] = [];
  let worst = 0;
  for (const c of all) {
    try {
      const { err, kernel } = await runQtcCase(ctx, c, scalar);
      worst = Math.max(worst, err);
      if (!(err < QTC_TOL) || !kernel.startsWith(scalar ? 'dequant-matmul-tc-scalar-' : 'dequant-matmul-tc-m')) failures.push({ name: qtcCaseName(c), relErr: err, kernel });
    } catch (e) {
      failures.push({ name: qtcCaseName(c), error: (e as Error).message.slice(0, 800) });
    }
  }
  out.checks = { cases: all.length, tol: QTC_TOL, worst, failures, seconds: (performance.now() - t0) / 1e3 };
  log(`qtc checks: ${JSON.stringify(out.checks).slice(0, 3000)}`);
  return failures.length;
}

/** A rotated quantized weight planned through the fused kernel with one tile (null: the kernel did not build). */
async function rotatedQtc(ctx: Context, w: Rotated & { qs: QuantTensor[] }, tile: QtcTileName, M: number, K: number): Promise<Rotated | string> {
  const x = upload(ctx, randomData(M * K, 3), [M, K]);
  const y = empty(ctx, [M, w.qs[0]!.layout.N]);
  const first = () => planQtc(ctx, x, w.qs[0]!, undefined, y, M, { tile: QTC_TILES[tile], scalar });
  let why = '';
  try {
    if (!first()) await kernelsReady(ctx);
    if (!first()) why = 'failed its check';
  } catch (e) {
    why = (e as Error).message;
  }
  release(ctx, x, y);
  if (why) return why;
  // the weights were settled by the first timing of this shape (timeRotated)
  return { bytes: w.bytes, settled: w.settled, plan: (xx, yy) => w.qs.map((q) => planQtc(ctx, xx, q, undefined, yy, M, { tile: QTC_TILES[tile], scalar })!), free: () => {} };
}

async function bench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const table: Record<string, unknown>[] = [];
  const specs: [string, QuantSpec, number[]][] = [
    ['int4/64', quantSpec('int4', 64), rows],
    ['nf4/64+dq', quantSpec('nf4', 64, true), rows.filter((m) => m === 16)],
  ];
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const f16 = rotatedF16(ctx, w16);
    for (const [sname, spec, Ms] of specs) {
      const w = rotatedQuant(ctx, w16, spec);
      for (const M of Ms) {
        const us: Record<string, number | string> = {};
        for (const tile of tiles) {
          const r = await rotatedQtc(ctx, w, tile, M, K);
          us[tile] = typeof r === 'string' ? r.slice(0, 200) : +((await timeRotated(ctx, r, M, K, N)).t * 1e6).toFixed(2);
          if (typeof r !== 'string') w.settled = true;
        }
        if (M <= 16) {
          us.gemv = +((await timeRotated(ctx, w, M, K, N)).t * 1e6).toFixed(2);
          if (sname === 'int4/64') us.f16gemv = +((await timeRotated(ctx, f16, M, K, N)).t * 1e6).toFixed(2);
        } else {
          const x = upload(ctx, randomData(M * K, 3), [M, K]);
          const y = empty(ctx, [M, N]);
          us.dequant = +((await gpuTime(ctx, ['dequant'], () => void quantLinear(ctx, x, w.qs[0]!, { variant: 'dequant', out: y }))) * 1e6).toFixed(2);
          release(ctx, x, y);
        }
        const times = tiles.map((t) => us[t]).filter((v): v is number => typeof v === 'number');
        const row = { N, K, M, w: sname, bytes: w.bytes, us, bestTile: tiles[tiles.findIndex((t) => us[t] === Math.min(...times))], bestGBps: +(w.bytes / Math.min(...times) / 1e3).toFixed(0) };
        table.push(row);
        log(`qtc ${JSON.stringify(row)}`);
      }
      w.free();
    }
    f16.free();
    release(ctx, w16);
    ctx.trimPool();
  }
  out.bench = { tuning: qtcTuning, table };
}

/**
 * `--split`: the K split's target (`qtcTuning.splitTarget`, `--targets=0,264,...`) for each tile, time per product
 * (profiler: the sum of its kernels, the fused one and the sum of the splits), weights rotated over copies within
 * each timed pass, beside the subgroup GEMV (M <= 16) or the `dequant` path timed the same way.
 */
async function splitBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const targets = opt('targets')?.split(',').map(Number) ?? [0, 264, 528, 1056];
  const table: Record<string, unknown>[] = [];
  const saved = qtcTuning.splitTarget;
  const spec = quantSpec('int4', 64);
  const probe = Number(opt('probe') ?? 0) as 0 | 1 | 2 | 3;
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const w = rotatedQuant(ctx, w16, spec);
    release(ctx, w16);
    for (const M of rows) {
      const x = upload(ctx, randomData(M * K, 3), [M, K], (opt('x') ?? 'f32') as 'f32' | 'f16');
      const y = empty(ctx, [M, N]);
      const per = async (f: (q: QuantTensor) => void) => +(((await gpuTime(ctx, ['qtc'], () => w.qs.forEach(f))) / w.qs.length) * 1e6).toFixed(2);
      if (M === rows[0]) await settle(ctx, () => per((q) => void quantLinear(ctx, x, q, { variant: 'dequant', out: y })));
      const us: Record<string, number | string> = {};
      for (const tile of tiles)
        for (const target of targets) {
          qtcTuning.splitTarget = target;
          try {
            const o = { tile: QTC_TILES[tile], scalar, ...(probe ? { probe } : {}) };
            if (!planQtc(ctx, x, w.qs[0]!, undefined, y, M, o)) await kernelsReady(ctx);
            const S = planQtc(ctx, x, w.qs[0]!, undefined, y, M, o)?.S;
            if (!S) throw new Error('the kernel failed its check');
            us[`${tile}/${target}`] = await per((q) => {
              if (!quantLinearTc(ctx, x, q, undefined, y, M, o)) throw new Error('the kernel did not run');
            });
            us[`${tile}/${target}:S`] = S;
          } catch (e) {
            us[`${tile}/${target}`] = (e as Error).message.slice(0, 160);
          }
        }
      qtcTuning.splitTarget = saved;
      us[M <= 16 ? 'gemv' : 'dequant'] = await per((q) => void quantLinear(ctx, x, q, { variant: M <= 16 ? 'gemv' : 'dequant', out: y }));
      const timed = Object.entries(us).filter(([k, v]) => !k.endsWith(':S') && k.includes('/') && typeof v === 'number') as [string, number][];
      const best = timed.reduce((a, b) => (b[1] < a[1] ? b : a));
      const row = { N, K, M, bytes: w.bytes, us, best: best[0], bestUs: best[1] };
      table.push(row);
      log(`split ${JSON.stringify(row)}`);
      release(ctx, x, y);
    }
    w.free();
    ctx.trimPool();
  }
  out.split = { table };
}

/**
 * `--auto`: what `quantLinear` runs by itself (`variant: 'tc'`: qtcTuning's rule for the shape) against the subgroup
 * GEMV (M <= 16) and the `dequant` path, int4/64 (NF4/64 + double quantization with `--nf4`), X in f32 (`--x=f16`:
 * f16), time per product as in `--split` (profiler, weights rotated over copies).
 */
async function autoBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const table: Record<string, unknown>[] = [];
  const spec = args.includes('--nf4') ? quantSpec('nf4', 64, true) : quantSpec('int4', 64);
  const xDtype = (opt('x') ?? 'f32') as 'f32' | 'f16';
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const w = rotatedQuant(ctx, w16, spec);
    release(ctx, w16);
    for (const M of rows) {
      const x = upload(ctx, randomData(M * K, 3), [M, K], xDtype);
      const y = empty(ctx, [M, N]);
      const per = async (v: 'tc' | 'gemv' | 'dequant') =>
        +(((await gpuTime(ctx, [v], () => w.qs.forEach((q) => void quantLinear(ctx, x, q, { variant: v, out: y })))) / w.qs.length) * 1e6).toFixed(2);
      if (M === rows[0]) await settle(ctx, () => per('tc'));
      lastQtcKernel.delete(ctx);
      const tc = await per('tc');
      const kernel = lastQtcKernel.get(ctx) ?? 'none';
      const gemv = M <= 16 ? await per('gemv') : undefined;
      const dequant = await per('dequant');
      const base = Math.min(gemv ?? Infinity, dequant);
      const row = { N, K, M, w: spec, x: xDtype, kernel, tc, gemv, dequant, speedup: +(base / tc).toFixed(2), GBps: +(w.bytes / tc / 1e3).toFixed(0) };
      table.push(row);
      log(`auto ${JSON.stringify(row)}`);
      release(ctx, x, y);
    }
    w.free();
    ctx.trimPool();
  }
  out.auto = { tuning: qtcTuning, table };
}

async function main() {
  const ctx = await createContext({ profile: true });
  const out: Record<string, unknown> = { date: new Date().toISOString(), args, adapter: { description: ctx.info.description, vendor: ctx.info.vendor, subgroupMatrixConfigs: ctx.info.subgroupMatrixConfigs } };
  let failed = 0;
  if (args.includes('--checks')) failed += await checks(ctx, out);
  if (args.includes('--bench')) await bench(ctx, out);
  if (args.includes('--split')) await splitBench(ctx, out);
  if (args.includes('--auto')) await autoBench(ctx, out);
  const fails = [...qtcFailures(ctx)].map(([k, e]) => ({ key: k.slice(0, 200), error: e.message.slice(0, 1500) }));
  if (fails.length) out.kernelFailures = fails;
  process.stdout.write(JSON.stringify(out) + '\n');
  ctx.destroy();
  process.exit(failed || fails.length ? 1 : 0);
}

main().catch((e) => {
  log(String(e?.stack ?? e));
  process.exit(2);
});
