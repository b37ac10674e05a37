// Benchmark: QLoRA against LoRA on a 16-bit base (a program, not a test). Prints one JSON object.
// Default: the 1.1B configuration of issue 11 (TinyLlama's shape: vocab 32000, hidden 2048, intermediate 5632,
// 22 layers, 32 heads / 4 KV heads), bf16 weights from a repeated pseudo-random pattern, LoRA r=16 on all seven projections,
// AdamW, batch 4 x 512. For each base (bf16 frozen weights; NF4 with double quantization, the LM head and
// embeddings kept bf16; optionally int4 / int8) it reports the weight bytes on the GPU, the training step's
// tokens/s and the peak GPU memory of the steps (the pool's live bytes: weights, adapters, optimizer state,
// activations). `--quick`: a tiny model for a CPU adapter. Flags: --layers N, --steps N (timed, default 5),
// --warmup N (default 2), --formats nf4,int4,int8.
import { createContext, f32ToBf16Bits, quantSpec, type QuantFormat } from '@rusty/backend';
import { AdamW, Tensor, tidy } from '@rusty/autograd';
import { applyLora, CausalLM, packQuantized, parseModelConfig, quantizedLinears, quantizeLinears } from '@rusty/graph';

const args = process.argv.slice(2);
const flag = (n: string) => args.includes(n);
const val = (n: string) => (args.includes(n) ? args[args.indexOf(n) + 1] : undefined);
const quick = flag('--quick');
const cfg = quick
  ? { vocab: 512, hidden: 128, inter: 352, layers: 2, heads: 4, kv: 2, batch: 2, seq: 32 }
  : { vocab: 32000, hidden: 2048, inter: 5632, layers: Number(val('--layers') ?? 22), heads: 32, kv: 4, batch: 4, seq: 512 };
const steps = Number(val('--steps') ?? (quick ? 2 : 5));
const warmup = Number(val('--warmup') ?? (quick ? 1 : 2));
const formats = (val('--formats') ?? 'nf4').split(',') as QuantFormat[];

const ctx = await createContext();
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
});
const n = cfg.batch * cfg.seq;
const ids = Int32Array.from({ length: n }, (_, i) => (i * 7919 + 13) % cfg.vocab);
const targets = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

/** Random bf16 weights (std 0.02; norms 1) written from one 4 MiB host pattern: host-side randn of 1.1B values
 *  would take about a minute. */
const PATTERN = new Uint16Array(1 << 21).map((_, i) => f32ToBf16Bits(0.02 * Math.sin(i * 12.9898 + 78.233 * (i % 977))));
function fillWeights(model: CausalLM): void {
  for (const [name, p] of model.namedParameters()) {
    const bytes = (p.size * 2 + 3) & ~3;
    if (/norm/.test(name)) {
      ctx.write(p.data.buffer, new Uint16Array(bytes / 2).fill(0x3f80));
      continue;
    }
    const chunk = new Uint8Array(PATTERN.buffer);
    for (let off = 0; off < bytes; off += chunk.byteLength) ctx.write(p.data.buffer, chunk.subarray(0, Math.min(chunk.byteLength, bytes - off)), off);
  }
}

async function run(base: 'bf16' | QuantFormat): Promise<Record<string, unknown>> {
  const model = new CausalLM(ctx, config, { empty: true, dtype: 'bf16' });
  fillWeights(model);
  if (base !== 'bf16') {
    quantizeLinears(model, quantSpec(base, undefined, base === 'nf4'));
    await packQuantized(ctx, [...quantizedLinears(model).values()]); // as quantize-at-load does
  }
  await ctx.sync();
  ctx.trimPool();
  const weightBytes = ctx.memory.live;
  applyLora(model, { r: 16, alpha: 32, targetModules: targets, seed: 2 });
  const params = model.trainableParameters().map(([, p]) => p);
  const opt = new AdamW(ctx, params, { lr: 1e-4, weightDecay: 0 });
  const input = Tensor.fromArray(ctx, ids, [cfg.batch, cfg.seq], { dtype: 'i32' });
  const step = (): Tensor => {
    opt.zeroGrad();
    const loss = tidy(() => {
      const l = model.loss(input, ids).loss;
      l.backward();
      return l;
    });
    opt.step();
    return loss;
  };
  for (let i = 0; i < warmup; i++) step().dispose();
  await ctx.sync();
  ctx.resetPeak();
  const t0 = performance.now();
  let last: Tensor | null = null;
  for (let i = 0; i < steps; i++) {
    last?.dispose();
    last = step();
  }
  const loss = await last!.item();
  const ms = (performance.now() - t0) / steps;
  const out = { base, weightBytes, stepMs: ms, tokensPerSecond: n / (ms / 1000), peakBytes: ctx.memory.peak, loss };
  last!.dispose();
  input.dispose();
  opt.dispose();
  model.dispose();
  await ctx.sync();
  ctx.trimPool();
  process.stderr.write(`qlora-bench: ${JSON.stringify(out)}\n`);
  return out;
}

const rows = [await run('bf16')];
for (const f of formats) rows.push(await run(f));
const ref = rows[0]!;
console.log(
  JSON.stringify({
    bench: 'qlora',
    adapter: `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim(),
    config: { ...cfg, lora: { r: 16, targets: 'all seven projections' } },
    rows: rows.map((r) => ({
      ...r,
      weightRatio: (r.weightBytes as number) / (ref.weightBytes as number),
      peakRatio: (r.peakBytes as number) / (ref.peakBytes as number),
      speedRatio: (r.tokensPerSecond as number) / (ref.tokensPerSecond as number),
    })),
  }),
);
ctx.destroy();
