// Sub-buffers (ctx.subBuffer): tensors stored at an offset inside an arena buffer, bound, written, read and
// copied by every op like whole buffers; the arena's lifetime; range checks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from './context';
import { DeviceError } from './errors';
import { add, mul } from './ops/core/elementwise';
import { download, poison, upload, type DeviceTensor } from './tensor';
import { randn } from './testing';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('ctx.subBuffer', () => {
  it('ops read and write tensors at an offset of an arena and leave the rest of it alone', async () => {
    const a = ctx.bindingAlignment;
    const n = 37; // not a multiple of anything
    const slot = Math.ceil((n * 4) / a) * a;
    const arena = ctx.alloc(4 * slot);
    const words = arena.size / 4;
    ctx.write(arena, new Uint32Array(words).fill(0x7fc00000)); // NaN everywhere
    const outArena = ctx.alloc(4 * slot);
    ctx.write(outArena, new Uint32Array(outArena.size / 4).fill(0x7fc00000));
    const view = (i: number, ar = arena): DeviceTensor => ({ buffer: ctx.subBuffer(ar, i * slot, slot), dtype: 'f32', shape: [n] });
    const [x, y, out] = [view(0), view(1), view(3, outArena)];
    const xs = Float32Array.from(randn(n, 1));
    const ys = Float32Array.from(randn(n, 2));
    ctx.write(x.buffer, xs);
    ctx.write(y.buffer, ys);
    mul(ctx, x, y, { out }); // bound at offsets 0, slot and 3 slot
    // WebGPU forbids one buffer bound read-only and writable in one dispatch, even as disjoint ranges
    expect(() => mul(ctx, x, y, { out: view(2) })).toThrow(/one read-only and one writable/);
    const z = add(ctx, out, x); // a pool output from an arena input
    const got = (await download(ctx, out)) as Float32Array;
    const zs = (await download(ctx, z)) as Float32Array;
    for (let i = 0; i < n; i++) {
      expect(got[i]).toBe(Math.fround(xs[i]! * ys[i]!));
      expect(zs[i]).toBe(Math.fround(got[i]! + xs[i]!));
    }
    // the rest of both arenas (slots 2 and 3 of the input arena, 0 to 2 of the output arena, the padding after
    // each tensor) is untouched
    for (const [ar, used] of [[arena, [0, 1]], [outArena, [3]]] as const) {
      const all = new Uint32Array(await ctx.read(ar, 4 * slot));
      for (let w = 0; w < slot; w++) {
        const s = Math.floor((w * 4) / slot);
        if (!(used as readonly number[]).includes(s) || (w * 4) % slot >= n * 4) expect(all[w]).toBe(0x7fc00000);
      }
    }
    // copies honour both offsets
    const c = upload(ctx, new Float32Array(n).fill(3), [n]);
    poison(ctx, y);
    ctx.copy(c.buffer, y.buffer, n * 4);
    ctx.copy(x.buffer, c.buffer, n * 4);
    expect(Array.from((await download(ctx, y)) as Float32Array)).toEqual(new Array(n).fill(3));
    expect(Array.from((await download(ctx, c)) as Float32Array)).toEqual(Array.from(xs));
    for (const t of [x, y, out, z, c]) ctx.release(t.buffer);
    ctx.release(arena);
    ctx.release(outArena);
  });

  it('a range viewed again (a new sub-buffer of the same bytes) binds through the bind group made for it before', async () => {
    const a = ctx.bindingAlignment;
    const arena = ctx.alloc(4 * a);
    const groups = () => (ctx as unknown as { bindGroups: Map<string, unknown> }).bindGroups.size;
    const x = upload(ctx, Float32Array.from(randn(8, 3)), [8]);
    const run = async (at: number) => {
      const out: DeviceTensor = { buffer: ctx.subBuffer(arena, at, 32), dtype: 'f32', shape: [8] };
      add(ctx, x, x, { out });
      const got = Array.from((await download(ctx, out)) as Float32Array);
      ctx.release(out.buffer);
      return got;
    };
    const want = Array.from((await download(ctx, x)) as Float32Array).map((v) => Math.fround(2 * v));
    expect(await run(0)).toEqual(want);
    const n = groups();
    expect(await run(0)).toEqual(want); // the same range: no new bind group
    expect(groups()).toBe(n);
    expect(await run(a)).toEqual(want); // another range: its own
    expect(groups()).toBe(n + 1);
    ctx.release(x.buffer);
    ctx.release(arena);
  });

  it('the arena returns to the pool only when it and every sub-buffer are released', () => {
    const arena = ctx.alloc(1 << 12);
    const live0 = ctx.memory.live;
    const s1 = ctx.subBuffer(arena, 0, 256);
    const s2 = ctx.subBuffer(arena, 1024, 256);
    expect(ctx.memory.live).toBe(live0); // sub-buffers take no memory of their own
    ctx.release(s1);
    ctx.release(arena);
    expect(arena.released).toBe(false); // s2 still uses it
    expect(ctx.memory.live).toBe(live0);
    ctx.release(s2);
    ctx.release(s2); // idempotent
    expect(arena.released).toBe(true);
    expect(ctx.memory.live).toBe(live0 - (1 << 12));
    expect(() => ctx.write(s1, new Float32Array(1))).toThrow(/already released/);
  });

  it('refuses misaligned or out-of-range sub-buffers', () => {
    const a = ctx.bindingAlignment;
    const arena = ctx.alloc(4 * a);
    expect(() => ctx.subBuffer(arena, a / 2, 16)).toThrow(DeviceError);
    expect(() => ctx.subBuffer(arena, 0, 6)).toThrow(/multiple of 4/);
    expect(() => ctx.subBuffer(arena, arena.size - a, 2 * a)).toThrow(/ends past/);
    const s = ctx.subBuffer(arena, 0, 16);
    expect(() => ctx.subBuffer(s, 0, 16)).toThrow(/itself a sub-buffer/);
    ctx.release(s);
    ctx.release(arena);
    expect(() => ctx.subBuffer(arena, 0, 16)).toThrow(/already released/);
  });
});
