// Quantize at load from a float checkpoint, save the quantized model, load it back byte for byte.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createContext,
  dequantizeRef,
  download,
  quantizeRef,
  quantSpec,
  type Context,
  type QuantSpec,
} from '@rusty/backend';
import { noGrad, randn, Tensor } from '@rusty/autograd';
import { Linear, Module, QuantLinear } from '@rusty/graph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCheckpoint } from '../safetensors/checkpoint';
import { formatInspection, inspectSafetensors } from '../safetensors/inspect';
import { writeSafetensors } from '../safetensors/write';
import { describeQuantization, QUANT_METADATA_KEY, quantizationOf, quantizeAtLoad, saveQuantized } from './quantize';

let ctx: Context;
let dir: string;
beforeAll(async () => {
  ctx = await createContext();
  dir = await mkdtemp(join(tmpdir(), 'rusty-quant-'));
});
afterAll(async () => {
  ctx.destroy();
  await rm(dir, { recursive: true, force: true });
});

function rel(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    if (!Number.isFinite(a[i]!)) return Infinity;
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / den;
}

const SHAPES: Record<string, [number, number]> = { 'layers.0.up_proj': [72, 40], 'layers.0.down_proj': [40, 72], lm_head: [24, 40] };

/** Two projections (one with a bias) and an LM head under HF-like names. */
class Tiny extends Module {
  constructor(ctx: Context) {
    super(ctx);
    const layer = this.registerModule('layers', new Module(ctx)).registerModule('0', new Module(ctx));
    layer.registerModule('up_proj', new Linear(ctx, 40, 72, { empty: true, bias: true }));
    layer.registerModule('down_proj', new Linear(ctx, 72, 40, { empty: true }));
    this.registerModule('lm_head', new Linear(ctx, 40, 24, { empty: true }));
  }
  forward(x: Tensor): Tensor {
    const l = this.child('layers')!.child('0')!;
    const h = (l.child('up_proj') as Linear).forward(x);
    return (this.child('lm_head') as Linear).forward((l.child('down_proj') as Linear).forward(h));
  }
}

/** Load every parameter the quantizer did not (what loadPretrained's loop does). */
async function loadRest(model: Module, file: string, skip: Set<string> | null): Promise<void> {
  const ck = await openCheckpoint(file);
  for (const [name, p] of model.namedParameters()) if (!skip?.has(name)) p.assign(await ck.upload(ctx, name, { dtype: 'f32' }));
  await ck.close();
}

const weights = new Map<string, Float64Array>();
let floatFile: string;
beforeAll(async () => {
  const entries: [string, { shape: number[]; data: Float32Array }][] = [];
  let seed = 1;
  for (const [m, [N, K]] of Object.entries(SHAPES)) {
    const w = Float64Array.from(Float32Array.from(randn(N * K, seed++, 0.1)));
    weights.set(m, w);
    entries.push([`${m}.weight`, { shape: [N, K], data: Float32Array.from(w) }]);
  }
  entries.push(['layers.0.up_proj.bias', { shape: [72], data: Float32Array.from(randn(72, 50)) }]);
  floatFile = join(dir, 'float.safetensors');
  await writeSafetensors(floatFile, entries);
});

const x = () => Tensor.fromArray(ctx, randn(6 * 40, 3), [6, 40]);

describe('quantizeAtLoad', () => {
  const specs: QuantSpec[] = [quantSpec('int8', 0), quantSpec('int4', 32), quantSpec('nf4', 64, true)];
  for (const spec of specs)
    it(`${spec.format}: quantizes the projections on the GPU, leaves the LM head; save and reload give the same bytes`, async () => {
      const model = new Tiny(ctx);
      const ck = await openCheckpoint(floatFile);
      const loaded = await quantizeAtLoad(ctx, model, ck, { spec });
      await ck.close();
      expect([...loaded!].sort()).toEqual(['layers.0.down_proj.weight', 'layers.0.up_proj.weight']);
      await loadRest(model, floatFile, loaded);
      const l = model.child('layers')!.child('0')!;
      expect(l.child('up_proj')).toBeInstanceOf(QuantLinear);
      expect(model.child('lm_head')).toBeInstanceOf(Linear);
      // the GPU's quantization is the format's (dequantized values against the host reference's)
      for (const n of ['up_proj', 'down_proj']) {
        const q = l.child(n) as QuantLinear;
        const [N, K] = SHAPES[`layers.0.${n}`]!;
        const want = dequantizeRef(spec, quantizeRef(spec, weights.get(`layers.0.${n}`)!, N, K));
        expect(rel(await download(ctx, q.dequantizedWeight('f32')), want)).toBeLessThan(spec.doubleQuant ? 1e-2 : 1e-5);
        expect(q.sourceDtype).toBe('f32');
      }
      const y = await noGrad(() => model.forward(x())).toArray();
      // save, reload: identical outputs
      const file = join(dir, `${spec.format}.safetensors`);
      await saveQuantized(model, file, { note: 'test' });
      const ck2 = await openCheckpoint(file);
      const meta = quantizationOf(ck2)!;
      expect(meta).toMatchObject({ format: spec.format, group_size: spec.groupSize, double_quant: !!spec.doubleQuant });
      expect(Object.keys(meta.modules).sort()).toEqual(['layers.0.down_proj', 'layers.0.up_proj']);
      expect(ck2.tensors.get('layers.0.up_proj.weight')!.dtype).toBe(spec.format === 'int8' ? 'I8' : 'U8');
      expect(ck2.tensors.has('layers.0.up_proj.weight_scale')).toBe(true);
      expect(describeQuantization(ck2.metadata)).toMatch(new RegExp(`quantized: ${spec.format}`));
      const shown = formatInspection(await inspectSafetensors(file));
      expect(shown).toMatch(new RegExp(`layers\\.0\\.up_proj\\.weight_scale +${spec.doubleQuant ? 'U8' : spec.format === 'int4' ? 'F16' : 'F32'}`));
      expect(shown).toMatch(new RegExp(`\\nquantized: ${spec.format}, `));
      const again = new Tiny(ctx);
      const loaded2 = await quantizeAtLoad(ctx, again, ck2, {});
      await ck2.close();
      await loadRest(again, file, loaded2);
      expect(await noGrad(() => again.forward(x())).toArray()).toEqual(y);
      model.dispose();
      again.dispose();
    });

  it('refuses to re-quantize a quantized file in another format, and a truncated scale tensor', async () => {
    const file = join(dir, 'nf4.safetensors');
    const ck = await openCheckpoint(file);
    await expect(quantizeAtLoad(ctx, new Tiny(ctx), ck, { spec: quantSpec('int8') })).rejects.toThrow(/cannot be re-quantized as int8/);
    // a file whose scale tensor has the wrong size
    const entries: [string, { dtype: 'U8' | 'F32'; shape: number[]; data: Uint8Array | Float32Array }][] = [];
    for (const [name, info] of ck.tensors) {
      const b = await ck.readBytes(name);
      entries.push([name, { dtype: info.dtype as 'U8', shape: name.endsWith('up_proj.weight_scale') ? [info.shape[0]! - 4] : [...info.shape], data: name.endsWith('up_proj.weight_scale') ? b.subarray(4) : b }]);
    }
    const bad = join(dir, 'bad.safetensors');
    await writeSafetensors(bad, entries, { [QUANT_METADATA_KEY]: ck.metadata[QUANT_METADATA_KEY]! });
    await ck.close();
    const ck3 = await openCheckpoint(bad);
    await expect(quantizeAtLoad(ctx, new Tiny(ctx), ck3, {})).rejects.toThrow(/weight_scale' is U8 of \d+ bytes; the quantization metadata implies U8/);
    await ck3.close();
  });

  it('an ordinary checkpoint without a spec is left alone', async () => {
    const ck = await openCheckpoint(floatFile);
    expect(await quantizeAtLoad(ctx, new Tiny(ctx), ck, {})).toBeNull();
    expect(quantizationOf(ck)).toBeNull();
    await ck.close();
  });
});
