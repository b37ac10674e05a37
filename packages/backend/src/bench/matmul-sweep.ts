/**
 * Sweep of the portable f32 matmul over the products of the benchmark training step (a plain program, not a
 * test): the Llama configuration of `packages/graph/src/bench/train-bench.ts` (4096 tokens, hidden 512,
 * intermediate 1376, vocab 8192) runs these twelve products per step, forward (NT, `x W^T`), input gradient
 * (NN, `dY W`) and weight gradient (TN, `dY^T x`, K = 4096 tokens). For every product it times `auto`, the
 * numbered variants and a list of candidate tiles, each with several split-K chunk counts, checks 64 sampled
 * outputs of each against float64 (NaN-poisoned output first), and writes ONE JSON line per (product,
 * candidate). Last it prints one summary JSON object: per product the `auto` time and the best candidates, and
 * the step's matmul time (each product's time times its count per step) under `auto` and under the best.
 *
 *   node matmul-sweep.mjs [--reps=N] [--budget-s=S] [--tiles=T1,T2] [--splits=1,2,4] [--only=fwd-qkvo,...]
 *                         [--out=file.jsonl] [--square] [--no-lines] [--scale=D] [--best=tuning.json]
 * `--best`: write each product's fastest correct candidate as a `setMatmulTuning` table (JSON entries).
 * `--scale=D`: divide every size by D (a quick run on a software adapter).
 * `--out`: also append every line to this file. `--square`: also 4096^3 in NN / NT / TN for `auto`.
 * `--budget-s`: stop starting new candidates after this many seconds (the summary still prints).
 * Kernel times are timestamp-query sums over every dispatch of the product (split-K's partial products and
 * their reduction together), mean per product over `reps`. The GPU's clock drops within milliseconds of idling
 * (seen on an H200: a first sweep with host work between candidates measured the same kernel 2-5x slower as it
 * went on), so every candidate's timed repetitions follow ~15 ms of other GPU work (a heater product), waited for
 * before the timed run (a heater still in flight was once counted into the first repetitions). `wallUs`: host
 * time per product around the repetitions (submit and read-back latency included).
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { createContext } from '../context';
import { autoChoice, matmul, MATMUL_VARIANTS, parseTile, tileName, type MatmulTile, type MatmulTuningEntry, type MatmulVariant } from '../ops/core/matmul';
import { download, empty, poison, release, upload, type DeviceTensor } from '../tensor';
import { rng } from '../testing';

const args = process.argv.slice(2);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const flag = (name: string) => args.includes(`--${name}`);
const reps = Number(opt('reps') ?? 20);
const budget = Number(opt('budget-s') ?? 1e9) * 1e3;
const outFile = opt('out');
const lines = !flag('no-lines');

/** The step's products: name, M, N, K, layout, how many per step. */
export const STEP_PRODUCTS: [string, number, number, number, 'NN' | 'NT' | 'TN', number][] = [
  ['fwd-qkvo', 4096, 512, 512, 'NT', 32],
  ['dx-qkvo', 4096, 512, 512, 'NN', 32],
  ['dw-qkvo', 512, 512, 4096, 'TN', 32],
  ['fwd-gateup', 4096, 1376, 512, 'NT', 16],
  ['dx-gateup', 4096, 512, 1376, 'NN', 16],
  ['dw-gateup', 1376, 512, 4096, 'TN', 16],
  ['fwd-down', 4096, 512, 1376, 'NT', 8],
  ['dx-down', 4096, 1376, 512, 'NN', 8],
  ['dw-down', 512, 1376, 4096, 'TN', 8],
  ['fwd-lmhead', 4096, 8192, 512, 'NT', 1],
  ['dx-lmhead', 4096, 512, 8192, 'NN', 1],
  ['dw-lmhead', 8192, 512, 4096, 'TN', 1],
];

/** Candidate tiles beside the numbered variants (BMxBNxBK-TMxTN[-wWTX][-gGM]). */
const TILES = [
  '64x128x16-4x8',
  '64x128x8-8x8',
  '128x128x16-8x8-g8',
  // sliced K: 2 or 4 K groups per workgroup
  '128x64x16-8x4-k2',
  '64x64x8-8x8-w8-k2',
  '64x64x8-8x8-w8-k4',
];
/** The heater: a product that keeps the GPU busy before each timed candidate (its own tile, so its kernel name
 *  is no candidate's). */
const HEATER: MatmulTile = { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8, gm: 4 };

interface Cand {
  label: string;
  variant?: MatmulVariant | 'auto';
  tile?: MatmulTile;
  splitK?: number;
}

function randomData(n: number, seed: number): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = 2 * r() - 1;
  return x;
}

const view = (t: DeviceTensor, shape: number[]): DeviceTensor => ({ buffer: t.buffer, dtype: t.dtype, shape });

async function main() {
  const t0 = performance.now();
  const gpu = await createContext({ profile: true });
  if (!gpu.profiler.enabled) throw new Error('matmul-sweep needs timestamp queries');
  const only = opt('only')?.split(',');
  const D = Number(opt('scale') ?? 1);
  const products = STEP_PRODUCTS.filter((p) => !only || only.includes(p[0])).map(
    ([n, m, nn, k, l, c]) => [n, Math.ceil(m / D), Math.ceil(nn / D), Math.ceil(k / D), l, c] as const,
  );
  const maxEl = Math.max(...products.flatMap(([, m, n, k]) => [m * k, k * n]), flag('square') ? 4096 * 4096 : 0);
  const A = upload(gpu, randomData(maxEl, 1), [maxEl]);
  const B = upload(gpu, randomData(maxEl, 2), [maxEl]);
  const Ah = new Float32Array(await gpu.read(A.buffer, maxEl * 4));
  const Bh = new Float32Array(await gpu.read(B.buffer, maxEl * 4));
  const tiles = (opt('tiles')?.split(',') ?? TILES).map(parseTile);
  const splitSet = (opt('splits') ?? '1,2,4,8,16').split(',').map(Number);
  const emit = (row: Record<string, unknown>) => {
    const s = JSON.stringify(row);
    if (lines) console.log(s);
    if (outFile) appendFileSync(outFile, s + '\n');
  };

  /** Mean kernel time (us) of one product over reps, and the sampled float64 error. */
  const measure = async (M: number, N: number, K: number, layout: string, c: Cand) => {
    const transA = layout === 'TN';
    const transB = layout === 'NT';
    const a = view(A, transA ? [K, M] : [M, K]);
    const b = view(B, transB ? [N, K] : [K, N]);
    const out = empty(gpu, [M, N]);
    try {
      const f = () => matmul(gpu, a, b, { transA, transB, out, variant: c.variant, tile: c.tile, splitK: c.splitK });
      f();
      f();
      await gpu.sync();
      for (let i = 0; i < 48; i++) matmul(gpu, hA, hB, { out: hC, tile: HEATER, splitK: 1 });
      await gpu.sync();
      gpu.profiler.reset();
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) f();
      await gpu.sync();
      const wallUs = ((performance.now() - t0) * 1e3) / reps;
      const sum = (await gpu.profiler.summary()).filter((e) => e.name !== heaterName);
      const us = (sum.reduce((s, e) => s + e.totalMs, 0) * 1e3) / reps;
      const kernels = sum.map((e) => e.name).join('+');
      poison(gpu, out);
      f();
      const got = (await download(gpu, out)) as Float32Array;
      const r = rng(M + N + K);
      let err = 0;
      for (let t = 0; t < 64; t++) {
        const m = Math.floor(r() * M);
        const n = Math.floor(r() * N);
        let s = 0;
        let mag = 0;
        for (let k = 0; k < K; k++) {
          const x = Ah[transA ? k * M + m : m * K + k]! * Bh[transB ? n * K + k : k * N + n]!;
          s += x;
          mag += Math.abs(x);
        }
        const e = Math.abs(got[m * N + n]! - s) / mag;
        err = Math.max(err, Number.isNaN(e) ? Infinity : e);
      }
      return { us, wallUs, kernels, err };
    } finally {
      release(gpu, out);
    }
  };

  // the heater: 48 products of 2048 x 2048 x 1024 (about 0.3 ms each on an H200)
  const [hm, hk] = [Math.ceil(2048 / D), Math.ceil(1024 / D)];
  const hA = view(A, [hm, hk]);
  const hB = view(B, [hk, hm]);
  const hC = empty(gpu, [hm, hm]);
  const heaterName = `matmul-${tileName(HEATER)}`;
  const best: MatmulTuningEntry[] = [];

  const summary: Record<string, unknown>[] = [];
  let autoStep = 0;
  let bestStep = 0;
  let stopped = false;
  for (const [name, M, N, K, layout, count] of products) {
    const cands: Cand[] = [{ label: 'auto', variant: 'auto' }];
    const splits = splitSet.filter((s) => K % s === 0 && K / s >= 128 / D);
    for (const v of Object.keys(MATMUL_VARIANTS) as MatmulVariant[]) {
      const t = MATMUL_VARIANTS[v];
      if (!t || t.bn < 64 || t.bm < 64) continue;
      for (const s of splits) cands.push({ label: `${v}/s${s}`, variant: v, splitK: s });
    }
    for (const t of tiles) for (const s of splits) cands.push({ label: `${tileName(t)}/s${s}`, tile: t, splitK: s });
    const rows: { label: string; us: number; err: number }[] = [];
    for (const c of cands) {
      if (performance.now() - t0 > budget) {
        stopped = true;
        break;
      }
      // a split that leaves more than ~4 waves of small workgroups is not worth timing
      const t = c.tile ?? (c.variant && c.variant !== 'auto' ? MATMUL_VARIANTS[c.variant] : null);
      if (t && (c.splitK ?? 1) > 1 && Math.ceil(M / t.bm) * Math.ceil(N / t.bn) * c.splitK! > 4096) continue;
      let row: Record<string, unknown> = { product: name, M, N, K, layout, cand: c.label };
      try {
        const r = await measure(M, N, K, layout, c);
        row = { ...row, us: +r.us.toFixed(2), wallUs: +r.wallUs.toFixed(1), tflops: +((2 * M * N * K) / r.us / 1e6).toFixed(2), relErr: +r.err.toExponential(2), kernels: r.kernels };
        if (r.err < 1e-5) rows.push({ label: c.label, us: r.us, err: r.err });
      } catch (e) {
        row.error = (e as Error).message;
      }
      emit(row);
    }
    const auto = rows.find((r) => r.label === 'auto');
    const ranked = [...rows].sort((x, y) => x.us - y.us);
    if (auto && ranked[0]) {
      autoStep += count * auto.us;
      bestStep += count * ranked[0].us;
      const w = cands.find((c) => c.label === ranked[0]!.label)!;
      if (w.label !== 'auto')
        best.push({ M, N, K, layout, variant: w.variant as MatmulVariant | undefined, tile: w.tile, splitK: w.splitK });
    }
    summary.push({
      product: name,
      shape: `${M}x${N}x${K} ${layout}`,
      perStep: count,
      auto: (({ variant, splitK }) => `${variant}/s${splitK}`)(autoChoice(gpu, M, N, K, layout)),
      autoUs: auto ? +auto.us.toFixed(1) : null,
      autoTflops: auto ? +((2 * M * N * K) / auto.us / 1e6).toFixed(1) : null,
      best: ranked.slice(0, 4).map((r) => `${r.label} ${r.us.toFixed(1)}us ${((2 * M * N * K) / r.us / 1e6).toFixed(1)}TF`),
    });
    if (stopped) break;
  }
  const square: Record<string, unknown>[] = [];
  if (flag('square') && !stopped)
    for (const layout of ['NN', 'NT', 'TN']) {
      const r = await measure(4096, 4096, 4096, layout, { label: 'auto', variant: 'auto' });
      square.push({ layout, us: +r.us.toFixed(1), tflops: +((2 * 4096 ** 3) / r.us / 1e6).toFixed(2), relErr: +r.err.toExponential(2) });
    }
  release(gpu, A, B, hC);
  const bestFile = opt('best');
  if (bestFile) writeFileSync(bestFile, JSON.stringify(best));
  const info = gpu.info;
  console.log(
    JSON.stringify({
      bench: 'matmul-sweep',
      adapter: `${info.vendor} ${info.architecture} ${info.description}`.trim(),
      reps,
      stoppedAtBudget: stopped,
      seconds: +((performance.now() - t0) / 1e3).toFixed(1),
      stepMatmulMsAuto: +(autoStep / 1e3).toFixed(2),
      stepMatmulMsBest: +(bestStep / 1e3).toFixed(2),
      square,
      summary,
    }),
  );
  gpu.destroy();
}

main().catch((e) => {
  console.log(JSON.stringify({ error: (e as Error).stack ?? String(e) }));
  process.exit(1);
});
