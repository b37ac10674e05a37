/**
 * Trainer benchmark: prints ONE JSON object.
 *
 * 1. Overhead of the Trainer: the issue-6 training configuration (Llama vocab 8192, hidden 512, intermediate 1376,
 *    8 layers, 8 heads, batch 16 x 256 tokens, f32, AdamW) per step through `Trainer` (data loader, metrics
 *    JSONL, grad-norm logging, LR schedule; clipping off as in the bare loop) against a bare loop of forward,
 *    backward and AdamW on the same batches. Target: at most 5% more per step. Also reported: the bare loop that
 *    awaits its loss every step, and the Trainer without pipelining.
 * 2. Mixed precision: LoRA fine-tuning (r 16 on all seven projections) of the same model with the frozen base
 *    weights in f32, bf16 and f16 (f16 with a GradScaler): peak GPU memory (`ctx.memory.peak`) and tokens/s.
 *
 *   pnpm build && bash ../shared/gpu/pack.sh packages/trainer/src/bench/trainer-bench.ts   (from the repo root;
 *   the bundle takes the workspace packages from their dist/)
 *   bash .gpu/run.sh trainer-bench [--quick] [--steps N] [--warmup W] [--repeats R] [--cases a,b,...]
 *
 * Cases: bare, bare-item, trainer, trainer-nopipe, lora-f32, lora-bf16, lora-f16, each in a GPU context of its own
 * (its peak memory is its own). Each case: warm-up steps,
 * then N steps between two GPU syncs; the overhead cases alternate bare/trainer R times and report the median.
 * `--quick`: tiny sizes for a CPU adapter (numbers meaningless there).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, type Context } from '@rusty/backend';
import { AdamW, ConstantLR, Tensor, tidy } from '@rusty/autograd';
import { applyLora, LlamaForCausalLM, parseLlamaConfig } from '@rusty/graph';
import { castFrozenParameters, DataLoader, GradScaler, Rng, TextDataset, Trainer, type Batch } from '../index';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const arg = (name: string, dflt: number): number => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const STEPS = arg('--steps', quick ? 3 : 20);
const WARMUP = arg('--warmup', quick ? 1 : 3);
const REPEATS = arg('--repeats', quick ? 1 : 3);
const ci = argv.indexOf('--cases');
const ALL = ['bare', 'bare-item', 'trainer', 'trainer-nopipe', 'lora-f32', 'lora-bf16', 'lora-f16'];
const CASES = new Set(ci >= 0 ? argv[ci + 1]!.split(',') : ALL);

const CONFIG = quick
  ? { vocab_size: 256, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 64 }
  : { vocab_size: 8192, hidden_size: 512, intermediate_size: 1376, num_hidden_layers: 8, num_attention_heads: 8, max_position_embeddings: 256 };
const BATCH = quick ? 2 : 16;
const SEQ = quick ? 32 : 256;
const LORA_R = quick ? 4 : 16;
const TOKENS = BATCH * SEQ;
const LR = 1e-4;

/** Random tokens: enough windows for every step of a case without repeating (shuffled). */
function dataset(steps: number): TextDataset {
  const rng = new Rng(1234);
  const n = (steps + 1) * BATCH * SEQ;
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) ids[i] = rng.int(CONFIG.vocab_size);
  return TextDataset.fromSequences([ids], { seqLen: SEQ, dropRemainder: true });
}

function model(ctx: Context, lora: boolean): LlamaForCausalLM {
  const m = new LlamaForCausalLM(ctx, parseLlamaConfig(CONFIG), { seed: 1 });
  if (lora) applyLora(m, { r: LORA_R, alpha: 2 * LORA_R, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], seed: 1 });
  return m;
}

interface Result {
  msPerStep: number;
  tokensPerSec: number;
  /** Highest live GPU memory during the case (weights included; each case has a context of its own). */
  peakBytes: number;
  dispatchesPerStep: number;
  /** GPU memory still live after everything of the case was disposed, per step (0 when nothing leaks). */
  leakBytesPerStep: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Forward, backward, AdamW; no read-back (or `await loss.item()` every step with `item`). */
async function bare(item: boolean): Promise<Result> {
  const ctx = await createContext();
  const live0 = ctx.memory.live;
  const m = model(ctx, false);
  const params = m.trainableParameters().map(([, p]) => p);
  const opt = new AdamW(ctx, params, { lr: LR });
  const loader = new DataLoader(dataset(WARMUP + STEPS), BATCH, { shuffle: true, seed: 1 });
  const step = async (b: Batch) => {
    opt.zeroGrad();
    const ids = Tensor.fromArray(ctx, b.inputIds, [b.batch, b.seqLen], { dtype: 'i32' });
    const loss = tidy(() => {
      const l = m.loss(ids, b.labels).loss;
      l.backward();
      return l;
    });
    opt.step();
    opt.zeroGrad();
    ids.dispose();
    if (item) await loss.item();
    loss.dispose();
  };
  const d0 = ctx.stats.dispatches;
  for (let i = 0; i < WARMUP; i++) await step(loader.next());
  await ctx.sync();
  const t0 = performance.now();
  for (let i = 0; i < STEPS; i++) await step(loader.next());
  await ctx.sync();
  const ms = (performance.now() - t0) / STEPS;
  const dispatchesPerStep = (ctx.stats.dispatches - d0) / (WARMUP + STEPS);
  const peakBytes = ctx.memory.peak;
  opt.dispose();
  m.dispose();
  const leakBytesPerStep = (ctx.memory.live - live0) / (WARMUP + STEPS);
  ctx.destroy();
  return { msPerStep: ms, tokensPerSec: (TOKENS * 1000) / ms, peakBytes, dispatchesPerStep, leakBytesPerStep };
}

/** The same steps through the Trainer (or a LoRA fine-tune with `lora`, base weights in `base`). */
async function viaTrainer(o: { pipeline?: boolean; lora?: boolean; base?: 'f32' | 'bf16' | 'f16' }): Promise<Result> {
  const ctx = await createContext();
  const live0 = ctx.memory.live;
  const m = model(ctx, !!o.lora);
  if (o.base && o.base !== 'f32') castFrozenParameters(m, o.base);
  const opt = new AdamW(ctx, m.trainableParameters().map(([, p]) => p), { lr: LR });
  const scheduler = new ConstantLR(opt, { factor: 1, totalIters: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'rusty-trainer-bench-'));
  let tW = 0;
  const scaler = o.base === 'f16' ? new GradScaler(ctx) : undefined;
  const t = new Trainer({
    model: m,
    optimizer: opt,
    scheduler,
    scaler,
    data: new DataLoader(dataset(WARMUP + STEPS), BATCH, { shuffle: true, seed: 1 }),
    maxSteps: WARMUP + STEPS,
    maxGradNorm: null,
    metricsFile: join(dir, 'metrics.jsonl'),
    pipeline: o.pipeline ?? true,
    signals: false,
    callbacks: {
      onStep: (s) => {
        if (s.step === WARMUP) tW = performance.now();
      },
    },
  });
  const d0 = ctx.stats.dispatches;
  await t.fit();
  await ctx.sync();
  // step WARMUP is read back when the GPU has finished it (and, pipelined, step WARMUP + 1 is queued): the steps
  // after it are timed
  const ms = (performance.now() - tW) / STEPS;
  const dispatchesPerStep = (ctx.stats.dispatches - d0) / (WARMUP + STEPS);
  const peakBytes = ctx.memory.peak;
  t.dispose();
  scaler?.dispose();
  opt.dispose();
  m.dispose();
  const leakBytesPerStep = (ctx.memory.live - live0) / (WARMUP + STEPS);
  ctx.destroy();
  rmSync(dir, { recursive: true, force: true });
  return { msPerStep: ms, tokensPerSec: (TOKENS * 1000) / ms, peakBytes, dispatchesPerStep, leakBytesPerStep };
}

async function main(): Promise<void> {
  const ctx = await createContext();
  const info = ctx.info;
  ctx.destroy();
  const out: Record<string, unknown> = {
    bench: 'trainer',
    device: info.description || info.device,
    isSoftware: info.isSoftware,
    quick,
    config: { ...CONFIG, batch: BATCH, seq: SEQ, dtype: 'f32', optimizer: 'AdamW', loraR: LORA_R },
    steps: STEPS,
    warmup: WARMUP,
    repeats: REPEATS,
  };
  const cases: Record<string, Result & { runs?: number[] }> = {};
  const overhead = ['bare', 'bare-item', 'trainer', 'trainer-nopipe'].filter((c) => CASES.has(c));
  const runs: Record<string, Result[]> = {};
  for (let r = 0; r < REPEATS; r++)
    for (const c of overhead) {
      const res =
        c === 'bare' ? await bare(false) : c === 'bare-item' ? await bare(true) : await viaTrainer({ pipeline: c === 'trainer' });
      (runs[c] ??= []).push(res);
    }
  for (const [c, rs] of Object.entries(runs)) {
    const ms = median(rs.map((x) => x.msPerStep));
    const pick = rs.find((x) => x.msPerStep === ms)!;
    cases[c] = { ...pick, runs: rs.map((x) => +x.msPerStep.toFixed(3)) };
  }
  for (const base of ['f32', 'bf16', 'f16'] as const)
    if (CASES.has(`lora-${base}`)) cases[`lora-${base}`] = await viaTrainer({ lora: true, base });
  out.cases = cases;
  if (cases.bare && cases.trainer) {
    const pct = ((cases.trainer.msPerStep - cases.bare.msPerStep) / cases.bare.msPerStep) * 100;
    out.trainerOverheadPct = +pct.toFixed(2);
    out.trainerOverheadOk = pct <= 5;
  }
  if (cases['lora-f32'])
    out.mixedPrecision = Object.fromEntries(
      (['bf16', 'f16'] as const)
        .filter((b) => cases[`lora-${b}`])
        .map((b) => [
          b,
          {
            peakMemoryRatio: +(cases[`lora-${b}`]!.peakBytes / cases['lora-f32']!.peakBytes).toFixed(3),
            tokensPerSecRatio: +(cases[`lora-${b}`]!.tokensPerSec / cases['lora-f32']!.tokensPerSec).toFixed(3),
          },
        ]),
    );
  console.log(JSON.stringify(out, null, 2));
}

main().catch((e) => {
  console.log(JSON.stringify({ bench: 'trainer', error: String(e?.stack ?? e) }));
  process.exit(1);
});
