import { cast, gemv16, GEMV_MAX_ROWS, matmul as mm, numel, reduce, ShapeError, type Context, type DeviceTensor } from '@rusty/backend';
import { defineOp } from '../op';
import { releaseRef } from '../storage';
import type { Tensor } from '../tensor';
import { computeDtype, type ComputeDtype } from './autocast';
import { fmt, sumToShape } from './util';

interface MatmulAttrs {
  transA: boolean;
  transB: boolean;
}

const flat2 = (t: DeviceTensor): DeviceTensor => ({ ...t, shape: [numel(t.shape) / t.shape[t.shape.length - 1]!, t.shape[t.shape.length - 1]!] });

const matmulOp = defineOp<MatmulAttrs>({
  name: 'matmul',
  forward: (ctx, [a, b], { transA, transB }) => ({ outputs: mm(ctx, a!, b!, { transA, transB }), saved: [a!, b!] }),
  backward: (ctx, [g], [a, b], [ma, mb], { transA, transB }) => {
    // C = op(A) op(B).  d op(A) = dC op(B)^T, d op(B) = op(A)^T dC
    let da: DeviceTensor | null = null;
    let db: DeviceTensor | null = null;
    if (ma!.requiresGrad) {
      const r = transA ? mm(ctx, b!, g!, { transA: transB, transB: true }) : mm(ctx, g!, b!, { transB: !transB });
      da = reduceBatch(ctx, r, ma!.shape);
    }
    if (mb!.requiresGrad) {
      if (b!.shape.length === 2 && a!.shape.length > 2 && !transA) {
        // unbatched B: fold the batch of A and dC into rows
        const a2 = flat2(a!);
        const g2 = flat2(g!);
        db = transB ? mm(ctx, g2, a2, { transA: true }) : mm(ctx, a2, g2, { transA: true });
      } else {
        const r = transB ? mm(ctx, g!, a!, { transA: true, transB: transA }) : mm(ctx, a!, g!, { transA: !transA });
        db = reduceBatch(ctx, r, mb!.shape);
      }
    }
    return [da, db];
  },
});

/** Sum a batched gradient over the batch dims its input broadcast over. */
function reduceBatch(ctx: Context, r: DeviceTensor, shape: readonly number[]): DeviceTensor {
  if (numel(r.shape) === numel(shape)) return { ...r, shape: [...shape] };
  const s = sumToShape(ctx, r, shape);
  releaseRef(ctx, r.buffer);
  return s;
}

/** Batched matrix product with optional transposes (`transB` for `[out, in]` weights). */
export function matmul(a: Tensor, b: Tensor, opts: { transA?: boolean; transB?: boolean } = {}): Tensor {
  return matmulOp([a, b], { transA: !!opts.transA, transB: !!opts.transB });
}

const linearOp = defineOp<{ hasBias: boolean; gemvF32: boolean }>({
  name: 'linear',
  forward: (ctx, [x, w, b], { hasBias, gemvF32 }) => {
    const inF = w!.shape[1]!;
    if (x!.shape[x!.shape.length - 1] !== inF)
      throw new ShapeError(`linear: input ${fmt(x!.shape)} does not end in in_features ${inF} of weight ${fmt(w!.shape)}`);
    const x2 = flat2(x!);
    const bias = hasBias ? b : undefined;
    // at most 16 rows (decoding) and a 16-bit weight, or an f32 one where nothing needs a gradient (`gemvF32`:
    // inference; training keeps the tiled product, also when a checkpointed segment is recomputed): the GEMV that
    // reads W once (it runs matmul itself where the adapter has no subgroups or K is odd); else the tiled product
    const gemv = w!.dtype === 'f16' || w!.dtype === 'bf16' || (w!.dtype === 'f32' && gemvF32);
    const y = gemv && x2.shape[0]! <= GEMV_MAX_ROWS ? gemv16(ctx, x2, w!, { bias }) : mm(ctx, x2, w!, { transB: true, bias });
    return { outputs: { ...y, shape: [...x!.shape.slice(0, -1), w!.shape[0]!] }, saved: [x!, w!] };
  },
  backward: (ctx, [g], [x, w], [mx, mw, mb]) => {
    const g2 = flat2(g!);
    const dx = mx!.requiresGrad ? { ...mm(ctx, g2, w!), shape: [...mx!.shape] } : null;
    const dw = mw!.requiresGrad ? mm(ctx, g2, flat2(x!), { transA: true }) : null;
    const db = mb?.requiresGrad ? reduce(ctx, 'sum', g2, 0) : null;
    return [dx, dw, db];
  },
});

/**
 * `linear` with f16 products (mixed precision, as PyTorch autocast runs a Linear): x and W are rounded to f16
 * (each kept as is when already f16), the products accumulate in f32 (tensor cores where the adapter has
 * them, `matmul`'s f16 x f16 path), outputs and gradients are f32. Saved for backward: x in f16 (half the
 * activation memory of the f32 op) and W in f16: the f16 copy of a trainable weight (as autocast keeps it), a
 * frozen weight as stored (a 16-bit frozen weight is not duplicated; one that is not f16 is cast again in
 * backward). Backward rounds the incoming gradient to f16 for its two products (an f16 gradient is read as it is).
 */
const linearF16Op = defineOp<{ hasBias: boolean; keepCast: boolean }>({
  name: 'linear-f16',
  forward: (ctx, [x, w, b], { hasBias, keepCast }) => {
    const inF = w!.shape[1]!;
    if (x!.shape[x!.shape.length - 1] !== inF)
      throw new ShapeError(`linear: input ${fmt(x!.shape)} does not end in in_features ${inF} of weight ${fmt(w!.shape)}`);
    const xh = x!.dtype === 'f16' ? flat2(x!) : cast(ctx, flat2(x!), 'f16');
    const wh = w!.dtype === 'f16' ? w! : cast(ctx, w!, 'f16');
    const y = mm(ctx, xh, wh, { transB: true, bias: hasBias ? b : undefined });
    if (wh !== w && !keepCast) ctx.release(wh.buffer);
    return { outputs: { ...y, shape: [...x!.shape.slice(0, -1), w!.shape[0]!] }, saved: [xh, keepCast ? wh : w!] };
  },
  backward: (ctx, [g], [xh, w], [mx, mw, mb]) => {
    const g2 = flat2(g!);
    const gh = g2.dtype === 'f16' ? g2 : cast(ctx, g2, 'f16');
    let dx: DeviceTensor | null = null;
    if (mx!.requiresGrad) {
      const wh = w!.dtype === 'f16' ? w! : cast(ctx, w!, 'f16');
      dx = { ...mm(ctx, gh, wh), shape: [...mx!.shape] };
      if (wh !== w) ctx.release(wh.buffer);
    }
    const dw = mw!.requiresGrad ? mm(ctx, gh, xh!, { transA: true }) : null;
    const db = mb?.requiresGrad ? reduce(ctx, 'sum', g2, 0) : null;
    if (gh !== g2) ctx.release(gh.buffer);
    return [dx, dw, db];
  },
});

/** Options of {@link linear}. */
export interface LinearOptions {
  /** `'f16'`: products on f16 inputs with f32 accumulation (mixed precision; tensor cores where the adapter has
   *  subgroup matrices). `'f32'`: the inputs as stored, f32 arithmetic. Default: the enclosing
   *  {@link autocast} scope's compute dtype (`'f32'` outside one). */
  compute?: ComputeDtype;
}

/** `y = x W^T + b` with HF's `[out, in]` weight (f32, f16 or bf16) over the last dim of x; f16 products under
 *  an f16 {@link autocast} scope or `compute: 'f16'`. Outside one, at most 16 rows of x (a decoding step) and a
 *  16-bit weight, or an f32 one where neither x, W nor b requires a gradient, take the backend's GEMV (`gemv16`:
 *  W read once), the same f32 arithmetic in another order. */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor | null, opts: LinearOptions = {}): Tensor {
  if (weight.rank !== 2) throw new ShapeError(`linear: weight must be [out, in], got ${fmt(weight.shape)}`);
  if ((opts.compute ?? computeDtype()) === 'f16') {
    const keepCast = weight.requiresGrad;
    return bias ? linearF16Op([x, weight, bias], { hasBias: true, keepCast }) : linearF16Op([x, weight], { hasBias: false, keepCast });
  }
  const gemvF32 = weight.dtype === 'f32' && !x.requiresGrad && !weight.requiresGrad && !bias?.requiresGrad;
  return bias ? linearOp([x, weight, bias], { hasBias: true, gemvF32 }) : linearOp([x, weight], { hasBias: false, gemvF32 });
}
