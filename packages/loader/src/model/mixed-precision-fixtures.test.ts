// f16 mixed precision (`model.setComputeDtype('f16')`: every projection, the LM head and attention on f16
// inputs with f32 accumulation; norms, softmax, losses in f32) against the golden outputs of HF transformers
// (../shared/fixtures, float64): every fixture's logits and loss, and 5 AdamW steps, within 1e-2 relative.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createContext, testing, type Context } from '@rusty/backend';
import { AdamW, clipGradNorm, LinearWarmup, Tensor, tidy } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIX, FIXTURES, fixtureInputs, fixtureTensors } from './fixture-data';
import { loadPretrained } from './pretrained';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('f16 mixed precision matches HF transformers within 1e-2', () => {
  it.each(FIXTURES)('%s: logits, loss and 5 AdamW losses', async (dir) => {
    const { model: m } = await loadPretrained(ctx, join(FIX, dir));
    const exp = await fixtureTensors(join(FIX, dir, 'expected.safetensors'));
    const ej = JSON.parse(await readFile(join(FIX, dir, 'expected.json'), 'utf8'));
    const { ids, labels, b, t } = await fixtureInputs(dir);
    const input = Tensor.fromArray(ctx, ids, [b, t], { dtype: 'i32' });
    m.setComputeDtype('f16');
    const got = await tidy(() => m.forward(input)).toArray();
    const err = rel(got, exp.get('logits')!);
    expect(err, 'logits').toBeLessThan(1e-2);
    // the products really ran on f16 inputs: f32 arithmetic meets 1e-4 (the fixtures' tolerance), f16 does not
    expect(err, 'f16 rounding visible').toBeGreaterThan(1e-4);
    const a = ej.adamw;
    const params = m.parameters();
    const opt = new AdamW(ctx, params, { lr: a.lr, betas: a.betas, eps: a.eps, weightDecay: a.weight_decay });
    const sched = new LinearWarmup(opt, { warmupSteps: a.warmup_steps });
    for (let s = 0; s < a.losses.length; s++) {
      opt.zeroGrad();
      // the Trainer's loss: the LM head fused with the cross-entropy (no materialised logits)
      const loss = tidy(() => {
        const l = m.loss(input, labels, { logits: false }).loss;
        l.backward();
        return l;
      });
      const clip = clipGradNorm(params, a.clip);
      opt.step({ gradScale: clip });
      sched.step();
      ctx.release(clip.buffer);
      const l = await loss.item();
      loss.dispose();
      // step 0 is the loss of the checkpoint itself (expected.json's loss)
      expect(Math.abs(l - a.losses[s]) / a.losses[s], `loss ${s}`).toBeLessThan(1e-2);
    }
    input.dispose();
    opt.dispose();
    m.dispose();
  });
});
