/**
 * Optimizer kernel benchmark: prints ONE JSON object with the effective bandwidth of an AdamW step (bytes of
 * p, g, m, v read plus p, m, v written = 28 bytes per parameter) for a parameter set held as one tensor, as
 * many tensors stepped one dispatch each, and as one flat arena stepped by the multi-tensor kernel; plus the
 * global gradient norm (4 bytes/element, over the K tensors and over one tensor) and unscale-and-check
 * (8 bytes/element).
 *
 *   ../shared/gpu/pack.sh packages/backend/src/bench/optim-bench.ts    (from the repo root; then on the GPU machine)
 *   bash .gpu/run.sh optim-bench [--quick] [--params N] [--tensors K] [--iters I] [--align A] [--cases a,b]
 *
 * Wall-clock numbers time I steps submitted one per step (host encoding included); `gpu*` numbers come from
 * timestamp queries (kernel time only) where the adapter has them. `--quick`: tiny sizes for a CPU adapter.
 */
import { createContext, type Context } from '../context';
import { fillWords } from '../ops/optim/common';
import {
  adamwStep,
  adamwStepMulti,
  createFlag,
  createSegmentTable,
  gradNorm,
  releaseSegmentTable,
  unscaleAndCheck,
} from '../ops/optim';
import { empty, release, type DeviceTensor } from '../tensor';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const quick = process.argv.includes('--quick');
const N = arg('--params', quick ? 200_000 : 100_000_000);
const K = arg('--tensors', quick ? 20 : 200);
const ITERS = arg('--iters', quick ? 3 : 20);
/** Segment offsets in the arena rounded up to this many elements (the gaps are left out of the byte counts). */
const ALIGN = arg('--align', 64);
const ci = process.argv.indexOf('--cases');
const ONLY = ci >= 0 ? new Set(process.argv[ci + 1]!.split(',')) : null;

interface Result {
  bytesPerStep: number;
  dispatchesPerStep: number;
  wallMs?: number;
  wallGBs?: number;
  gpuMs?: number;
  gpuGBs?: number;
}

function filled(ctx: Context, n: number, value: number): DeviceTensor {
  const t = empty(ctx, [n]);
  fillWords(ctx, t.buffer, n, new Uint32Array(new Float32Array([value]).buffer)[0]!);
  return t;
}

/** The cases, each a function that encodes one step; built on `ctx` (buffers are freed by `done`). */
function setup(ctx: Context) {
  const sizes = Array.from({ length: K }, (_, i) => Math.floor(N / K) + (i < N % K ? 1 : 0));
  // one arena: used as one tensor and, with a segment table, as K tensors at ALIGN-aligned offsets
  let off = 0;
  const segs = sizes.map((length, i) => {
    const s = { offset: off, length, lr: 1e-4 * (1 + (i % 3)), weightDecay: 0.01 };
    off = Math.ceil((off + length) / ALIGN) * ALIGN;
    return s;
  });
  const A = Math.max(N, off);
  const [p, g, m, v] = [filled(ctx, A, 1), filled(ctx, A, 1e-3), filled(ctx, A, 0), filled(ctx, A, 0)];
  const table = createSegmentTable(ctx, segs);
  const one = (t: DeviceTensor): DeviceTensor => ({ ...t, shape: [N] });
  const want = (name: string) => !ONLY || ONLY.has(name);
  const sets = want('adamwPerTensor') || want('gradNormPerTensor')
    ? sizes.map((n) => [filled(ctx, n, 1), filled(ctx, n, 1e-3), filled(ctx, n, 0), filled(ctx, n, 0)] as const)
    : [];
  const flag = createFlag(ctx);
  let t = 0;
  const cases: Record<string, { bytes: number; dispatches: number; step: () => void }> = {
    adamwOneTensor: { bytes: 28 * N, dispatches: 1, step: () => adamwStep(ctx, one(p), one(g), one(m), one(v), { lr: 1e-4, step: ++t }) },
    adamwPerTensor: {
      bytes: 28 * N,
      dispatches: K,
      step: () => {
        t++;
        for (const [pp, gg, mm, vv] of sets) adamwStep(ctx, pp, gg, mm, vv, { lr: 1e-4, step: t });
      },
    },
    adamwMultiTensor: { bytes: 28 * N, dispatches: 1, step: () => adamwStepMulti(ctx, table, p, g, m, v, { step: ++t }) },
    gradNormPerTensor: {
      bytes: 4 * N,
      dispatches: K + 1,
      step: () => release(ctx, gradNorm(ctx, sets.map((s) => s[1]), { maxNorm: 1 })),
    },
    gradNormOneTensor: { bytes: 4 * N, dispatches: 2, step: () => release(ctx, gradNorm(ctx, [one(g)], { maxNorm: 1 })) },
    unscaleAndCheckOneTensor: { bytes: 8 * N, dispatches: 1, step: () => unscaleAndCheck(ctx, one(g), 1, flag) },
  };
  if (ONLY) for (const k of Object.keys(cases)) if (!ONLY.has(k)) delete cases[k];
  const done = () => {
    releaseSegmentTable(ctx, table);
    release(ctx, p, g, m, v, flag, ...sets.flat());
    ctx.trimPool();
  };
  return { cases, done, arena: A };
}

async function wall(): Promise<{ results: Record<string, Result>; device: string; timestamps: boolean }> {
  const ctx = await createContext();
  const { cases, done } = setup(ctx);
  const results: Record<string, Result> = {};
  for (const [name, c] of Object.entries(cases)) {
    for (let i = 0; i < 2; i++) c.step();
    await ctx.sync();
    const t0 = performance.now();
    for (let i = 0; i < ITERS; i++) {
      c.step();
      ctx.flush();
    }
    await ctx.sync();
    const ms = (performance.now() - t0) / ITERS;
    results[name] = { bytesPerStep: c.bytes, dispatchesPerStep: c.dispatches, wallMs: ms, wallGBs: c.bytes / ms / 1e6 };
  }
  done();
  const info = ctx.info;
  ctx.destroy();
  return { results, device: `${info.vendor} ${info.device} ${info.description}`.trim(), timestamps: info.features.timestampQuery };
}

async function gpu(results: Record<string, Result>): Promise<void> {
  const ctx = await createContext({ profile: true });
  const { cases, done } = setup(ctx);
  for (const [name, c] of Object.entries(cases)) {
    for (let i = 0; i < 2; i++) c.step();
    await ctx.sync();
    await ctx.profiler.summary();
    ctx.profiler.reset();
    for (let i = 0; i < ITERS; i++) {
      c.step();
      ctx.flush();
    }
    await ctx.sync();
    const total = (await ctx.profiler.summary()).reduce((s, k) => s + k.totalMs, 0);
    const ms = total / ITERS;
    Object.assign(results[name]!, { gpuMs: ms, gpuGBs: c.bytes / ms / 1e6 });
  }
  done();
  ctx.destroy();
}

const { results, device, timestamps } = await wall();
if (timestamps) await gpu(results);
const round = (x: number) => Math.round(x * 1000) / 1000;
for (const r of Object.values(results))
  for (const k of ['wallMs', 'wallGBs', 'gpuMs', 'gpuGBs'] as const) if (r[k] !== undefined) r[k] = round(r[k]!);
console.log(JSON.stringify({ bench: 'optim', device, quick, params: N, tensors: K, iters: ITERS, results }));
