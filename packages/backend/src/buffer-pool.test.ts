// The buffer pool's reuse rule: released buffers are kept up to max(maxPooled, the allocated peak), so a step that
// frees and re-allocates its working set gets the same buffers back instead of new ones.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BufferPool, type GpuBuffer } from './buffer-pool';
import { createContext, type Context } from './context';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('BufferPool', () => {
  it('keeps a working set larger than maxPooled (up to the allocated peak) and hands the same buffers back', () => {
    const destroyed: GpuBuffer[] = [];
    const pool = new BufferPool(ctx.device, 1 << 30, (b) => destroyed.push(b));
    pool.maxPooled = 1 << 20; // 1 MiB: below the 3 MiB working set
    const step = () => [pool.acquire(1 << 20), pool.acquire(1 << 20), pool.acquire(1 << 20)];
    const first = step();
    for (const b of first) pool.release(b);
    expect(destroyed).toHaveLength(0);
    expect(pool.stats.pooled).toBe(3 << 20);
    const second = step();
    expect(second.map((b) => b.id).sort()).toEqual(first.map((b) => b.id).sort());
    for (const b of second) pool.release(b);
    // past both the peak and maxPooled: released buffers are destroyed
    pool.trim();
    destroyed.length = 0;
    const big = [pool.acquire(1 << 20), pool.acquire(1 << 20), pool.acquire(1 << 20)];
    const extra = pool.acquire(1 << 20); // peak 4 MiB now
    for (const b of big) pool.release(b);
    pool.release(extra);
    expect(destroyed).toHaveLength(0);
    const more = [pool.acquire(2 << 20), pool.acquire(2 << 20), pool.acquire(2 << 20)]; // 6 MiB live: peak 6 MiB
    for (const b of more) pool.release(b); // pooled 4 + 6 MiB > peak 6 MiB: some are destroyed
    expect(destroyed.length).toBeGreaterThan(0);
    expect(pool.stats.pooled).toBeLessThanOrEqual(Math.max(pool.maxPooled, pool.stats.peak));
    pool.trim();
  });
});
