// Mixed precision: the GPU-side GradScaler (unscale, skip, scale update) and the Trainer's f16/bf16 frozen weights
// and dynamic loss scaling. (Moved out of trainer.test.ts, unchanged.)
import { join } from 'node:path';
import { ConfigError, createContext, f16ImageStats, f16ImageTuning, sizeClass, upload, type Context } from '@rusty/backend';
import { AdamW, scale, sum, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findLatestCheckpoint, listCheckpoints, loadCheckpoint } from './checkpoint/checkpoint';
import { GradScaler } from './grad-scaler';
import { castFrozenParameters, checkF16Range } from './mixed-precision';
import { Trainer, type StepMetrics } from './trainer';
import { applyLora, LlamaForCausalLM, parseLlamaConfig } from '@rusty/graph';
import { DataLoader } from './data/dataloader';
import { setup, snapshot, syntheticDataset, TINY, trainables } from './test/helpers';
import { tempDirs } from './test/temp-dirs';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx?.destroy());

const tmp = tempDirs();

describe('GradScaler', () => {
  it('starts at 2^16, seeds backward with the scale, unscales exactly and grows after growthInterval clean steps', async () => {
    const scaler = new GradScaler(ctx, { growthInterval: 3 });
    expect(await scaler.getScale()).toBe(65536);
    const w = Tensor.fromArray(ctx, [1, -2, 3], [3], { requiresGrad: true });
    const opt = new AdamW(ctx, [w], { lr: 0.1, weightDecay: 0 });
    for (let s = 0; s < 3; s++) {
      opt.zeroGrad();
      const y = sum(scale(w, 0.5)); // dy/dw = 0.5
      const g = scaler.lossGradient(y);
      y.backward(g);
      g.dispose();
      y.dispose();
      // before unscale the gradient carries the scale
      if (s === 0) expect([...(await w.grad!.toArray())]).toEqual([32768, 32768, 32768]);
      scaler.unscaleAndCheck([w]);
      if (s === 0) expect([...(await w.grad!.toArray())]).toEqual([0.5, 0.5, 0.5]);
      scaler.step(opt);
      scaler.update();
    }
    expect(await scaler.getScale()).toBe(131072); // 3 clean steps with growthInterval 3
    const st = await scaler.stateDict();
    expect(st).toMatchObject({ scale: 131072, growthTracker: 0 });
    const loss = Tensor.fromArray(ctx, [2.5], [1], { requiresGrad: true });
    const g = scaler.lossGradient(loss, 0.5);
    expect([...(await g.toArray())]).toEqual([65536]);
    const scaled = scaler.scaleLoss(loss);
    expect(await scaled.item()).toBe(2.5 * 131072);
    g.dispose();
    scaled.dispose();
    scaler.dispose();
    opt.dispose();
  });

  it('an inf/NaN gradient skips exactly that step on the GPU (parameters bit-identical) and halves the scale', async () => {
    const scaler = new GradScaler(ctx);
    const w = Tensor.fromArray(ctx, [1, -2, 3, 4], [4], { requiresGrad: true });
    const opt = new AdamW(ctx, [w], { lr: 0.1 });
    const before = await snapshot([w]);
    w.grad = Tensor.fromArray(ctx, [1, Infinity, 0, 1], [4]);
    scaler.unscaleAndCheck(opt);
    scaler.step(opt);
    scaler.update();
    expect(await snapshot([w])).toEqual(before);
    expect(await scaler.getScale()).toBe(32768);
    w.grad.dispose();
    w.grad = Tensor.fromArray(ctx, [NaN, 0, 0, 0], [4]);
    scaler.step(opt);
    scaler.update();
    expect(await snapshot([w])).toEqual(before);
    expect(await scaler.getScale()).toBe(16384);
    // a clean step moves the weights
    w.grad.dispose();
    w.grad = Tensor.fromArray(ctx, [1, 1, 1, 1], [4]);
    scaler.step(opt);
    scaler.update();
    expect(await snapshot([w])).not.toEqual(before);
    expect(await scaler.getScale()).toBe(16384);
    scaler.dispose();
    opt.dispose();
  });
});


describe('mixed precision', () => {
  it('16-bit frozen base weights halve their memory; LoRA trains with f32 masters and stays close to the f32 base', async () => {
    const losses: Record<string, number[]> = {};
    for (const dtype of ['f32', 'bf16', 'f16'] as const) {
      const { model, optimizer, data } = setup(ctx, { lora: true, shuffle: false });
      const live0 = ctx.memory.live;
      if (dtype !== 'f32') {
        const r = castFrozenParameters(model, dtype);
        expect(r.cast).toContain('model.layers.0.self_attn.q_proj.weight');
        expect(r.cast).not.toContain('model.layers.0.self_attn.q_proj.lora_A.weight');
        expect(ctx.memory.live).toBeLessThan(live0);
        expect(live0 - ctx.memory.live).toBeGreaterThan(0.8 * r.bytesSaved); // pool size classes round buffer sizes
        expect(model.layers[0]!.selfAttn.child('q_proj')!.stateDict().get('weight')!.dtype).toBe(dtype);
      }
      for (const [, p] of model.trainableParameters()) expect(p.dtype).toBe('f32');
      losses[dtype] = [];
      const t = new Trainer({ model, optimizer, data, maxSteps: 4, signals: false, scaler: dtype === 'f16' ? new GradScaler(ctx) : undefined, callbacks: { onStep: (m) => void losses[dtype]!.push(m.loss) } });
      await t.fit();
      // training moved the LoRA B matrices away from their zero init (the base stayed frozen)
      const b = model.trainableParameters().find(([n]) => n.endsWith('lora_B.weight'))![1];
      expect(Math.max(...Array.from(await b.toArray(), Math.abs))).toBeGreaterThan(0);
      t.scaler?.dispose();
      t.dispose();
      optimizer.dispose();
      model.dispose();
    }
    for (const d of ['bf16', 'f16'] as const) losses[d]!.forEach((l, i) => expect(Math.abs(l - losses.f32![i]!)).toBeLessThan(0.02 * losses.f32![i]!));
  });

  it('Trainer({ mixedPrecision: "f16" }) casts the frozen weights and scales the loss by 2^16, unscaling the gradients exactly', async () => {
    // the same run with and without loss scaling: scaling the loss by 2^16 and the gradients back by 2^-16 is
    // exact in f32, so gradient norms, losses and trained weights agree; a scale applied on one side only is
    // off by 2^16 in the gradient norms
    const run = async (lossScaling: boolean) => {
      const { model, optimizer, data } = setup(ctx, { lora: true, shuffle: false });
      const steps: StepMetrics[] = [];
      // f32 compute: scaling is exact there (f16 products would round the scaled and unscaled gradients differently)
      const t = new Trainer({ model, optimizer, data, maxSteps: 3, mixedPrecision: { dtype: 'f16', compute: 'f32', lossScaling }, signals: false, callbacks: { onStep: (m) => void steps.push(m) } });
      expect(!!t.scaler).toBe(lossScaling);
      await t.fit();
      expect(model.layers[1]!.mlp.child('up_proj')!.stateDict().get('weight')!.dtype).toBe('f16');
      const weights = await snapshot(trainables(model));
      t.dispose();
      optimizer.dispose();
      model.dispose();
      return { steps, weights };
    };
    const scaled = await run(true);
    const plain = await run(false);
    expect(scaled.steps.map((m) => m.lossScale)).toEqual([65536, 65536, 65536]);
    expect(scaled.steps.map((m) => m.skipped)).toEqual([false, false, false]);
    scaled.steps.forEach((m, i) => {
      const ref = plain.steps[i]!;
      expect(m.loss).toBe(ref.loss);
      expect(ref.gradNorm).toBeGreaterThan(0);
      expect(Math.abs(m.gradNorm - ref.gradNorm)).toBeLessThanOrEqual(1e-6 * ref.gradNorm);
    });
    const a = new Float32Array(scaled.weights.buffer);
    const b = new Float32Array(plain.weights.buffer);
    let worst = 0;
    for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
    expect(worst).toBeLessThan(1e-6);
  });

  it("mixedPrecision 'f16' and 'bf16': f16 compute (its rounding visible) with loss scaling, close to the f32 run; 'bf16' keeps bf16 storage", async () => {
    const run = async (mp: 'f16' | 'bf16' | { dtype: 'f16'; compute: 'f32' } | null) => {
      const { model, optimizer, data } = setup(ctx, { lora: true, shuffle: false });
      const losses: number[] = [];
      const t = new Trainer({ model, optimizer, data, maxSteps: 4, mixedPrecision: mp ?? undefined, signals: false, callbacks: { onStep: (m) => void losses.push(m.loss) } });
      await t.fit();
      const w = model.layers[0]!.selfAttn.child('q_proj')!.stateDict().get('weight')!;
      const r = { losses, compute: t.compute, scaled: !!t.scaler, storage: w.dtype };
      t.dispose();
      optimizer.dispose();
      model.dispose();
      return r;
    };
    const f32 = await run(null);
    const storageOnly = await run({ dtype: 'f16', compute: 'f32' });
    for (const mp of ['f16', 'bf16'] as const) {
      const r = await run(mp);
      expect(r).toMatchObject({ compute: 'f16', scaled: true, storage: mp });
      r.losses.forEach((l, i) => expect(Math.abs(l - f32.losses[i]!), `${mp} step ${i}`).toBeLessThan(1e-2 * f32.losses[i]!));
      // the products ran on f16 inputs: the first loss differs from f32 compute on the same f16 weights
      if (mp === 'f16') expect(r.losses[0]).not.toBe(storageOnly.losses[0]);
    }
    expect(storageOnly).toMatchObject({ compute: 'f32', scaled: true, storage: 'f16' });
  });

  it('a LoRA run under f16 compute keeps a frozen bf16 LM head in f16 and the token embedding on the host: the same steps bit for bit, both back (same bytes) after fit', async () => {
    // vocab 4096: the head and the embedding [4096, 32] are 256 KiB each in bf16; the loss (one chunk of [32, 4096]
    // f32 logits and their gradient) is each step's peak
    const tableBytes = 4096 * 32 * 2;
    // a context of its own: the live bytes compared below then move only with this test's buffers, not when the
    // garbage collector finalizes tensors the tests before it left (it did, once, in a CI run: 1792 bytes)
    const ctx = await createContext();
    const run = async (before: boolean, lora?: boolean) => {
      const model = new LlamaForCausalLM(ctx, parseLlamaConfig({ ...TINY, vocab_size: 4096 }), { seed: 1, dtype: 'bf16' });
      applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], seed: 3 });
      if (before) {
        // the behaviour before: no parameter named for f16 storage (the loss casts the head every step), the
        // embedding stays on the GPU
        model.f16OperandParameters = () => [];
        model.offloadEmbedding = async () => null;
      }
      const head = model.lmHead!.weight;
      const emb = model.embedTokens.weight;
      const bytes = async (t: typeof head) => new Uint16Array(await ctx.read(t.data.buffer, tableBytes));
      const stored = [await bytes(head), await bytes(emb)];
      const optimizer = new AdamW(ctx, trainables(model), { lr: 3e-3 });
      const data = new DataLoader(syntheticDataset(), 2, { shuffle: false });
      const losses: number[] = [];
      const during: string[] = [];
      let stepPeak = 0;
      let live1 = 0;
      let held = 0;
      const t = new Trainer({
        model, optimizer, data, maxSteps: 2, mixedPrecision: 'bf16', signals: false, pipeline: false, lora,
        callbacks: {
          onStep: (m) => {
            losses.push(m.loss);
            during.push(`${head.dtype} ${emb.data.buffer.size}`);
            // the second step's peak above what is held between steps (not the load or the swap)
            if (m.step === 1) {
              ctx.resetPeak();
              live1 = ctx.memory.live;
            } else stepPeak = ctx.memory.peak - live1;
            held = live1 - l0;
          },
        },
      });
      const l0 = ctx.memory.live;
      await t.fit();
      const back = [await bytes(head), await bytes(emb)];
      const r = {
        losses, during, stepPeak, held, after: [head.dtype, emb.dtype],
        restored: back.map((b, i) => b.every((v, j) => v === stored[i]![j])),
        lora: await snapshot(trainables(model)),
      };
      t.dispose();
      optimizer.dispose();
      model.dispose();
      return r;
    };
    await run(true); // once first: what the context allocates for good on a first run (attention's buffers) is not in `held` below
    const before = await run(true);
    const now = await run(false);
    expect(before.during).toEqual(Array(2).fill(`bf16 ${sizeClass(tableBytes)}`));
    // the head in f16, the embedding's 4-byte stand-in
    expect(now.during).toEqual(Array(2).fill(`f16 ${sizeClass(4)}`));
    expect(now.after).toEqual(['bf16', 'bf16']);
    expect(now.restored).toEqual([true, true]);
    expect(now.losses).toEqual(before.losses);
    expect(now.lora).toEqual(before.lora);
    // between steps (above what was held before fit): the table less, its stand-in more; in a step: the head's f16
    // copy less
    expect(before.held - now.held).toBe(sizeClass(tableBytes) - sizeClass(4));
    expect(before.stepPeak - now.stepPeak).toBe(sizeClass(tableBytes));
    // the same with plain trainable-weight checkpoints (lora: false), as rusty finetune saves them
    const plain = await run(false, false);
    expect(plain.during).toEqual(now.during);
    expect(plain.losses).toEqual(now.losses);
    expect(plain.restored).toEqual([true, true]);
    ctx.destroy();
  });

  it('an f32 LoRA run keeps f16 images of its frozen bf16-valued weights for the run: same losses to f32 rounding, released at the end', async () => {
    const defaults = { ...f16ImageTuning };
    const run = async (images: boolean, minRows = 1, f16Images = true) => {
      Object.assign(f16ImageTuning, { minRows, minCols: 1, minK: 1, anywhere: images });
      const { model, optimizer, data } = setup(ctx, { lora: true });
      // the base weights as a bf16 checkpoint loaded in f32 holds them; one kept full f32 (no exact image)
      let frozen = 0;
      let first = true;
      for (const w of model.linearWeights()) {
        if (w.requiresGrad) continue;
        const v = Float32Array.from((await w.toArray()) as Float32Array);
        if (!first) {
          const u = new Uint32Array(v.buffer);
          for (let i = 0; i < u.length; i++) u[i] = (u[i]! + 0x7fff + ((u[i]! >>> 16) & 1)) & 0xffff0000;
          frozen++;
        }
        first = false;
        w.assign(upload(ctx, v, w.shape));
      }
      const during: number[] = [];
      const losses: number[] = [];
      const t = new Trainer({
        model, optimizer, data, maxSteps: 3, signals: false, pipeline: false, f16Images,
        callbacks: { onStep: (m) => void (losses.push(m.loss), during.push(f16ImageStats(ctx).count)) },
      });
      const d0 = ctx.stats.dispatches;
      await t.fit();
      const r = { frozen, during, after: f16ImageStats(ctx).count, losses, lora: await snapshot(trainables(model)), dispatches: ctx.stats.dispatches - d0 };
      t.dispose();
      optimizer.dispose();
      model.dispose();
      return r;
    };
    try {
      const plain = await run(false);
      const img = await run(true);
      expect(plain.during).toEqual([0, 0, 0]);
      expect(img.frozen).toBeGreaterThan(3);
      expect(img.during).toEqual(Array(3).fill(img.frozen));
      expect(img.after).toBe(0);
      // the products with an image ran on it: a split and a sum pass each, against a run that makes the images but
      // takes no product to them (at least the forward of every weight with an image and K >= 64, each step)
      expect((await run(true, 1, false)).during).toEqual([0, 0, 0]); // the Trainer's f16Images: false
      const unused = await run(true, Infinity);
      expect(unused.during).toEqual(img.during);
      const extra = img.dispatches - unused.dispatches;
      expect(extra % 2).toBe(0);
      expect(extra).toBeGreaterThanOrEqual(2 * 3 * 2);
      img.losses.forEach((l, i) => expect(Math.abs(l - plain.losses[i]!)).toBeLessThan(1e-5 * Math.abs(plain.losses[i]!)));
      const a = new Float32Array(img.lora.buffer);
      const b = new Float32Array(plain.lora.buffer);
      let worst = 0;
      let mag = 0;
      for (let i = 0; i < a.length; i++) (worst = Math.max(worst, Math.abs(a[i]! - b[i]!))), (mag = Math.max(mag, Math.abs(b[i]!)));
      expect(worst).toBeLessThan(1e-4 * mag);
    } finally {
      Object.assign(f16ImageTuning, defaults);
    }
  });

  it('f16 compute refuses weights beyond f16 range, naming them (a bf16 checkpoint value of 1e5)', async () => {
    const { model, optimizer, data } = setup(ctx, { lora: true });
    const w = model.layers[1]!.mlp.child('up_proj')!.stateDict().get('weight')!;
    const v = new Float32Array(w.size).fill(0.01);
    v[7] = -1.5e5;
    w.assign(upload(ctx, v, w.shape, 'bf16'));
    await expect(checkF16Range(model)).rejects.toThrow(ConfigError);
    const t = new Trainer({ model, optimizer, data, maxSteps: 2, mixedPrecision: 'bf16', signals: false });
    await expect(t.fit()).rejects.toThrow(/beyond it: 'model\.layers\.1\.mlp\.up_proj\.weight' \(max \|x\| 1\.\d+e\+5\)/);
    expect(t.step).toBe(0);
    t.dispose();
    // stored as f16 ('f16' mode casts the bf16 weight), the value is infinite: named too
    const t2 = new Trainer({ model, optimizer, data, maxSteps: 2, mixedPrecision: 'f16', signals: false });
    expect(w.dtype).toBe('f16');
    await expect(t2.fit()).rejects.toThrow(/'model\.layers\.1\.mlp\.up_proj\.weight' \(max \|x\| Infinity\)/);
    t2.dispose();
    // f32 compute needs no range
    const t3 = new Trainer({ model, optimizer, data, maxSteps: 1, mixedPrecision: { dtype: 'f16', compute: 'f32' }, signals: false });
    await t3.fit();
    expect(t3.step).toBe(1);
    t3.dispose();
    optimizer.dispose();
    model.dispose();
  });

  it('the range check reads a large weight in pieces: a value beyond f16 in its last piece is found, with at most 32 MiB of |x| at a time', async () => {
    const n = 2 * 8 * 2 ** 20 + 3; // three pieces of the check, the last one odd-sized
    const v = new Float32Array(n).fill(0.5);
    v[n - 2] = -7e4;
    const big = new Tensor(ctx, upload(ctx, v, [n], 'bf16'), false);
    const model = { namedParameters: () => [['embed', big] as [string, Tensor]] };
    await ctx.sync();
    const live0 = ctx.memory.live;
    ctx.resetPeak();
    await expect(checkF16Range(model)).rejects.toThrow(/'embed' \(max \|x\| -?7\.\d+e\+4\)/);
    expect(ctx.memory.peak - live0).toBeLessThanOrEqual(32 * 2 ** 20 + 4096);
    v[n - 2] = 0.25;
    big.assign(upload(ctx, v, [n], 'bf16'));
    await checkF16Range(model);
    big.dispose();
  });

  it('a NaN loss with no loss scaler stops the run after 3 bad steps; no checkpoint of NaN weights is written', async () => {
    // from step 3 on the loss (and so every gradient) is NaN
    const poisoned = (t: () => Trainer) => (b: { labels: Int32Array }, ids: Tensor, m: { loss(ids: Tensor, l: Int32Array): { loss: Tensor } }) => {
      const l = m.loss(ids, b.labels).loss;
      return t().step >= 2 ? scale(l, NaN) : l;
    };
    {
      const { model, optimizer, data } = setup(ctx);
      const t: Trainer = new Trainer({ model, optimizer, data, maxSteps: 10, signals: false, computeLoss: poisoned(() => t) as never });
      await expect(t.fit()).rejects.toThrow(/the loss was NaN \(gradient norm NaN\) for 3 consecutive steps \(steps 3-5\): training stopped/);
      expect(t.step).toBeLessThanOrEqual(6); // the step in flight may have been encoded
      t.dispose();
      optimizer.dispose();
      model.dispose();
    }
    {
      const dir = tmp('nan');
      const { model, optimizer, data } = setup(ctx);
      const t: Trainer = new Trainer({ model, optimizer, data, maxSteps: 10, signals: false, checkpointDir: dir, saveEvery: 1, keepLast: 2, computeLoss: poisoned(() => t) as never });
      await expect(t.fit()).rejects.toThrow(/the weights hold NaN or infinite values after step 3 .*the last finite checkpoint is .*checkpoint-2/);
      expect((await listCheckpoints(dir)).map((c) => c.step)).toEqual([1, 2]);
      expect(await findLatestCheckpoint(dir)).toBe(join(dir, 'checkpoint-2'));
      for (const [, w] of (await loadCheckpoint(dir)).params) expect(w.data.every(Number.isFinite)).toBe(true);
      t.dispose();
      optimizer.dispose();
      model.dispose();
    }
  });
});

