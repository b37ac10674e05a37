// Decoding with q/k/v and gate/up fused into one GEMV dispatch each (fusedProjections): the same logits as one
// projection at a time, up to f32 rounding, on quantized and 16-bit models of every architecture; and where it
// does not apply (gradients recorded, LoRA adapters, more than 16 rows) nothing is fused. The residual add after
// a one-row down projection as its GEMV's bias (projectionPlusResidual): bit for bit the separate add.
import { cast, createContext, gemvPartsProblem, gemvSubgroupsAvailable, quantSpec, xLimbsAvailable, type Context, type GemvPart, type Kernel } from '@rusty/backend';
import { add, noGrad, swiglu, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CausalLM } from './causal-lm';
import { fusionSettings, gatedProjection, projectionPlusResidual } from './fused-projections';
import { generate } from './generate';
import { applyLora } from './lora';
import { Linear } from './layers';
import { QuantLinear, quantizeLinears } from './quant-linear';
import { ARCH_FIXTURES, fixtureConfig, randomModel } from './test-models';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** Logits of `ids` (one sequence) and how many dispatches were fused GEMVs, with fusion on or off. */
async function run(m: CausalLM, ids: number[], on: boolean, grad = false): Promise<{ logits: Float32Array; parts: number }> {
  const saved = fusionSettings.projections;
  fusionSettings.projections = on;
  let parts = 0;
  const orig = ctx.dispatch.bind(ctx);
  ctx.dispatch = ((k, ...rest) => {
    if (k.name.endsWith('-parts')) parts++;
    return orig(k, ...rest);
  }) as typeof ctx.dispatch;
  try {
    const input = Tensor.fromArray(ctx, ids, [1, ids.length], { dtype: 'i32' });
    const y = grad ? m.forward(input) : noGrad(() => m.forward(input));
    const logits = (await y.toArray()) as Float32Array;
    y.dispose();
    input.dispose();
    return { logits, parts };
  } finally {
    ctx.dispatch = orig;
    fusionSettings.projections = saved;
  }
}

function maxRel(a: Float32Array, b: Float32Array): number {
  let e = 0;
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    e = Math.max(e, Math.abs(a[i]! - b[i]!));
    s = Math.max(s, Math.abs(b[i]!));
  }
  return e / s;
}

/** Cast every projection weight of a model to a 16-bit dtype. */
function castProjections(m: CausalLM, dtype: 'f16' | 'bf16'): void {
  for (const [name, p] of m.namedParameters()) if (/_proj\.weight$/.test(name)) p.assign(cast(ctx, p.data, dtype));
}

const ids = [3, 14, 15, 92, 65, 35];

/** A projection's GEMV part (as fusedProjections builds it). */
function partOf(p: QuantLinear | Linear): GemvPart {
  return p instanceof QuantLinear ? { weight: p.quant, bias: p.bias?.data } : { weight: p.weight.data, bias: p.bias?.data };
}

describe('fused decode projections', () => {
  for (const dir of ARCH_FIXTURES)
    for (const kind of ['int4', 'nf4', 'bf16'] as const)
      it.runIf(() => gemvSubgroupsAvailable(ctx))(`${dir}, ${kind}: one dispatch for q/k/v and one for gate/up per layer, the same logits`, async () => {
        const m = randomModel(ctx, fixtureConfig(dir));
        if (kind === 'bf16') castProjections(m, 'bf16');
        else quantizeLinears(m, kind === 'int4' ? quantSpec('int4', 32) : quantSpec('nf4', 64, true));
        const off = await run(m, ids, false);
        const on = await run(m, ids, true);
        expect(off.parts).toBe(0);
        // q/k/v with biases and double-quantized scales take 17 storage buffers: fused only where the device
        // allows that many (lavapipe: 16); every other group fuses
        const attn = m.child('model')!.child('layers')!.child('0')!.child('self_attn')!;
        const x = Tensor.fromArray(ctx, new Array(m.config.hiddenSize).fill(1), [1, m.config.hiddenSize]);
        const qkvProblem = gemvPartsProblem(ctx, x.data, (['q_proj', 'k_proj', 'v_proj'] as const).map((n) => partOf(attn.child(n) as QuantLinear | Linear)));
        x.dispose();
        if (!(dir === 'qwen2-tiny' && kind === 'nf4')) expect(qkvProblem).toBeNull();
        else if (qkvProblem) expect(qkvProblem).toMatch(/17 storage buffers per stage/);
        expect(on.parts).toBe((qkvProblem ? 1 : 2) * m.config.numHiddenLayers);
        expect(maxRel(on.logits, off.logits)).toBeLessThan(1e-5);
        m.dispose();
      });

  it.runIf(() => gemvSubgroupsAvailable(ctx))('f32 and f16 weights fuse; nothing is fused with gradients recorded, with LoRA adapters or for more than 16 rows', async () => {
    const m = randomModel(ctx, fixtureConfig('llama-tiny'));
    const f32 = [await run(m, ids, false), await run(m, ids, true)];
    expect(f32.map((r) => r.parts)).toEqual([0, 4]);
    expect(maxRel(f32[1]!.logits, f32[0]!.logits)).toBeLessThan(1e-5);
    castProjections(m, 'f16');
    expect((await run(m, ids, true)).parts).toBe(4);
    expect((await run(m, ids, true, true)).parts).toBe(0); // gradients
    expect((await run(m, Array.from({ length: 17 }, (_, i) => i + 1), true)).parts).toBe(0); // 17 rows
    applyLora(m, { r: 4, alpha: 8, targetModules: ['q_proj', 'up_proj'], seed: 1 });
    expect((await run(m, ids, true)).parts).toBe(0); // q_proj and up_proj wrapped: neither group fuses
    m.dispose();
  });

  it.runIf(() => gemvSubgroupsAvailable(ctx))('the residual add after a one-row down projection is its GEMV bias, the activation inside it: bit for bit, and only where it applies; q and k rotated in one dispatch', async () => {
    const m = randomModel(ctx, fixtureConfig('llama-tiny'));
    // frozen, as a loaded model decodes (a trainable f32 weight takes the tiled product when run alone)
    for (const p of m.parameters()) p.requiresGrad = false;
    const mlp = m.child('model')!.child('layers')!.child('0')!.child('mlp')!;
    const h = m.config.hiddenSize;
    const i = m.config.intermediateSize;
    const x1 = Tensor.fromArray(ctx, Array.from({ length: i }, (_, j) => Math.sin(j)), [1, 1, i]);
    const x2 = Tensor.fromArray(ctx, Array.from({ length: 2 * i }, (_, j) => Math.cos(j)), [1, 2, i]);
    const r = Tensor.fromArray(ctx, Array.from({ length: h }, (_, j) => 10 * Math.cos(3 * j)), [1, 1, h]);
    const check = async (label: string) => {
      const down = mlp.child('down_proj') as QuantLinear | Linear;
      const fused = noGrad(() => projectionPlusResidual(down, x1, r));
      expect(fused, label).not.toBeNull();
      const apart = noGrad(() => add(r, down.forward(x1)));
      expect(Array.from((await fused!.toArray()) as Float32Array), label).toEqual(Array.from((await apart.toArray()) as Float32Array));
      fused!.dispose();
      apart.dispose();
      // two rows (the residual is not a bias), gradients recorded, a residual of another size or dtype
      expect(noGrad(() => projectionPlusResidual(down, x2, r)), label).toBeNull();
      expect(projectionPlusResidual(down, x1, r), label).toBeNull();
      expect(noGrad(() => projectionPlusResidual(down, x1, x1)), label).toBeNull();
      // the activation too: down(silu(g) * u) + r, bit for bit the three ops apart
      const g = Tensor.fromArray(ctx, Array.from({ length: i }, (_, j) => 3 * Math.sin(0.7 * j)), [1, 1, i]);
      const viaGemv = noGrad(() => gatedProjection(down, g, x1, 'silu', r));
      expect(viaGemv, label).not.toBeNull();
      const threeOps = noGrad(() => add(r, down.forward(swiglu(g, x1))));
      expect(Array.from((await viaGemv!.toArray()) as Float32Array), label).toEqual(Array.from((await threeOps.toArray()) as Float32Array));
      for (const t of [g, viaGemv!, threeOps]) t.dispose();
    };
    await check('f32');
    castProjections(m, 'bf16');
    await check('bf16');
    quantizeLinears(m, quantSpec('int4', 32));
    await check('int4');
    // in decoding: one dispatch fewer per layer and step, the same tokens
    const count = async (on: boolean) => {
      const saved = fusionSettings.projections;
      fusionSettings.projections = on;
      let adds = 0;
      let ropes = 0;
      let acts = 0;
      const orig = ctx.dispatch.bind(ctx);
      ctx.dispatch = ((k, ...rest) => {
        if (k.name === 'binary') adds++;
        if (k.name.startsWith('rope')) ropes++;
        if (k.name.startsWith('gated')) acts++;
        return orig(k, ...rest);
      }) as typeof ctx.dispatch;
      try {
        return { ids: await generate(m, ids, { maxNewTokens: 4, temperature: 0, stopTokens: [] }), adds, ropes, acts };
      } finally {
        ctx.dispatch = orig;
        fusionSettings.projections = saved;
      }
    };
    const off = await count(false);
    const on = await count(true);
    expect(on.ids).toEqual(off.ids);
    expect(off.adds - on.adds).toBe(3 * m.config.numHiddenLayers); // 3 one-row steps after the 6-token prompt
    // queries and keys rotated in one dispatch (ropePair) in each of the 4 forwards
    expect([off.ropes, on.ropes]).toEqual([8, 4].map((n) => n * m.config.numHiddenLayers));
    // the activation inside down_proj's GEMV in the one-row steps (the prompt's 6 rows keep it apart: residual)
    expect(off.acts - on.acts).toBe(3 * m.config.numHiddenLayers);
    for (const t of [x1, x2, r]) t.dispose();
    m.dispose();
  });

  // kernel keys: `<cache key>|<entry>|<bindings>|...`; a GEMV on limbs binds them (u32) where x goes
  const limbNorm = (k: Kernel) => k.key.split('|')[0]!.startsWith('rmsnorm:') && k.key.split('|')[0]!.endsWith(':limbs');
  const limbGemv = (k: Kernel) => k.name.startsWith('dequant-gemv-sg') && k.key.split('|')[2]!.startsWith('ru32');
  /** The logits of one token (a one-row step) with `fusionSettings.limbs` set, and the dispatches: all of them, the
   *  norms that wrote limbs and the GEMVs that read them. */
  async function oneRowStep(m: CausalLM, limbs: boolean) {
    const saved = fusionSettings.limbs;
    fusionSettings.limbs = limbs;
    const n = { all: 0, norms: 0, gemvs: 0 };
    const orig = ctx.dispatch.bind(ctx);
    ctx.dispatch = ((k, ...rest) => {
      n.all++;
      if (limbNorm(k)) n.norms++;
      if (limbGemv(k)) n.gemvs++;
      return orig(k, ...rest);
    }) as typeof ctx.dispatch;
    try {
      const input = Tensor.fromArray(ctx, [42], [1, 1], { dtype: 'i32' });
      const y = noGrad(() => m.forward(input));
      const logits = (await y.toArray()) as Float32Array;
      y.dispose();
      input.dispose();
      return { logits, ...n };
    } finally {
      ctx.dispatch = orig;
      fusionSettings.limbs = saved;
    }
  }
  for (const dir of ARCH_FIXTURES)
    it.runIf(() => gemvSubgroupsAvailable(ctx) && xLimbsAvailable(ctx))(`${dir}: a one-row step with int4 projections multiplies on the norms' int8 limbs, no dispatch more, the same logits to 1e-6; NF4 does not`, async () => {
      const m = randomModel(ctx, fixtureConfig(dir));
      quantizeLinears(m, quantSpec('int4', 32));
      const off = await oneRowStep(m, false);
      const on = await oneRowStep(m, true);
      expect([off.norms, off.gemvs]).toEqual([0, 0]);
      // the norm before q/k/v and the one before gate/up in each layer (Gemma 3's own layer: its input and
      // pre-feedforward norms)
      const n = 2 * m.config.numHiddenLayers;
      expect([on.norms, on.gemvs]).toEqual([n, n]);
      expect(on.all).toBe(off.all);
      const err = maxRel(on.logits, off.logits);
      expect(err).toBeLessThan(1e-6);
      expect(err).toBeGreaterThan(0); // x really went through its limbs
      m.dispose();
      // NF4 codes take no limbs
      const nf = randomModel(ctx, fixtureConfig(dir));
      quantizeLinears(nf, quantSpec('nf4', 64));
      const r = await oneRowStep(nf, true);
      expect([r.norms, r.gemvs]).toEqual([0, 0]);
      nf.dispose();
    });

  it.runIf(() => gemvSubgroupsAvailable(ctx))('with a KV cache, ropePair stores the keys and values itself: no copy dispatch, the same tokens (Llama, Qwen3 with its q/k norms)', async () => {
    for (const dir of ['llama-tiny', 'qwen3-tiny'] as const) {
      const m = randomModel(ctx, fixtureConfig(dir));
      for (const p of m.parameters()) p.requiresGrad = false;
      const run = async (kv: boolean) => {
        const saved = fusionSettings.kv;
        fusionSettings.kv = kv;
        let copies = 0;
        const orig = ctx.dispatch.bind(ctx);
        ctx.dispatch = ((k, ...rest) => {
          if (k.name.startsWith('copy_rows') || k.name.startsWith('copy-rows')) copies++;
          return orig(k, ...rest);
        }) as typeof ctx.dispatch;
        try {
          return { ids: await generate(m, ids, { maxNewTokens: 5, temperature: 0, stopTokens: [] }), copies };
        } finally {
          ctx.dispatch = orig;
          fusionSettings.kv = saved;
        }
      };
      const off = await run(false);
      const on = await run(true);
      expect(on.ids, dir).toEqual(off.ids);
      // the prompt's forward and 4 one-token steps, each layer once (one more copy, of generate's own, either way)
      expect(off.copies - on.copies, dir).toBe(5 * m.config.numHiddenLayers);
      m.dispose();
    }
  });
});
