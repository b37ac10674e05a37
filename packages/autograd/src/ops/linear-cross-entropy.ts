import {
  accumulate,
  cast,
  crossEntropy as crossEntropyKernel,
  crossEntropyCount,
  empty,
  fill,
  matmul as mm,
  scaleInPlace,
  ShapeError,
  storageBytes,
  type Context,
  type DeviceTensor,
} from '@rusty/backend';
import { defineOp } from '../op';
import { isGradEnabled } from '../scope';
import { retain } from '../storage';
import type { Tensor } from '../tensor';
import { computeDtype } from './autocast';
import { fmt } from './util';

interface Attrs {
  ignoreIndex: number;
  /** Rows of logits per chunk. */
  chunk: number;
  f16: boolean;
  gradX: boolean;
  gradW: boolean;
}

/** Bytes of f32 logits (and as many of their gradient) one chunk may hold: with the f16 head, the loss's part of
 *  a training step's peak (1.1B LoRA, vocab 32000: 256-row chunks of 31 MiB; 524-row chunks of 64 MiB held
 *  64 MiB more at the peak of the step without checkpointing). */
const CHUNK_BYTES = 32 * 2 ** 20;

/** Rows of logits per chunk for a vocabulary of `v`: at most {@link CHUNK_BYTES} of f32 logits, a multiple of 64
 *  rows when that is at least 64 (whole tiles for the matmul), at least 1. */
export function chunkRowsFor(v: number): number {
  const rows = Math.floor(CHUNK_BYTES / (4 * v));
  return rows >= 64 ? rows - (rows % 64) : Math.max(1, rows);
}

/** Rows `r0..r1` of a row-major 2-D tensor, copied into a new tensor (16-bit rows must be whole words). */
function rows(ctx: Context, t: DeviceTensor, r0: number, r1: number): DeviceTensor {
  const w = t.shape[1]!;
  if (r0 === 0 && r1 === t.shape[0]) return t;
  const out = empty(ctx, [r1 - r0, w], t.dtype);
  const rowBytes = storageBytes(t.dtype, w);
  ctx.copy(t.buffer, out.buffer, (r1 - r0) * rowBytes, r0 * rowBytes, 0);
  return out;
}

const free = (ctx: Context, t: DeviceTensor, keep: DeviceTensor) => {
  if (t.buffer !== keep.buffer) ctx.release(t.buffer);
};

const linearCrossEntropyOp = defineOp<Attrs>({
  name: 'linear_cross_entropy',
  forward: (ctx, [x, w, targets], o) => {
    const [n, h] = x!.shape as [number, number];
    const v = w!.shape[0]!;
    const xc = o.f16 && x!.dtype !== 'f16' ? cast(ctx, x!, 'f16') : x!;
    const wc = o.f16 && w!.dtype !== 'f16' ? cast(ctx, w!, 'f16') : w!;
    const count = crossEntropyCount(ctx, targets!, { ignoreIndex: o.ignoreIndex });
    const loss = fill(ctx, [1], 0);
    const dx = o.gradX ? empty(ctx, [n, h]) : null;
    const dw = o.gradW ? fill(ctx, [v, h], 0) : null;
    const grad = o.gradX || o.gradW;
    for (let r0 = 0; r0 < n; r0 += o.chunk) {
      const r1 = Math.min(n, r0 + o.chunk);
      const xr = rows(ctx, xc, r0, r1);
      const tr = rows(ctx, { ...targets!, shape: [n, 1] }, r0, r1);
      const logits = mm(ctx, xr, wc, { transB: true });
      const r = crossEntropyKernel(ctx, logits, { ...tr, shape: [r1 - r0] }, { ignoreIndex: o.ignoreIndex, count, computeGrad: grad });
      ctx.release(logits.buffer);
      accumulate(ctx, loss, r.loss, 1);
      ctx.release(r.loss.buffer);
      ctx.release(r.rowLoss.buffer);
      if (r.dlogits) {
        const dl = o.f16 ? cast(ctx, r.dlogits, 'f16') : r.dlogits;
        if (dl !== r.dlogits) ctx.release(r.dlogits.buffer);
        if (dx) {
          const d = mm(ctx, dl, wc);
          ctx.copy(d.buffer, dx.buffer, (r1 - r0) * h * 4, 0, r0 * h * 4);
          ctx.release(d.buffer);
        }
        if (dw) mm(ctx, dl, xr, { transA: true, out: dw, accumulate: true });
        ctx.release(dl.buffer);
      }
      free(ctx, xr, xc);
      if (tr.buffer !== targets!.buffer) ctx.release(tr.buffer);
    }
    ctx.release(count.buffer);
    free(ctx, xc, x!);
    free(ctx, wc, w!);
    return { outputs: loss, saved: [dx, dw].filter((t): t is DeviceTensor => !!t) };
  },
  backward: (ctx, [g], saved, [mx, mw], o) => {
    // the gradients were computed with the forward (one pass over each chunk of logits); scale them by the
    // upstream gradient of the loss
    let i = 0;
    const dx = o.gradX ? saved[i++]! : null;
    const dw = o.gradW ? saved[i++]! : null;
    const out = [mx!.requiresGrad ? dx : null, mw!.requiresGrad ? dw : null, null];
    for (const d of out)
      if (d) {
        scaleInPlace(ctx, d, g!);
        retain(d.buffer); // handed on as the gradient; the node's own reference goes when it is freed
      }
    return out;
  },
});

/**
 * `crossEntropy(x W^T, targets)` (mean over the targets that are not `ignoreIndex`) without materialising the
 * [N, V] logits: rows are processed in chunks of at most 32 MiB of f32 logits ({@link chunkRowsFor}), each
 * chunk's logits, loss and gradient computed and dropped before the next (the head's gradients for x and W
 * accumulate in the same pass).
 * x is [N, H], W is [V, H] (an LM head or tied embedding), targets i32 [N]. Under an f16 autocast scope x, W
 * and the logits' gradient are rounded to f16 for the products (f32 accumulation, f32 logsumexp and loss).
 */
export function linearCrossEntropy(x: Tensor, weight: Tensor, targets: Tensor, opts: { ignoreIndex?: number; chunkRows?: number } = {}): Tensor {
  if (x.rank !== 2 || weight.rank !== 2 || x.shape[1] !== weight.shape[1])
    throw new ShapeError(`linearCrossEntropy: x ${fmt(x.shape)} and weight ${fmt(weight.shape)} must be [N, H] and [V, H]`);
  if (targets.rank !== 1 || targets.shape[0] !== x.shape[0])
    throw new ShapeError(`linearCrossEntropy: targets ${fmt(targets.shape)} must be [${x.shape[0]}] for x ${fmt(x.shape)}`);
  const v = weight.shape[0]!;
  const f16 = computeDtype() === 'f16';
  // 16-bit rows of an odd width do not start on whole words: one chunk then
  const n = x.shape[0]!;
  const chunk = x.shape[1]! % 2 && (f16 || x.dtype !== 'f32') ? n : Math.max(1, opts.chunkRows ?? chunkRowsFor(v));
  const rec = isGradEnabled();
  return linearCrossEntropyOp([x, weight, targets], {
    ignoreIndex: opts.ignoreIndex ?? -100,
    chunk,
    f16,
    gradX: rec && x.requiresGrad,
    gradW: rec && weight.requiresGrad,
  });
}
