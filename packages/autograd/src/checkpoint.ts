import type { DeviceTensor } from '@rusty/backend';
import { backward, backwardFrom } from './engine';
import { autocast, computeDtype } from './ops/autocast';
import type { Node } from './node';
import { isGradEnabled, noGrad } from './scope';
import { releaseRef, retain } from './storage';
import { makeOutput, Tensor } from './tensor';

/**
 * Gradient checkpointing: run `fn` without keeping its intermediates; backward runs it again (with the tape
 * on) and backpropagates through that recomputation. Parameters `fn` closes over get their gradients too.
 * `fn` must be deterministic (no dropout with a fresh seed).
 */
export function checkpoint(fn: (...inputs: Tensor[]) => Tensor, ...inputs: Tensor[]): Tensor {
  const ctx = inputs[0]!.ctx;
  if (!isGradEnabled()) return fn(...inputs);
  const out = noGrad(() => fn(...inputs));
  const dtype = computeDtype(); // the recomputation runs under the autocast scope the forward ran in
  const saved = inputs.map((t) => {
    retain(t.data.buffer);
    return t.data;
  });
  const node: Node = {
    name: 'checkpoint',
    inputs,
    nOutputs: 1,
    freed: false,
    backward(grads) {
      const again = saved.map((d, i) => {
        retain(d.buffer);
        const t = new Tensor(ctx, { ...d }, false, null, 0, false);
        t.requiresGrad = inputs[i]!.requiresGrad;
        return t;
      });
      const y = autocast(dtype, () => fn(...again));
      const gy = grads[0]! as DeviceTensor;
      if (y.requiresGrad && y.node && gy.dtype === 'f32') {
        // backpropagate with the incoming gradient itself (no copy) and without the recomputed output's values,
        // which its backward never reads: two [tokens, hidden] f32 buffers less at the layer's peak
        const { node, outputIndex } = y;
        retain(gy.buffer);
        y.dispose();
        backwardFrom(ctx, node, outputIndex, { ...gy, shape: [...gy.shape] });
      } else {
        const g = new Tensor(ctx, gy, false, null, 0, false);
        retain(g.data.buffer);
        if (y.requiresGrad) backward(y, g);
        g.dispose();
        y.dispose();
      }
      return again.map((t) => {
        const gr = t.grad;
        const d = gr?.data ?? null;
        if (d) retain(d.buffer);
        t.dispose(); // releases the tensor and its gradient; `d` keeps its own reference
        return d;
      });
    },
    free() {
      if (this.freed) return;
      this.freed = true;
      for (const s of saved) releaseRef(ctx, s.buffer);
    },
  };
  const data = out.data;
  retain(data.buffer);
  out.dispose();
  return makeOutput(ctx, data, node);
}
