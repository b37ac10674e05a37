// The context's memory counters: live / pooled bytes through allocate and release, the peaks of allocated
// (`peak`, as torch.cuda.max_memory_allocated) and held (`peakReserved`, as max_memory_reserved) memory, their reset.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sizeClass } from './buffer-pool';
import { createContext, type Context } from './context';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('ctx.memory', () => {
  it('counts live and pooled bytes, the allocated peak and the reserved peak, and resets both peaks', () => {
    ctx.trimPool();
    const m0 = ctx.memory;
    expect(m0.pooled).toBe(0);
    ctx.resetPeak();
    expect(ctx.memory.peak).toBe(m0.live);
    expect(ctx.memory.peakReserved).toBe(m0.live);
    const A = 3 << 20; // 3 MiB
    const B = 5000; // rounds up to its size class
    const a = ctx.alloc(A);
    const b = ctx.alloc(B);
    const sa = sizeClass(A);
    const sb = sizeClass(B);
    expect(sb).toBe(8192);
    expect(ctx.memory).toMatchObject({ live: m0.live + sa + sb, pooled: 0, peak: m0.live + sa + sb, peakReserved: m0.live + sa + sb, liveBuffers: m0.liveBuffers + 2 });
    ctx.release(a);
    // released into the pool: no longer allocated, still held
    expect(ctx.memory).toMatchObject({ live: m0.live + sb, pooled: sa, peak: m0.live + sa + sb, peakReserved: m0.live + sa + sb });
    // a new buffer of another size class: allocated stays below its peak, but what the pool holds rises past it
    const c = ctx.alloc(1 << 20);
    const sc = sizeClass(1 << 20);
    expect(ctx.memory.live).toBe(m0.live + sb + sc);
    expect(ctx.memory.peak).toBe(m0.live + sa + sb);
    expect(ctx.memory.peakReserved).toBe(m0.live + sa + sb + sc);
    // the same size class again comes from the pool: nothing new is held
    const a2 = ctx.alloc(A - 100);
    expect(ctx.memory).toMatchObject({ live: m0.live + sa + sb + sc, pooled: 0, peak: m0.live + sa + sb + sc, peakReserved: m0.live + sa + sb + sc });
    for (const x of [a2, b, c]) ctx.release(x);
    expect(ctx.memory).toMatchObject({ live: m0.live, pooled: sa + sb + sc });
    ctx.resetPeak();
    expect(ctx.memory).toMatchObject({ peak: m0.live, peakReserved: m0.live + sa + sb + sc });
    ctx.trimPool();
    ctx.resetPeak();
    expect(ctx.memory).toMatchObject({ pooled: 0, peak: m0.live, peakReserved: m0.live });
  });

  it('onRelease hooks run once, when their buffer itself is released; a removed hook never runs', () => {
    const a = ctx.alloc(64);
    const b = ctx.alloc(64);
    const calls: string[] = [];
    ctx.onRelease(a, () => calls.push('a1'));
    ctx.onRelease(a, () => calls.push('a2'));
    const off = ctx.onRelease(b, () => calls.push('b'));
    off();
    ctx.release(b);
    expect(calls).toEqual([]);
    ctx.release(a);
    expect(calls).toEqual(['a1', 'a2']);
    const c = ctx.alloc(64); // may be a's pooled buffer again: its hooks are gone
    ctx.release(c);
    expect(calls).toEqual(['a1', 'a2']);
  });
});
