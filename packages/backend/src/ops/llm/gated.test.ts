// The gated MLP activations (swiglu, geluTanhGate) and their backward: one kernel pair, specialised by the
// activation, against float64 references (checked first against finite differences), f32/f16/bf16 inputs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import type { DType } from '../../dtype';
import { ShapeError } from '../../errors';
import { cast } from '../cast';
import { empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { dot, finiteDiff, randn, relErr } from '../../testing';
import { geluTanhGate, geluTanhGateBackward, swiglu, swigluBackward } from './gated';
import { refGeluTanhGate, refGeluTanhGateBackward, refSwiglu, refSwigluBackward } from './llm.ref';
import { get, poisoned, quantize, randTensor } from './test-util';

let ctx: Context;
const storageBytesOf = (t: DeviceTensor): number => Math.ceil((t.shape.reduce((a, b) => a * b, 1) * 2) / 4) * 4;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const OPS = [
  { name: 'swiglu', fwd: swiglu, bwd: swigluBackward, refFwd: refSwiglu, refBwd: refSwigluBackward },
  { name: 'geluTanhGate', fwd: geluTanhGate, bwd: geluTanhGateBackward, refFwd: refGeluTanhGate, refBwd: refGeluTanhGateBackward },
];

const CASES: [number[], DType, DType][] = [
  [[1, 17], 'f32', 'f32'],
  [[3, 64], 'f16', 'bf16'],
  [[37, 100], 'bf16', 'bf16'],
  [[2, 5, 1031], 'f32', 'f16'],
  [[4, 1024], 'f32', 'f32'], // whole workgroups only (the unchecked fast path)
];

for (const { name, fwd, bwd, refFwd, refBwd } of OPS) {
  describe(name, () => {
    it('reference backward matches finite differences', () => {
      const g = randn(20, 1, 3);
      const u = randn(20, 2);
      const dy = randn(20, 3);
      const { dg, du } = refBwd(dy, g, u);
      expect(relErr(dg, finiteDiff((gg) => dot(refFwd(gg, u), dy), g))).toBeLessThan(1e-7);
      expect(relErr(du, finiteDiff((uu) => dot(refFwd(g, uu), dy), u))).toBeLessThan(1e-7);
    });

    for (const [shape, gd, ud] of CASES) {
      it(`gate ${gd}, up ${ud} ${JSON.stringify(shape)}`, async () => {
        const n = shape.reduce((a, b) => a * b);
        const g = randTensor(ctx, shape, gd, n, 3);
        const u = randTensor(ctx, shape, ud, n + 1);
        const dy = randTensor(ctx, shape, gd, n + 2);
        const out = fwd(ctx, g.t, u.t, { out: poisoned(ctx, shape) });
        const { dgate, dup } = bwd(ctx, dy.t, g.t, u.t, { dgateOut: poisoned(ctx, shape), dupOut: poisoned(ctx, shape) });
        const rb = refBwd(dy.data, g.data, u.data);
        expect(relErr(await get(ctx, out), refFwd(g.data, u.data))).toBeLessThan(1e-5);
        expect(relErr(await get(ctx, dgate), rb.dg)).toBeLessThan(1e-5);
        expect(relErr(await get(ctx, dup), rb.du)).toBeLessThan(1e-5);
        release(ctx, g.t, u.t, dy.t, out, dgate, dup);
      });
    }

    // 16-bit outputs are the f32 ones rounded as `cast` rounds them, bit for bit (what a consumer that casts the
    // f32 outputs reads); 32-bit inputs too (the MLP's f32 projections), and values past f16's range
    for (const [shape, gd, ud, dt] of [[[5, 130], 'f32', 'f32', 'f16'], [[2, 3, 66], 'f16', 'bf16', 'bf16']] as [number[], DType, DType, DType][]) {
      it(`${dt} outputs equal the cast f32 outputs, gate ${gd}, up ${ud} ${JSON.stringify(shape)}`, async () => {
        const n = shape.reduce((a, b) => a * b);
        const g = randTensor(ctx, shape, gd, n, 3);
        const u = randTensor(ctx, shape, ud, n + 1, gd === 'f32' ? 30000 : 1);
        const dy = randTensor(ctx, shape, 'f32', n + 2, 100);
        const f32 = [fwd(ctx, g.t, u.t), ...Object.values(bwd(ctx, dy.t, g.t, u.t))];
        {
          const bad = (): DeviceTensor => {
            const t = empty(ctx, shape, dt);
            poison(ctx, t, 0x7e017e01);
            return t;
          };
          const half = [fwd(ctx, g.t, u.t, { out: bad() }), ...Object.values(bwd(ctx, dy.t, g.t, u.t, { dgateOut: bad(), dupOut: bad(), dtype: dt }))];
          const alloc = [fwd(ctx, g.t, u.t, { dtype: dt }), ...Object.values(bwd(ctx, dy.t, g.t, u.t, { dtype: dt }))];
          for (let i = 0; i < 3; i++) {
            const want = cast(ctx, f32[i]!, dt);
            const bytes = storageBytesOf(want);
            const w = new Uint16Array(await ctx.read(want.buffer, bytes));
            for (const t of [half[i]!, alloc[i]!]) {
              expect(t.dtype).toBe(dt);
              expect(new Uint16Array(await ctx.read(t.buffer, bytes))).toEqual(w);
            }
            release(ctx, want, half[i]!, alloc[i]!);
          }
        }
        release(ctx, g.t, u.t, dy.t, ...f32);
      });
    }

    it('16-bit outputs need an even last dim and a float format', () => {
      const a = upload(ctx, new Float32Array(6), [2, 3]);
      expect(() => fwd(ctx, a, a, { dtype: 'f16' })).toThrow(new RegExp(`${name}: f16 outputs need an even last dim`));
      expect(() => bwd(ctx, a, a, a, { dtype: 'bf16' })).toThrow(/bf16 outputs need an even last dim/);
      expect(() => fwd(ctx, a, a, { dtype: 'i32' })).toThrow(/outputs are float, not i32/);
      expect(() => bwd(ctx, a, a, a, { dtype: 'f16', dgateOut: empty(ctx, [2, 3]) })).toThrow(ShapeError);
      release(ctx, a);
    });

    it('saturates without NaN for large |gate|, exact where the curve is flat', async () => {
      const gv = quantize('f32', [-200, -90, -20, -6, 0, 6, 20, 90, 200, 1e-30]);
      const two = new Float64Array(10).fill(2);
      const g = upload(ctx, gv, [10]);
      const u = upload(ctx, two, [10]);
      const out = await get(ctx, fwd(ctx, g, u));
      const ref = refFwd(gv, two);
      for (let i = 0; i < 10; i++) expect(Math.abs(out[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-5 + 1e-30);
      const { dgate, dup } = bwd(ctx, u, g, u);
      const rb = refBwd(two, gv, two);
      expect(relErr(await get(ctx, dgate), rb.dg)).toBeLessThan(1e-5);
      expect(relErr(await get(ctx, dup), rb.du)).toBeLessThan(1e-5);
      release(ctx, g, u, dgate, dup);
    });

    it('validates shapes', () => {
      const a = upload(ctx, new Float32Array(6), [2, 3]);
      const b = upload(ctx, new Float32Array(6), [3, 2]);
      expect(() => fwd(ctx, a, b)).toThrow(ShapeError);
      expect(() => fwd(ctx, a, b)).toThrow(new RegExp(`${name}: gate \\[2, 3\\] and up \\[3, 2\\] differ`));
      expect(() => bwd(ctx, b, a, a)).toThrow(/dout \[3, 2\] must be \[2, 3\]/);
      release(ctx, a, b);
    });
  });
}

it('geluTanhGate reference: spot values of the tanh formula', () => {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated separately in Python (math, float64)
  const want = [-0.0036373920817729943, -0.15880800939172324, 0.34571400982514394, 1.954597694087775];
  const got = refGeluTanhGate(Float64Array.from([-3, -1, 0.5, 2]), new Float64Array(4).fill(1));
  want.forEach((w, i) => expect(got[i]).toBeCloseTo(w, 14));
});

// the 16-bit decode is the same for every activation; silu in f32 is accurate enough to see it exactly
it('swiglu: 16-bit subnormals and extremes decode exactly on the word-pair path', async () => {
  const vals = [2 ** -24, -(2 ** -24), 3 * 2 ** -20, 2 ** -15, -(2 ** -14), 65504, -65504, 0, -0, 1e-3, 7, -7];
  for (const dt of ['f16', 'bf16'] as DType[]) {
    const g = quantize(dt, vals);
    const u = quantize(dt, vals.map((_, i) => (i % 2 ? 1.5 : -0.75)));
    const gt = upload(ctx, g, [2, 6], dt);
    const ut = upload(ctx, u, [2, 6], dt);
    const out = await get(ctx, swiglu(ctx, gt, ut, { out: poisoned(ctx, [2, 6]) }));
    const ref = refSwiglu(g, u);
    for (let i = 0; i < vals.length; i++) expect(Math.abs(out[i]! - ref[i]!)).toBeLessThanOrEqual(Math.abs(ref[i]!) * 1e-6 + 1e-30);
    release(ctx, gt, ut);
  }
});
