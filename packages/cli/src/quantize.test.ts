// QLoRA from the command line, in-process: finetune --quantize nf4 on a bf16 base with --merge (the merged model is
// written in bf16, the base's dtype, and the run says so), generate --quantize, and flag errors; a directory saved
// quantized (saveQuantized) fine-tuned and generated from as stored, with the run's summary of GPU memory and
// cost per step (printed and in metrics.jsonl).
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, type Context } from '@rusty/backend';
import { CausalLM, parseModelConfig } from '@rusty/graph';
import { loadPretrained, readSafetensors, saveQuantized } from '@rusty/loader';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from './main';
import { defaultTokenizer, saveModelDir } from './model-io';

let work: string;
let ctx: Context;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'rusty-qlora-'));
  ctx = await createContext();
  // a small bf16 base model with the byte tokenizer
  const config = parseModelConfig({
    model_type: 'llama',
    vocab_size: 259,
    hidden_size: 64,
    intermediate_size: 160,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: 128,
    rms_norm_eps: 1e-5,
  });
  const model = new CausalLM(ctx, config, { seed: 3, initStd: 0.05, dtype: 'bf16' });
  await saveModelDir(model, defaultTokenizer(), join(work, 'base'), { dtype: 'bf16' });
  model.dispose();
  writeFileSync(join(work, 'notes.txt'), 'the gpu dequantizes four-bit weights inside the matmul.\n'.repeat(40));
});
afterAll(() => {
  ctx.destroy();
  rmSync(work, { recursive: true, force: true });
});
afterEach(() => vi.restoreAllMocks());

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
  vi.spyOn(console, 'log').mockImplementation((...a) => void out.push(a.join(' ') + '\n'));
  vi.spyOn(console, 'error').mockImplementation((...a) => void err.push(a.join(' ') + '\n'));
  return { out: () => out.join(''), err: () => err.join('') };
}

describe('rusty --quantize', () => {
  it('finetune --quantize nf4 --merge: QLoRA, then the merged model in bf16, the base dtype', async () => {
    const c = capture();
    const code = await main([
      'finetune', '--model', join(work, 'base'), '--data', join(work, 'notes.txt'), '--out', join(work, 'qlora'),
      '--quantize', 'nf4', '--targets', 'all', '--r', '4', '--alpha', '8', '--steps', '3', '--seq-len', '32', '--batch-size', '2',
      '--val-split', '0', '--merge', '--log-every', '1',
    ]);
    expect(code, c.err()).toBe(0);
    expect(c.err()).toMatch(/QLoRA: 14 base projections quantized to nf4 \(blocks of 64, double-quantized scales\)/);
    expect(c.err()).toMatch(/--merge: dequantized the nf4 base back to bf16 \(its stored dtype\), added the LoRA update, writing bf16 weights/);
    expect(c.out()).toMatch(/--quantize nf4/);
    const st = await readSafetensors(join(work, 'qlora', 'merged', 'model.safetensors'));
    expect(st.tensors.get('model.layers.0.self_attn.q_proj.weight')).toMatchObject({ dtype: 'BF16', shape: [64, 64] });
    expect([...st.tensors.keys()].some((k) => k.includes('lora_') || k.endsWith('_scale'))).toBe(false);
    await st.close();
    // the adapter applies to the quantized base for generation, and the merged model generates on its own
    const g = capture();
    expect(await main(['generate', '--model', join(work, 'base'), '--adapter', join(work, 'qlora'), '--quantize', 'nf4', '--ids', '5,6', '-n', '3', '--temperature', '0']), g.err()).toBe(0);
    expect(await main(['generate', '--model', join(work, 'qlora', 'merged'), '--ids', '5,6', '-n', '3', '--temperature', '0']), g.err()).toBe(0);
    const outs = g.out().trim().split('\n').map((l) => JSON.parse(l) as number[]);
    expect(outs.map((o) => o.length)).toEqual([3, 3]);
  });

  it('inspect shows a quantized safetensors file: codes beside their scales, the format from the metadata', async () => {
    const { model } = await loadPretrained(ctx, join(work, 'base'), { quantize: 'int4', groupSize: 32 });
    const file = join(work, 'int4.safetensors');
    await saveQuantized(model, file);
    model.dispose();
    const c = capture();
    expect(await main(['inspect', file]), c.err()).toBe(0);
    expect(c.out()).toMatch(/model\.layers\.0\.mlp\.down_proj\.weight +U8 +\[64, 80\]/);
    expect(c.out()).toMatch(/model\.layers\.0\.mlp\.down_proj\.weight_scale +F16 +\[64, 5\]/);
    expect(c.out()).toMatch(/quantized: int4, blocks of 32; 14 linear layers/);
  });

  it('finetune and generate take a directory saved quantized as stored; the summary and metrics.jsonl give peak GPU memory and cost per step', async () => {
    const dir = join(work, 'saved-nf4');
    mkdirSync(dir, { recursive: true });
    const { model } = await loadPretrained(ctx, join(work, 'base'), { quantize: 'nf4' });
    await saveQuantized(model, join(dir, 'model.safetensors'));
    model.dispose();
    for (const f of ['config.json', 'tokenizer.json']) copyFileSync(join(work, 'base', f), join(dir, f));
    const c = capture();
    const steps = 5;
    const code = await main([
      'finetune', '--model', dir, '--data', join(work, 'notes.txt'), '--out', join(work, 'saved-lora'),
      '--targets', 'all', '--r', '4', '--alpha', '8', '--steps', String(steps), '--seq-len', '32', '--batch-size', '2', '--val-split', '0', '--log-every', '1',
    ]);
    expect(code, c.err()).toBe(0);
    expect(c.err()).toMatch(/finetune: --model \S+saved-nf4 is saved quantized \(nf4, blocks of 64, double-quantized scales\): its 14 projections load as stored/);
    expect(c.err()).toMatch(/QLoRA: 14 base projections quantized to nf4/);
    expect(c.out()).toMatch(/GPU memory +peak \d+(\.\d+)? (KiB|MiB) allocated, \d+(\.\d+)? (KiB|MiB) held with the buffer pool's cache/);
    expect(c.out()).toMatch(/per step +\d+\.\d ms, host encoding \d+\.\d ms, \d+ dispatches; \S+ tok\/s \(median of steps 3-4\)/);
    const records = readFileSync(join(work, 'saved-lora', 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const train = records.filter((r) => r.kind === 'train');
    expect(train).toHaveLength(steps);
    // each step's line has the host's encoding time
    for (const r of train) expect(r.hostTime > 0 && r.hostTime < r.elapsed, JSON.stringify(r)).toBe(true);
    const s = records.at(-1);
    expect(s).toMatchObject({ kind: 'summary', step: steps, steps, steadySteps: [3, 4] });
    // the peak covers at least the weights: the NF4 codes of 14 projections (0.5 byte per weight) and the bf16 embedding
    expect(s.peakBytes).toBeGreaterThan(2 * (4 * 64 * 64 + 3 * 64 * 160) * 0.5 + 259 * 64 * 2);
    expect(s.peakReservedBytes).toBeGreaterThanOrEqual(s.peakBytes);
    expect(Number.isInteger(s.dispatchesPerStep) && s.dispatchesPerStep > 50).toBe(true);
    expect(s.stepMs).toBeGreaterThan(0);
    expect(s.hostMsPerStep).toBeCloseTo(((train[2].hostTime + train[3].hostTime) / 2) * 1000, 6);
    // 2 x 32 tokens per step: the median rate is near the rate of the median step time
    expect(Math.abs((s.tokensPerSec * s.stepMs) / (2 * 32 * 1000) - 1)).toBeLessThan(0.2);
    // generate from it (no --quantize needed), with the adapter; another format is refused before the GPU starts
    const g = capture();
    expect(await main(['generate', '--model', dir, '--adapter', join(work, 'saved-lora'), '--ids', '5,6', '-n', '3', '--temperature', '0']), g.err()).toBe(0);
    expect(JSON.parse(g.out())).toHaveLength(3);
    expect(await main(['generate', '--model', dir, '--quantize', 'int4', '--ids', '5'])).toBe(2);
    expect(g.err()).toMatch(/--quantize int4: --model \S+saved-nf4 is saved quantized \(nf4, blocks of 64, double-quantized scales\) and loads as stored; leave out --quantize/);
  });

  it('generate --quantize int8 and int4 from the same base; flag errors are one line, exit 2', async () => {
    for (const q of ['int8', 'int4']) {
      const c = capture();
      const code = await main(['generate', '--model', join(work, 'base'), '--quantize', q, '--ids', '1,2,3', '-n', '5', '--temperature', '0']);
      expect(code, c.err()).toBe(0);
      const ids = JSON.parse(c.out());
      expect(ids).toHaveLength(5);
    }
    const c = capture();
    expect(await main(['generate', '--model', join(work, 'base'), '--quantize', 'int3', '--ids', '1'])).toBe(2);
    expect(await main(['generate', '--model', join(work, 'base'), '--quantize', 'int4', '--group-size', '48', '--ids', '1'])).toBe(2);
    expect(await main(['generate', '--model', join(work, 'base'), '--group-size', '64', '--ids', '1'])).toBe(2);
    expect(c.err()).toMatch(/must be one of int8, int4, nf4/);
    expect(c.err()).toMatch(/--group-size 48 is not supported by int4/);
    expect(c.err()).toMatch(/--group-size needs --quantize/);
  });
});
