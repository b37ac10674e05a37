// Module.loadStateDict and buffer ownership: a loaded parameter holds its own reference to the storage, so
// disposing the state dict's tensors (and the garbage collector running) never frees the model's weights.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createContext, type Context } from '@rusty/backend';
import { randn, Tensor } from '@rusty/autograd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Linear } from './layers';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('Module.loadStateDict', () => {
  it('the loaded weights survive disposing the source tensors and a garbage collection', async () => {
    const l = new Linear(ctx, 8, 6, { seed: 1, bias: true });
    const w = randn(48, 2);
    const b = randn(6, 3);
    const dict = { weight: Tensor.fromArray(ctx, w, [6, 8]), bias: Tensor.fromArray(ctx, b, [6]) };
    l.loadStateDict(dict);
    dict.weight.dispose();
    dict.bias.dispose();
    // collected temporaries release their buffers through the FinalizationRegistry, after the collection
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    // reuse whatever the pool holds: freed buffers of these sizes would be handed out and overwritten here
    const junk = [...Array(8)].map(() => Tensor.full(ctx, [48], 7));
    const junkB = [...Array(8)].map(() => Tensor.full(ctx, [6], 7));
    expect([...(await l.weight.toArray())]).toEqual([...Float32Array.from(w)]);
    expect([...(await l.bias!.toArray())]).toEqual([...Float32Array.from(b)]);
    for (const t of [...junk, ...junkB]) t.dispose();
    l.dispose();
  });
});
