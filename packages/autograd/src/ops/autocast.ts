import { ConfigError, isFloat } from '@rusty/backend';
import type { Tensor } from '../tensor';
import { cast } from './shape';

/**
 * The precision of matmul and attention inputs: `'f32'` (every op in f32) or `'f16'` (mixed precision, as
 * PyTorch's `torch.autocast(dtype=torch.float16)`: the projections and attention read f16 inputs and accumulate
 * in f32, on tensor cores where the adapter has subgroup matrices; norms, softmax, rotary tables, residual
 * adds, losses and reductions stay f32).
 */
export type ComputeDtype = 'f32' | 'f16';

const stack: ComputeDtype[] = [];

/** The compute dtype of the innermost {@link autocast} scope (`'f32'` outside every scope). */
export function computeDtype(): ComputeDtype {
  return stack[stack.length - 1] ?? 'f32';
}

/**
 * Run `fn` with matmul and attention inputs in `dtype` (PyTorch's `with torch.autocast(...)`): `linear` and
 * `attention` called inside cast their f32 inputs to f16 and save the f16 copies for backward (half the
 * activation memory); their outputs and every gradient stay f32. `null` keeps the enclosing scope's setting.
 * Synchronous functions only (the scope ends when `fn` returns). Backward needs no scope: the ops saved what
 * they used; `checkpoint` recomputes under the scope its forward ran in.
 */
export function autocast<T>(dtype: ComputeDtype | null, fn: () => T): T {
  if (dtype === null) return fn();
  if (dtype !== 'f32' && dtype !== 'f16') throw new ConfigError(`autocast: compute dtype must be 'f32' or 'f16', got '${String(dtype)}'`);
  stack.push(dtype);
  try {
    return fn();
  } finally {
    stack.pop();
  }
}

/**
 * `x` as the current compute dtype reads it: under an f16 {@link autocast}, a differentiable cast to f16 of a
 * float tensor that is not f16 yet (gradients flow back as f32); otherwise `x` itself. Modules call it once on
 * an input that several projections share (q, k, v; gate and up; a LoRA base and its A product), so the f16
 * copy is made and saved once.
 */
export function toCompute(x: Tensor): Tensor {
  return computeDtype() === 'f16' && x.dtype !== 'f16' && isFloat(x.dtype) ? cast(x, 'f16') : x;
}
