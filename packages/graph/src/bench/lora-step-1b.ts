// Benchmark: the LoRA fine-tuning step of issue 13 through the public API, without the CLI around it (a program
// that prints one JSON object, not a test). Default: TinyLlama's shape (hidden 2048, intermediate 5632, 22 layers,
// 32 heads / 4 KV heads, vocab 32000), frozen weights in f16, LoRA r = 16 (alpha 32) on all seven projections,
// batch 4 x 512, AdamW over the adapters, compute f16 (autocast: projections and attention on f16 inputs, tensor
// cores where the adapter has them). Random frozen weights are tiled from one 8M-value random block copied on
// the GPU (making 1.1B random numbers on the host takes a minute; the block is random enough for timing).
// Reports ms per step, tokens/s, host encoding ms and dispatches per step, peak GPU memory (allocated and
// reserved), and with --profile the top kernels by GPU time.
//   node lora-step-1b.mjs [--compute f16|f32] [--weights f16|bf16|f32] [--matmul-precision highest|high] [--layers 22] [--hidden 2048] [--inter 5632]
//                         [--heads 32] [--kv 4] [--vocab 32000] [--batch 4] [--seq 512] [--r 16] [--steps 10]
//                         [--warmup 3] [--checkpointing] [--profile] [--quick] [--tc-min-big N] [--f16-images]
//                         [--lowrank-wg N]
// --lowrank-wg N: tuning, the workgroups lowRankOuter aims for (lowRankTuning.workgroups).
// --tc-min-big: tuning, the tile count from which the tensor-core matmul takes its big tile (tcTuning.minBigTiles).
import { cast, createContext, lowRankTuning, prepareF16Images, setF32MatmulPrecision, tcTuning, type DType, type F32MatmulPrecision } from '@rusty/backend';
import { AdamW, Tensor, tidy, type ComputeDtype } from '@rusty/autograd';
import { applyLora, CausalLM, loraTargets, parseModelConfig } from '../index';
import { timeSteps } from './time-steps';

const args = process.argv.slice(2);
const flag = (n: string) => args.includes(n);
const str = (n: string, d: string) => (args.includes(n) ? args[args.indexOf(n) + 1]! : d);
const num = (n: string, d: number) => Number(str(n, String(d)));
const quick = flag('--quick');
const cfg = {
  layers: num('--layers', quick ? 2 : 22),
  hidden: num('--hidden', quick ? 64 : 2048),
  inter: num('--inter', quick ? 176 : 5632),
  heads: num('--heads', quick ? 4 : 32),
  kv: num('--kv', quick ? 2 : 4),
  vocab: num('--vocab', quick ? 512 : 32000),
  batch: num('--batch', quick ? 2 : 4),
  seq: num('--seq', quick ? 32 : 512),
  r: num('--r', 16),
};
const compute = str('--compute', 'f16') as ComputeDtype;
const weights = str('--weights', 'f16') as DType;
const steps = num('--steps', quick ? 3 : 10);
const warmup = num('--warmup', quick ? 1 : 3);

const ctx = await createContext({ profile: flag('--profile') });
// --matmul-precision high: f32 products on f16 tensor cores, three per product (see backend ops/core/matmul-f16x3.ts)
const precision = str('--matmul-precision', 'highest') as F32MatmulPrecision;
setF32MatmulPrecision(ctx, precision);
if (args.includes('--tc-min-big')) tcTuning.minBigTiles = num('--tc-min-big', tcTuning.minBigTiles);
if (args.includes('--lowrank-wg')) lowRankTuning.workgroups = num('--lowrank-wg', lowRankTuning.workgroups);
const config = parseModelConfig({
  model_type: 'llama',
  vocab_size: cfg.vocab,
  hidden_size: cfg.hidden,
  intermediate_size: cfg.inter,
  num_hidden_layers: cfg.layers,
  num_attention_heads: cfg.heads,
  num_key_value_heads: cfg.kv,
  max_position_embeddings: Math.max(2048, cfg.seq),
  rms_norm_eps: 1e-5,
  tie_word_embeddings: false,
});
const t0 = performance.now();
const model = new CausalLM(ctx, config, { dtype: weights, empty: true, gradientCheckpointing: flag('--checkpointing') });
const BLOCK = 1 << 23;
// --f16-images (f32 weights): bf16 values in f32, as a bf16 checkpoint loads, and their f16 images kept as the
// Trainer keeps them for a run
const images = flag('--f16-images') && weights === 'f32';
const block = Tensor.randn(ctx, [BLOCK], { dtype: images ? 'bf16' : weights, std: 0.02, seed: 1 });
if (images) block.assign(cast(ctx, block.data, 'f32'));
const ones = Tensor.ones(ctx, [Math.max(cfg.hidden, cfg.inter)], { dtype: weights });
const bytesPer = weights === 'f32' ? 4 : 2;
for (const [name, p] of model.namedParameters()) {
  p.requiresGrad = false;
  const total = p.size * bytesPer;
  const src = name.includes('norm') ? ones : block;
  const srcBytes = src.size * bytesPer;
  for (let off = 0; off < total; off += srcBytes) ctx.copy(src.data.buffer, p.data.buffer, Math.min(srcBytes, total - off), 0, off);
}
block.dispose();
ones.dispose();
applyLora(model, { r: cfg.r, alpha: 2 * cfg.r, targetModules: [...loraTargets(config)], seed: 0 });
model.setComputeDtype(compute);
const imageCount = images ? await prepareF16Images(ctx, model.linearWeights().filter((p) => !p.requiresGrad && p.dtype === 'f32').map((p) => p.data)) : 0;
const trainable = [...model.namedParameters()].filter(([, p]) => p.requiresGrad).map(([, p]) => p);
const opt = new AdamW(ctx, trainable, { lr: 1e-4, weightDecay: 0 });
const n = cfg.batch * cfg.seq;
const ids = Int32Array.from({ length: n }, (_, i) => (i * 7919 + 13) % cfg.vocab);
const input = Tensor.fromArray(ctx, ids, [cfg.batch, cfg.seq], { dtype: 'i32' });
await ctx.sync();
const buildMs = performance.now() - t0;

function step(): Tensor {
  opt.zeroGrad();
  const loss = tidy(() => {
    const l = model.loss(input, ids).loss;
    l.backward();
    return l;
  });
  opt.step();
  return loss;
}

const timing = await timeSteps(ctx, step, { warmup, steps, profile: flag('--profile') });
const ms = timing.stepMs;
const profile = timing.profile;
console.log(
  JSON.stringify({
    bench: 'lora-step-1b',
    adapter: `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim(),
    config: { ...cfg, compute, weights, matmulPrecision: precision, f16Images: imageCount, checkpointing: flag('--checkpointing'), tcMinBigTiles: tcTuning.minBigTiles, lowRank: { ...lowRankTuning } },
    trainableTensors: trainable.length,
    buildMs: Math.round(buildMs),
    stepMs: +ms.toFixed(2),
    tokensPerSecond: Math.round(n / (ms / 1000)),
    encodeCpuMsPerStep: +timing.encodeCpuMsPerStep.toFixed(2),
    dispatchesPerStep: timing.dispatchesPerStep,
    peakGiB: +(ctx.memory.peak / 2 ** 30).toFixed(3),
    peakReservedGiB: +(ctx.memory.peakReserved / 2 ** 30).toFixed(3),
    loss: timing.loss,
    profileGpuMsPerStep: profile ? +(profile.reduce((a, e) => a + e.totalMs, 0) / steps).toFixed(2) : undefined,
    profile: profile?.slice(0, 25).map((e) => ({ ...e, msPerStep: +(e.totalMs / steps).toFixed(3) })),
  }),
);
ctx.destroy();
