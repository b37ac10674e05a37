// The optimizers' multi-tensor path (`foreach`, the default): parameters, gradients and state in arenas, one
// dispatch per group, against the one-dispatch-per-tensor path on the same gradients: bit-identical parameters
// and state dicts through lr changes, a parameter without a gradient, GPU controls (gradScale, skip), a tensor
// too large for the arena, gradients released and parameters reassigned between steps, and a state dict loaded
// mid-run. AdamW and SGD (with and without momentum).
import { createContext, download, gradNorm, upload, type Context, type DeviceTensor } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { add, clipGradNorm, mul, square, sum, tidy, Tensor } from '../index';
import { randn } from '../random';
import { AdamW } from './adamw';
import { SGD } from './sgd';
import { arenaTuning } from './arena';
import type { OptimizerState, ParamGroupInit } from './optimizer';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

// sizes that are and are not multiples of the 64-element arena alignment; [9, 17] (153) goes past maxElements
const SHAPES = [[3, 5], [17], [64], [7, 9], [1], [9, 17], [2, 33], [65]];
const MAX = 100;

function makeParams(seed: number): Tensor[] {
  return SHAPES.map((s, i) => {
    const n = s.reduce((a, b) => a * b, 1);
    return Tensor.fromArray(ctx, Float32Array.from(randn(n, seed + i)), s, { requiresGrad: true });
  });
}

/** Gradients that depend on the parameters: d/dp sum(p^2 * c) = 2 p c, with c fresh per step. */
function backward(ps: Tensor[], step: number, skip: ReadonlySet<number> = new Set()): void {
  tidy(() => {
    let loss: Tensor | null = null;
    ps.forEach((p, i) => {
      if (skip.has(i)) return;
      const c = Tensor.fromArray(ctx, Float32Array.from(randn(p.size, 100 * step + i)), p.shape);
      const l = sum(mul(square(p), c));
      loss = loss ? add(loss, l) : l;
    });
    loss!.backward();
  });
}

async function bits(ps: Tensor[]): Promise<Uint32Array[]> {
  return Promise.all(ps.map(async (p) => new Uint32Array(((await p.toArray()) as Float32Array).slice().buffer)));
}

function sameState(a: OptimizerState, b: OptimizerState): void {
  expect(a.kind).toBe(b.kind);
  expect(a.steps).toBe(b.steps);
  expect(a.groups).toEqual(b.groups);
  expect(a.stepStates).toEqual(b.stepStates);
  expect(a.state.length).toBe(b.state.length);
  a.state.forEach((s, i) => {
    const t = b.state[i]!;
    if (s === null || t === null) return expect(s).toBe(t);
    expect(Object.keys(s).sort()).toEqual(Object.keys(t).sort());
    for (const k of Object.keys(s)) expect(new Uint32Array(s[k]!.buffer)).toEqual(new Uint32Array(t[k]!.buffer));
  });
}

function groups(ps: Tensor[]) {
  return [
    { params: ps.slice(0, 5), lr: 1e-2 },
    { params: ps.slice(5), lr: 3e-3, weightDecay: 0.1 },
  ];
}

const OPTIMIZERS: [string, (ps: ParamGroupInit[], foreach: boolean) => AdamW | SGD][] = [
  ['AdamW', (ps, foreach) => new AdamW(ctx, ps, { betas: [0.9, 0.95], foreach })],
  ['SGD with Nesterov momentum', (ps, foreach) => new SGD(ctx, ps, { momentum: 0.9, nesterov: true, foreach })],
  ['SGD without momentum', (ps, foreach) => new SGD(ctx, ps, { foreach })],
];

describe('optimizers with foreach (multi-tensor arenas)', () => {
  for (const [name, make] of OPTIMIZERS)
    it(`${name} is bit-identical to one dispatch per tensor, state dict included`, async () => {
      const saved = arenaTuning.maxElements;
      arenaTuning.maxElements = MAX;
      try {
        const a = makeParams(1);
        const b = makeParams(1);
        const oa = make(groups(a), true);
        const ob = make(groups(b), false);
        const scale = upload(ctx, [0.5], [1]);
        const skipOn = upload(ctx, new Uint32Array([1]), [1], 'u32');
        const skipOff = upload(ctx, new Uint32Array([0]), [1], 'u32');
        const controls: { gradScale?: DeviceTensor; skip?: DeviceTensor }[] = [{}, {}, { gradScale: scale }, { skip: skipOn }, { skip: skipOff }, {}];
        let dispatches = 0;
        for (let s = 0; s < controls.length; s++) {
          const noGrad = new Set(s === 1 ? [0, 6] : []);
          if (s === 2) for (const o of [oa, ob]) o.paramGroups[0]!.lr *= 0.5;
          if (s === 4) {
            // between steps: a gradient released (it moves back into the arena) and a parameter reassigned
            a[3]!.zeroGrad(true);
            b[3]!.zeroGrad(true);
            for (const ps of [a, b]) ps[2]!.assign(upload(ctx, Float32Array.from(randn(64, 77)), [64]));
          }
          backward(a, s, noGrad);
          backward(b, s, noGrad);
          const d0 = ctx.stats.dispatches;
          oa.step(controls[s]!);
          if (s === 5) dispatches = ctx.stats.dispatches - d0;
          ob.step(controls[s]!);
          oa.zeroGrad();
          ob.zeroGrad();
          expect(await bits(a)).toEqual(await bits(b));
        }
        // the small tensors live in arenas (sub-buffers), [9, 17] in its own buffer
        const rooted = (t: Tensor) => 'root' in t.data.buffer;
        expect(a.map(rooted)).toEqual(SHAPES.map((sh) => sh.reduce((x, y) => x * y, 1) <= MAX));
        expect(b.some(rooted)).toBe(false);
        // a steady step: per group one multi-tensor dispatch (and AdamW's step counter), plus one for [9, 17]
        expect(dispatches).toBe(name === 'AdamW' ? 5 : 3);
        sameState(await oa.stateDict(), await ob.stateDict());

        // a state dict loaded into a fresh foreach optimizer goes on exactly like the per-tensor one
        const c = makeParams(1);
        for (let i = 0; i < c.length; i++) c[i]!.assign(upload(ctx, await b[i]!.toArray(), c[i]!.shape));
        const oc = make(groups(c), true);
        oc.loadStateDict(await ob.stateDict());
        for (let s = 6; s < 8; s++) {
          backward(b, s);
          backward(c, s);
          ob.step();
          oc.step();
          ob.zeroGrad();
          oc.zeroGrad();
        }
        expect(await bits(c)).toEqual(await bits(b));
        sameState(await oc.stateDict(), await ob.stateDict());
        for (const o of [oa, ob, oc]) o.dispose();
        for (const p of [...a, ...b, ...c]) p.dispose();
      } finally {
        arenaTuning.maxElements = saved;
      }
    });

  it('splits the arenas into packs that fit one storage binding each', async () => {
    // a context whose bindings hold 1 KiB: the eight tensors (256-byte slots, one of 768, two of 512) make 3 packs
    const small = await createContext({ maxBindingSize: 1024 });
    try {
      const mk = () =>
        SHAPES.map((sh, i) => Tensor.fromArray(small, Float32Array.from(randn(sh.reduce((x, y) => x * y, 1), 40 + i)), sh, { requiresGrad: true }));
      const [a, b] = [mk(), mk()];
      const oa = new AdamW(small, a);
      const ob = new AdamW(small, b, { foreach: false });
      for (let s = 0; s < 3; s++) {
        for (const ps of [a, b])
          tidy(() => {
            let loss: Tensor | null = null;
            for (const p of ps) loss = loss ? add(loss, sum(square(p))) : sum(square(p));
            loss!.backward();
          });
        const d0 = small.stats.dispatches;
        oa.step();
        if (s === 2) expect(small.stats.dispatches - d0).toBe(1 + 3);
        ob.step();
        oa.zeroGrad();
        ob.zeroGrad();
      }
      expect(await bits(a)).toEqual(await bits(b));
    } finally {
      small.destroy();
    }
  });

  it('keeps the arena alive for its tensors after dispose, and releases it with them', async () => {
    const ps = makeParams(5);
    const live0 = ctx.memory.live;
    const o = new AdamW(ctx, ps);
    backward(ps, 0);
    o.step();
    const before = await bits(ps);
    o.dispose(); // the parameters still live in the parameter arena
    expect(await bits(ps)).toEqual(before);
    for (const p of ps) p.dispose();
    await ctx.sync();
    expect(ctx.memory.live).toBeLessThan(live0);
  });

  it('clipGradNorm reads all the gradients of an arena in one pass, bit-identical to one pass per gradient', async () => {
    const ps = makeParams(9);
    // the arenas come from recycled pool buffers full of NaN: nothing outside the live gradients may be read
    const junk = Array.from({ length: 8 }, () => ctx.alloc(4096));
    for (const b of junk) ctx.write(b, new Uint32Array(1024).fill(0x7fc00000));
    for (const b of junk) ctx.release(b);
    const o = new AdamW(ctx, ps);
    const norm = async () => {
      let ss = 0; // float64 reference from the gradients read back one by one
      for (const p of ps) if (p.grad) for (const x of (await p.grad.toArray()) as Float32Array) ss += x * x;
      const d0 = ctx.stats.dispatches;
      const r = clipGradNorm(ps, 0.5);
      const dispatches = ctx.stats.dispatches - d0;
      const perTensor = gradNorm(ctx, ps.filter((p) => p.grad).map((p) => p.grad!.data), { maxNorm: 0.5 });
      const got = (await download(ctx, r)) as Float32Array;
      expect(new Uint32Array(got.buffer)).toEqual(new Uint32Array(((await download(ctx, perTensor)) as Float32Array).buffer));
      expect(Math.abs(got[1]! - Math.sqrt(ss)) / Math.sqrt(ss)).toBeLessThan(1e-6);
      expect(got[0]).toBeCloseTo(Math.min(1, 0.5 / (Math.sqrt(ss) + 1e-6)), 6);
      ctx.release(r.buffer);
      ctx.release(perTensor.buffer);
      return dispatches;
    };
    backward(ps, 0);
    expect(await norm()).toBe(ps.length + 1); // before the first step: one pass per gradient
    o.step();
    o.zeroGrad();
    backward(ps, 1);
    expect(await norm()).toBe(2); // in the arena: one pass for all of them and the final sum
    o.step();
    o.zeroGrad();
    backward(ps, 2, new Set([4])); // one gradient missing: its stale values must not count
    expect(await norm()).toBe(2);
    o.dispose();
    for (const p of ps) p.dispose();
  });
});
