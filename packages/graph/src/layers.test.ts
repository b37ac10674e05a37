// Embedding with its table on the host (offloadToHost): the lookup with the ids on the host, and without them,
// gives the GPU lookup's values bit for bit (16-bit and f32 tables, odd widths, ids outside the vocabulary); the
// table comes back with the same bytes.
import { createContext, ConfigError, storageBytes, testing, upload, type Context, type DType } from '@rusty/backend';
import { Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Embedding } from './layers';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

const bits = async (t: Tensor) => new Uint32Array((await t.toArray()).slice().buffer);

describe('Embedding.offloadToHost', () => {
  for (const [dtype, dim] of [['bf16', 6], ['f16', 5], ['f32', 3]] as [DType, number][])
    it(`${dtype} table [37, ${dim}]: host-gathered rows and the uploaded table give the GPU lookup bit for bit, then the same bytes back`, async () => {
      const num = 37;
      const e = new Embedding(ctx, num, dim, { requiresGrad: false }, 4);
      e.weight.assign(upload(ctx, testing.randn(num * dim, 7, 3), [num, dim], dtype));
      const bytes = storageBytes(dtype, num * dim);
      const stored = new Uint8Array(await ctx.read(e.weight.data.buffer, bytes), 0, bytes).slice();
      const host = [3, 0, 36, 4, -1, 37, 12, 3, 1000, 5];
      const ids = Tensor.fromArray(ctx, host, [2, 5], { dtype: 'i32' });
      const gpu = e.forward(ids);
      const want = await bits(gpu);
      // an id outside [0, 37) gives zeros
      expect(want.slice(4 * dim, 6 * dim).every((v) => v === 0)).toBe(true);
      const restore = await e.offloadToHost();
      expect(e.weight.data.buffer.size).toBeLessThan(bytes);
      ctx.trimPool(); // the table's old buffer is gone (the pool would hand it out again, contents and all)
      const gathered = e.forward(ids, host);
      const uploaded = e.forward(ids); // no host ids: the table is uploaded for the lookup
      expect(gathered.shape).toEqual([2, 5, dim]);
      expect(await bits(gathered)).toEqual(want);
      expect(await bits(uploaded)).toEqual(want);
      ctx.trimPool(); // (the uploaded table's buffer too)
      restore();
      expect(new Uint8Array(await ctx.read(e.weight.data.buffer, bytes), 0, bytes)).toEqual(stored);
      expect(await bits(e.forward(ids))).toEqual(want);
      for (const t of [gpu, gathered, uploaded, ids]) t.dispose();
      e.dispose();
    });

  it('a trainable table stays on the GPU', async () => {
    const e = new Embedding(ctx, 8, 4, { seed: 1 });
    await expect(e.offloadToHost()).rejects.toThrow(ConfigError);
    e.dispose();
  });
});
