import { cast, LOWRANK_MAX_R, lowRankOuter, lowRankProject, lowRankUpdate, matmul as mm, numel, reduce, ShapeError, type Context, type DeviceTensor } from '@rusty/backend';
import { defineOp } from '../op';
import type { Tensor } from '../tensor';
import { computeDtype, type ComputeDtype } from './autocast';
import { fmt } from './util';

interface LoraAttrs {
  hasBias: boolean;
  scaling: number;
  f16: boolean;
}

const flat2 = (t: DeviceTensor): DeviceTensor => ({ ...t, shape: [numel(t.shape) / t.shape[t.shape.length - 1]!, t.shape[t.shape.length - 1]!] });

/** `t` in the compute dtype: itself, or a new f16 copy (the caller releases it when `!== t`). */
const inCompute = (ctx: Context, t: DeviceTensor, f16: boolean): DeviceTensor => (f16 && t.dtype !== 'f16' ? cast(ctx, t, 'f16') : t);

function drop(ctx: Context, t: DeviceTensor, orig: DeviceTensor): void {
  if (t.buffer !== orig.buffer) ctx.release(t.buffer);
}

/** `x A^T` (A `[r, K]`) or `x B` (B `[K, r]`): one pass over x for ranks the low-rank kernel takes, else matmul. */
export function project(ctx: Context, x: DeviceTensor, w: DeviceTensor, layout: 'rk' | 'kr', r: number): DeviceTensor {
  if (r <= LOWRANK_MAX_R) return lowRankProject(ctx, x, w, { wLayout: layout });
  return mm(ctx, x, w, { transB: layout === 'rk' });
}

/** `alpha Y^T Z` as `[Q, r]` or `[r, Q]` (the adapters' weight gradients). */
export function outer(ctx: Context, y: DeviceTensor, z: DeviceTensor, layout: 'qr' | 'rq', alpha: number, r: number): DeviceTensor {
  if (r <= LOWRANK_MAX_R) return lowRankOuter(ctx, y, z, { outLayout: layout, alpha });
  return layout === 'qr' ? mm(ctx, y, z, { transA: true, alpha }) : mm(ctx, z, y, { transA: true, alpha });
}

/** `y += alpha u B^T` (B `[N, r]`) or `y += alpha v A` (A `[r, N]`) in place: the low-rank update kernel for ranks
 *  it takes and an f32 y, else matmul's accumulate. */
export function update(ctx: Context, y: DeviceTensor, u: DeviceTensor, w: DeviceTensor, layout: 'nr' | 'rn', alpha: number, r: number): void {
  if (r <= LOWRANK_MAX_R && y.dtype === 'f32') lowRankUpdate(ctx, y, u, w, { wLayout: layout, alpha });
  else mm(ctx, u, w, { transB: layout === 'nr', alpha, accumulate: true, out: y });
}

/**
 * The LoRA projection as one op: `y = x W^T + b + s (x A^T) B^T` with the frozen W `[out, in]`, A `[r, in]`,
 * B `[out, r]`. The scaled low-rank update is added into the base product in place (`lowRankUpdate`: one pass
 * over `[tokens, out]`, no separate scale and add, forward or backward); x is cast to the compute dtype once; the
 * four products with a long side (`x A^T`, `dY B`, `dA = v^T x`, `dB = dY^T u`) run on the low-rank kernels (one
 * pass over the big operand, A, B, u and v read in f32: they are small). Saved for backward: x (in the
 * compute dtype), W, A, B and `u = x A^T` (f32 `[tokens, r]`).
 * Backward: `v = dY B`, `dx = dY W + s v A`, `dA = s v^T x`, `dB = s dY^T u`.
 */
const loraLinearOp = defineOp<LoraAttrs>({
  name: 'lora-linear',
  forward: (ctx, [x, w, a, b, bias], { hasBias, scaling, f16 }) => {
    const inF = w!.shape[1]!;
    const r = a!.shape[0]!;
    if (x!.shape[x!.shape.length - 1] !== inF)
      throw new ShapeError(`loraLinear: input ${fmt(x!.shape)} does not end in in_features ${inF} of weight ${fmt(w!.shape)}`);
    if (a!.shape.length !== 2 || a!.shape[1] !== inF || b!.shape.length !== 2 || b!.shape[0] !== w!.shape[0] || b!.shape[1] !== r)
      throw new ShapeError(`loraLinear: A ${fmt(a!.shape)} and B ${fmt(b!.shape)} do not fit weight ${fmt(w!.shape)} (A [r, in], B [out, r])`);
    const x2 = flat2(x!);
    const xc = inCompute(ctx, x2, f16);
    const wc = inCompute(ctx, w!, f16);
    const y = mm(ctx, xc, wc, { transB: true, bias: hasBias ? bias : undefined });
    drop(ctx, wc, w!);
    const u = project(ctx, xc, a!, 'rk', r);
    update(ctx, y, u, b!, 'nr', scaling, r);
    return { outputs: { ...y, shape: [...x!.shape.slice(0, -1), w!.shape[0]!] }, saved: [xc, w!, a!, b!, u] };
  },
  backward: (ctx, [g], [xc, w, a, b, u], [mx, mw, ma, mb, mbias], { scaling, f16 }) => {
    const r = a!.shape[0]!;
    const g2 = flat2(g!);
    const gc = inCompute(ctx, g2, f16);
    const v = mx!.requiresGrad || ma!.requiresGrad ? project(ctx, gc, b!, 'kr', r) : null;
    let dx: DeviceTensor | null = null;
    if (mx!.requiresGrad) {
      const wc = inCompute(ctx, w!, f16);
      dx = mm(ctx, gc, wc);
      drop(ctx, wc, w!);
      update(ctx, dx, v!, a!, 'rn', scaling, r);
      dx = { ...dx, shape: [...mx!.shape] };
    }
    const dw = mw!.requiresGrad ? mm(ctx, gc, xc!, { transA: true }) : null;
    const da = ma!.requiresGrad ? outer(ctx, xc!, v!, 'rq', scaling, r) : null;
    const db = mb!.requiresGrad ? outer(ctx, gc, u!, 'qr', scaling, r) : null;
    const dbias = mbias?.requiresGrad ? reduce(ctx, 'sum', g2, 0) : null;
    if (v) ctx.release(v.buffer);
    drop(ctx, gc, g2);
    return [dx, dw, da, db, dbias];
  },
});

/**
 * `y = x W^T + b + scaling * (x A^T) B^T` (a LoRA-adapted Linear; PEFT's `lora_A` is A `[r, in]`, `lora_B` is
 * B `[out, r]`) as one differentiable op. `compute` as in {@link linear}: default the enclosing
 * {@link autocast} scope's dtype; under `'f16'` every product reads f16 inputs and accumulates in f32.
 * Agrees with `add(linear(x, W, b), scale(linear(linear(x, A), B), scaling))` (see lora-linear.test.ts).
 */
export function loraLinear(
  x: Tensor,
  weight: Tensor,
  bias: Tensor | null | undefined,
  loraA: Tensor,
  loraB: Tensor,
  scaling: number,
  opts: { compute?: ComputeDtype } = {},
): Tensor {
  if (weight.rank !== 2) throw new ShapeError(`loraLinear: weight must be [out, in], got ${fmt(weight.shape)}`);
  if (!Number.isFinite(scaling)) throw new ShapeError(`loraLinear: scaling must be finite, got ${scaling}`);
  const attrs = { hasBias: !!bias, scaling, f16: (opts.compute ?? computeDtype()) === 'f16' };
  return loraLinearOp(bias ? [x, weight, loraA, loraB, bias] : [x, weight, loraA, loraB], attrs);
}
