import type { Context, DeviceTensor } from '@rusty/backend';
import { RustyError } from '@rusty/backend';
import type { Node } from './node';
import { isGradEnabled } from './scope';
import { releaseRef, retain } from './storage';
import { makeOutput, Tensor } from './tensor';

/** Shape and dtype of an op input, given to backward (the input itself may be gone). */
export interface InputMeta {
  shape: readonly number[];
  dtype: DeviceTensor['dtype'];
  requiresGrad: boolean;
}

export interface ForwardResult {
  /** The op's outputs, each owned by its new tensor: an output that views an input's storage must hold its own
   *  reference (`retain`, as `view` helpers do). */
  outputs: DeviceTensor | DeviceTensor[];
  /** What backward needs: inputs or outputs (kept alive by reference) or new tensors (owned by the op). */
  saved?: DeviceTensor[];
}

/**
 * A differentiable operation: forward and backward in one place, over backend storage.
 * `backward` returns one gradient per input (null where none is needed: check `inputs[i].requiresGrad`);
 * each returned tensor must be new, or `retain`ed if it is one of `grads` passed through.
 */
export interface OpDef<A = void> {
  name: string;
  forward(ctx: Context, inputs: DeviceTensor[], attrs: A): ForwardResult;
  backward?(
    ctx: Context,
    grads: readonly (DeviceTensor | null)[],
    saved: readonly DeviceTensor[],
    inputs: readonly InputMeta[],
    attrs: A,
  ): readonly (DeviceTensor | null | undefined)[];
}

/** An op users call on tensors: one output gives a Tensor, several give an array. */
export type Op<A> = ((inputs: Tensor[], attrs: A) => Tensor) & {
  def: OpDef<A>;
  /** Every output, for ops with several. */
  multi: (inputs: Tensor[], attrs: A) => Tensor[];
};

const registry = new Map<string, OpDef<any>>();

/** Look an op up by name (`registeredOps()` lists them). */
export function getOp(name: string): OpDef<any> | undefined {
  return registry.get(name);
}

export function registeredOps(): string[] {
  return [...registry.keys()].sort();
}

export class OpError extends RustyError {
  override readonly code = 'OP';
}

/**
 * Define a differentiable op (the `torch.autograd.Function` equivalent) from backend kernels, register it by
 * name and return a function over tensors.
 */
export function defineOp<A = void>(def: OpDef<A>): Op<A> {
  if (registry.has(def.name) && registry.get(def.name) !== def) throw new OpError(`an op named '${def.name}' is already defined`);
  registry.set(def.name, def);
  const multi = (inputs: Tensor[], attrs: A): Tensor[] => runOp(def, inputs, attrs);
  const single = ((inputs: Tensor[], attrs: A): Tensor => multi(inputs, attrs)[0]!) as Op<A>;
  single.def = def;
  single.multi = multi;
  return single;
}

/** Run an op: forward on storage, then (when recording and an input requires grad) a node for backward. */
export function runOp<A>(def: OpDef<A>, inputs: Tensor[], attrs: A): Tensor[] {
  if (!inputs.length) throw new OpError(`op '${def.name}' needs at least one input tensor`);
  const ctx = inputs[0]!.ctx;
  const data = inputs.map((t) => t.data);
  const res = def.forward(ctx, data, attrs);
  const outs = Array.isArray(res.outputs) ? res.outputs : [res.outputs];
  const record = isGradEnabled() && !!def.backward && inputs.some((t) => t.requiresGrad);
  const saved = res.saved ?? [];
  if (!record) {
    for (const s of saved) if (!isShared(s, data, outs)) releaseRef(ctx, s.buffer);
    return outs.map((o) => makeOutput(ctx, o, null));
  }
  for (const s of saved) if (isShared(s, data, outs)) retain(s.buffer);
  const metas: InputMeta[] = inputs.map((t) => ({ shape: t.shape, dtype: t.dtype, requiresGrad: t.requiresGrad }));
  const node: Node = {
    name: def.name,
    inputs,
    nOutputs: outs.length,
    freed: false,
    backward: (grads) => def.backward!(ctx, grads, saved, metas, attrs),
    free() {
      if (this.freed) return;
      this.freed = true;
      for (const s of saved) releaseRef(ctx, s.buffer);
    },
  };
  return outs.map((o, i) => makeOutput(ctx, o, node, i));
}

function isShared(s: DeviceTensor, inputs: DeviceTensor[], outputs: DeviceTensor[]): boolean {
  return inputs.some((t) => t.buffer === s.buffer) || outputs.some((t) => t.buffer === s.buffer);
}
