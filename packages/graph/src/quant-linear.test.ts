// QuantLinear against a dense Linear holding the same (dequantized) weight: forward, input gradient, no weight
// gradient; LoRA on a quantized base trains the same adapter gradients as on the dequantized dense base; merging
// goes through dequantizeLinears; under f16 autocast it is one fused op (quantLoraLinear) equal to the fused
// loraLinear on the dequantized f16 weight.
import { cast, createContext, download, quantSpec, sizeClass, storageBytes, testing, upload, type Context, type SubBuffer } from '@rusty/backend';
import { autocast, linear, noGrad, randn, sum, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Linear } from './layers';
import { applyLora, LoraLinear, loraModules, mergeLora } from './lora';
import { Module } from './module';
import { dequantizeLinears, packQuantized, QuantLinear, quantizedLinears, quantizeLinears } from './quant-linear';

const rel = testing.relErr;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** Two projections and an LM head, like a decoder layer's shape in miniature. */
class Tiny extends Module {
  constructor(ctx: Context, bias = false) {
    super(ctx);
    this.registerModule('up_proj', new Linear(ctx, 40, 72, { seed: 1, std: 0.1, bias }));
    this.registerModule('down_proj', new Linear(ctx, 72, 40, { seed: 2, std: 0.1 }));
    this.registerModule('lm_head', new Linear(ctx, 40, 24, { seed: 3, std: 0.1 }));
  }
  forward(x: Tensor): Tensor {
    const h = (this.child('up_proj') as Linear).forward(x);
    const y = (this.child('down_proj') as Linear).forward(h);
    return (this.child('lm_head') as Linear).forward(y);
  }
}

const X = (seed: number, rows = 5) => Tensor.fromArray(ctx, randn(rows * 40, seed), [rows, 40], { requiresGrad: true });

describe('QuantLinear', () => {
  for (const spec of [quantSpec('int8', 0), quantSpec('int4', 32), quantSpec('nf4', 64, true)])
    it(`${spec.format}: forward and input gradient equal a dense Linear of the dequantized weight; W gets no gradient`, async () => {
      const dense = new Linear(ctx, 40, 72, { seed: 4, std: 0.1, bias: true });
      dense.bias!.assign(upload(ctx, randn(72, 5), [72]));
      const q = QuantLinear.fromLinear(dense, spec);
      const ref = q.toLinear('f32');
      for (const rows of [3, 33]) {
        const x1 = X(rows);
        const x2 = X(rows);
        const y1 = q.forward(x1);
        const y2 = ref.forward(x2);
        expect(rel(await y1.toArray(), await y2.toArray())).toBeLessThan(1e-5);
        sum(y1).backward();
        sum(y2).backward();
        expect(rel(await x1.grad!.toArray(), await x2.grad!.toArray())).toBeLessThan(1e-5);
      }
      expect(q.weight.grad).toBeFalsy();
      expect(q.weight.requiresGrad).toBe(false);
      // the dequantized weight is close to the original (4-bit: a coarse grid)
      const w0 = await dense.weight.toArray();
      expect(rel(await download(ctx, q.dequantizedWeight('f32')), w0)).toBeLessThan(spec.format === 'int8' ? 1e-2 : 0.15);
      q.dispose();
      ref.dispose();
    });

  it("compute 'f16' (QLoRA's mixed precision): forward and input gradient equal the dense Linear of the dequantized weight in f16", async () => {
    const dense = new Linear(ctx, 40, 72, { seed: 6, std: 0.1, bias: true });
    const q = QuantLinear.fromLinear(dense, quantSpec('nf4', 64, true));
    q.compute = 'f16';
    const ref = q.toLinear('f32');
    const x1 = X(21, 33);
    const x2 = X(21, 33);
    const y1 = q.forward(x1);
    const y2 = linear(x2, ref.weight, ref.bias, { compute: 'f16' });
    const y32 = await noGrad(() => ref.forward(X(21, 33))).toArray();
    const got = await y1.toArray();
    expect(rel(got, await y2.toArray())).toBeLessThan(1e-5);
    expect(rel(got, y32)).toBeGreaterThan(1e-5); // the products really ran on f16-rounded inputs
    sum(y1).backward();
    sum(y2).backward();
    expect(rel(await x1.grad!.toArray(), await x2.grad!.toArray())).toBeLessThan(1e-5);
    q.dispose();
    ref.dispose();
    dense.dispose();
  });

  it('LoRA on a quantized base runs the fused quantLoraLinear under f16 autocast (the composition in f32) and equals the fused loraLinear on the dequantized f16 weight', async () => {
    const dense = new Linear(ctx, 40, 72, { seed: 11, std: 0.1, bias: true });
    const q = new LoraLinear(QuantLinear.fromLinear(dense, quantSpec('nf4', 64, true)), 4, 8, 5);
    const d = new LoraLinear((q.base as QuantLinear).toLinear('f16'), 4, 8, 5);
    for (const l of [q, d]) l.loraB.assign(upload(ctx, randn(l.loraB.size, 12, 0.1), l.loraB.shape));
    const run = async (l: LoraLinear) => {
      const x = X(13, 33);
      const y = autocast('f16', () => l.forward(x));
      const name = y.node?.name;
      sum(y).backward();
      const out = [await y.toArray(), await x.grad!.toArray(), await l.loraA.grad!.toArray(), await l.loraB.grad!.toArray()];
      y.dispose();
      x.dispose();
      return { name, out };
    };
    const rq = await run(q);
    const rd = await run(d);
    expect(rq.name).toBe('quant-lora-linear');
    expect(rd.name).toBe('lora-linear');
    rq.out.forEach((v, i) => expect(rel(v, rd.out[i]!), String(i)).toBeLessThan(1e-6));
    const y32 = q.forward(X(13, 33));
    expect(y32.node?.name).toBe('add');
    y32.dispose();
    q.dispose();
    d.dispose();
    dense.dispose();
  });

  it('packQuantized moves codes and scales into one arena: the same outputs, the pool rounds once, the arena goes with the last layer', async () => {
    const m = new Module(ctx);
    const shapes = [[72, 40], [40, 72], [130, 64], [13, 70]] as const;
    shapes.forEach(([o, i], k) => m.registerModule(`p${k}`, new Linear(ctx, i, o, { seed: 20 + k, std: 0.1 })));
    quantizeLinears(m, quantSpec('nf4', 64, true), { skip: () => false });
    const layers = [...quantizedLinears(m).values()];
    const outs = () =>
      Promise.all(
        layers.map(async (q, k) => {
          const x = Tensor.fromArray(ctx, randn(5 * shapes[k]![1], 30 + k), [5, shapes[k]![1]]);
          const y = noGrad(() => q.forward(x));
          const v = await y.toArray();
          x.dispose();
          y.dispose();
          return v;
        }),
      );
    const before = await outs();
    const old = layers.flatMap((q) => q.quantTensors.map((t) => t.buffer));
    const pooled = old.reduce((n, b) => n + b.size, 0);
    const exact = layers.reduce((n, q) => n + q.quantTensors.reduce((a, t) => a + Math.ceil(storageBytes(t.dtype, t.shape.reduce((p, d) => p * d, 1)) / 256) * 256, 0), 0);
    expect(await packQuantized(ctx, layers)).toBe(pooled - sizeClass(exact));
    expect(old.every((b) => b.released)).toBe(true);
    const arenas = new Set(layers.flatMap((q) => q.quantTensors.map((t) => (t.buffer as SubBuffer).root)));
    expect(arenas.size).toBe(1);
    const arena = [...arenas][0]!;
    expect(arena.size).toBe(sizeClass(exact));
    const after = await outs();
    after.forEach((v, k) => expect([...v], String(k)).toEqual([...before[k]!]));
    expect(arena.released).toBe(false);
    m.dispose(); // codes (parameters) and scales (releaseState) of every layer: the arena goes back to the pool
    expect(arena.released).toBe(true);
  });

  it('quantizeLinears leaves the LM head; LoRA on the quantized base has the gradients of LoRA on the dense dequantized base', async () => {
    const qm = new Tiny(ctx, true);
    const names = quantizeLinears(qm, quantSpec('nf4', 64));
    expect(names).toEqual(['up_proj', 'down_proj']);
    expect(qm.child('lm_head')).toBeInstanceOf(Linear);
    // a dense twin with the dequantized weights
    const dm = new Tiny(ctx, true);
    noGrad(() => {
      for (const n of names) {
        const d = (qm.child(n) as QuantLinear).toLinear('f32');
        dm.registerModule(n, d);
      }
      for (const n of ['weight', 'bias'] as const) {
        const l = dm.child('lm_head') as Linear;
        const src = (qm.child('lm_head') as Linear)[n];
        if (src) l[n]!.assign(cast(ctx, src.data, src.dtype));
      }
    });
    const cfg = { r: 4, alpha: 8, targetModules: ['up_proj', 'down_proj'], seed: 7 };
    const lq = applyLora(qm, cfg);
    const ld = applyLora(dm, cfg);
    for (const [n, l] of lq) {
      l.loraB.assign(upload(ctx, randn(l.loraB.size, 3, 0.1), l.loraB.shape));
      ld.get(n)!.loraB.assign(upload(ctx, randn(l.loraB.size, 3, 0.1), l.loraB.shape));
    }
    expect(qm.trainableParameters().map(([n]) => n).sort()).toEqual(dm.trainableParameters().map(([n]) => n).sort());
    const yq = qm.forward(X(9, 20));
    const yd = dm.forward(X(9, 20));
    expect(rel(await yq.toArray(), await yd.toArray())).toBeLessThan(1e-5);
    sum(yq).backward();
    sum(yd).backward();
    for (const [n, l] of lq) {
      const d = ld.get(n)!;
      expect(rel(await l.loraA.grad!.toArray(), await d.loraA.grad!.toArray()), n).toBeLessThan(1e-4);
      expect(rel(await l.loraB.grad!.toArray(), await d.loraB.grad!.toArray()), n).toBeLessThan(1e-4);
    }
    // merging needs a dense base: refused on the quantized one, fine after dequantizeLinears
    expect(() => mergeLora(qm)).toThrow(/quantized/);
    const adapted = await noGrad(() => qm.forward(X(10, 4))).toArray();
    expect(dequantizeLinears(qm)).toEqual(['up_proj', 'down_proj']);
    expect(quantizedLinears(qm).size).toBe(0);
    for (const l of loraModules(qm).values()) expect(l.base).toBeInstanceOf(Linear);
    mergeLora(qm);
    expect(rel(await noGrad(() => qm.forward(X(10, 4))).toArray(), adapted)).toBeLessThan(1e-5);
    qm.dispose();
    dm.dispose();
  });
});
