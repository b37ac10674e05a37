// Benchmark: one full training step (forward, backward, AdamW), in tokens/s and peak GPU memory.
// Prints one JSON object. Default: the issue-6 configuration (vocab 8192, hidden 512, intermediate 1376,
// 8 layers, 8 heads of 64, batch 16 x 256, f32). `--quick`: a tiny model for a CPU adapter.
// Flags: --arch llama|mistral|qwen2|qwen3|gemma3 (default llama; the same sizes in each architecture: Mistral
// and Gemma 3 with a 128-key sliding window, half the sequence), --steps N (timed steps, default 10),
// --warmup N (default 3), --checkpointing, --profile, --mp f16 (mixed precision as PyTorch autocast: the
// projections, LM head and attention on f16 inputs with f32 accumulation, tensor cores where the adapter has
// them; f32 master weights and AdamW; no loss scaling in this loop), --matmul-precision highest|high (f32 products), --f16x3-min-dim N
// (f16x3Tuning.minDim), --mm-tuning FILE (a `setMatmulTuning` table, e.g. matmul-sweep's `--best` file: the f32
// products of these shapes run the table's choices instead of `auto`).
// PyTorch side: train_torch.py [--mp].
import { readFileSync } from 'node:fs';
import { createContext, f16x3Tuning, setF32MatmulPrecision, setMatmulTuning, type F32MatmulPrecision } from '@rusty/backend';
import { AdamW, Tensor, tidy, type ComputeDtype } from '@rusty/autograd';
import { CausalLM, parseModelConfig } from '../index';
import { timeSteps } from './time-steps';

const args = process.argv.slice(2);
const flag = (n: string) => args.includes(n);
const num = (n: string, d: number) => {
  const i = args.indexOf(n);
  return i >= 0 ? Number(args[i + 1]) : d;
};
const quick = flag('--quick');
const cfg = quick
  ? { vocab: 512, hidden: 64, inter: 176, layers: 2, heads: 4, batch: 2, seq: 32 }
  : { vocab: 8192, hidden: 512, inter: 1376, layers: 8, heads: 8, batch: 16, seq: 256 };
const steps = num('--steps', quick ? 3 : 10);
const warmup = num('--warmup', quick ? 1 : 3);

const mp = (args.includes('--mp') ? args[args.indexOf('--mp') + 1]! : 'no') as ComputeDtype | 'no';
if (mp !== 'no' && mp !== 'f16') throw new Error(`--mp ${mp}: f16 or no`);

const ctx = await createContext({ profile: flag('--profile') });
// --matmul-precision high: f32 products on f16 tensor cores, three per product (backend ops/core/matmul-f16x3.ts)
const precision = (args.includes('--matmul-precision') ? args[args.indexOf('--matmul-precision') + 1] : 'highest') as F32MatmulPrecision;
setF32MatmulPrecision(ctx, precision);
if (args.includes('--f16x3-min-dim')) f16x3Tuning.minDim = Number(args[args.indexOf('--f16x3-min-dim') + 1]);
const mmTuning = args.includes('--mm-tuning') ? args[args.indexOf('--mm-tuning') + 1]! : null;
if (mmTuning) setMatmulTuning(ctx, JSON.parse(readFileSync(mmTuning, 'utf8')));
const arch = args.includes('--arch') ? args[args.indexOf('--arch') + 1]! : 'llama';
const ARCH: Record<string, Record<string, unknown>> = {
  llama: { model_type: 'llama' },
  mistral: { model_type: 'mistral', sliding_window: 128 },
  qwen2: { model_type: 'qwen2' },
  qwen3: { model_type: 'qwen3', head_dim: cfg.hidden / cfg.heads },
  gemma3: {
    model_type: 'gemma3_text', head_dim: cfg.hidden / cfg.heads, query_pre_attn_scalar: cfg.hidden / cfg.heads,
    sliding_window: 128, tie_word_embeddings: false,
  },
};
if (!ARCH[arch]) throw new Error(`--arch ${arch}: one of ${Object.keys(ARCH).join(', ')}`);
const config = parseModelConfig({
  ...ARCH[arch],
  vocab_size: cfg.vocab,
  hidden_size: cfg.hidden,
  intermediate_size: cfg.inter,
  num_hidden_layers: cfg.layers,
  num_attention_heads: cfg.heads,
  num_key_value_heads: cfg.heads,
  max_position_embeddings: Math.max(2048, cfg.seq),
  rms_norm_eps: 1e-5,
});
const model = new CausalLM(ctx, config, { seed: 1, gradientCheckpointing: flag('--checkpointing'), computeDtype: mp === 'no' ? null : mp });
const params = model.parameters();
const opt = new AdamW(ctx, params, { lr: 1e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
const n = cfg.batch * cfg.seq;
const ids = Int32Array.from({ length: n }, (_, i) => (i * 7919 + 13) % cfg.vocab);
const input = Tensor.fromArray(ctx, ids, [cfg.batch, cfg.seq], { dtype: 'i32' });

function step(): Tensor {
  opt.zeroGrad();
  const loss = tidy(() => {
    const l = model.loss(input, ids, { logits: false }).loss;
    l.backward();
    return l;
  });
  opt.step();
  return loss;
}

const timing = await timeSteps(ctx, step, { warmup, steps, profile: flag('--profile') });
const ms = timing.stepMs;
const out = {
  bench: 'train-step',
  arch,
  adapter: `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim(),
  config: { ...cfg, dtype: 'f32', compute: mp === 'no' ? 'f32' : mp, matmulPrecision: precision, f16x3MinDim: f16x3Tuning.minDim, mmTuning, checkpointing: flag('--checkpointing') },
  parameters: params.reduce((a, p) => a + p.size, 0),
  stepMs: ms,
  tokensPerSecond: n / (ms / 1000),
  encodeCpuMsPerStep: timing.encodeCpuMsPerStep,
  dispatchesPerStep: timing.dispatchesPerStep,
  peakBytes: ctx.memory.peak,
  loss: timing.loss,
  profile: timing.profile?.slice(0, 15),
};
console.log(JSON.stringify(out));
ctx.destroy();
