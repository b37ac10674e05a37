import { accumulate, cast, numel, ShapeError, upload, type Context, type DeviceTensor } from '@rusty/backend';
import type { Node } from './node';
import { releaseRef } from './storage';
import { AutogradError, setBackwardRunner, Tensor } from './tensor';

/** Nodes reachable from `root`, inputs before the nodes that consumed them. */
function topoOrder(root: Node): Node[] {
  const order: Node[] = [];
  const seen = new Set<Node>();
  const stack: [Node, number][] = [[root, 0]];
  seen.add(root);
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const [node, i] = top;
    if (i < node.inputs.length) {
      top[1]++;
      const child = node.inputs[i]!.node;
      if (child && !seen.has(child)) {
        seen.add(child);
        stack.push([child, 0]);
      }
    } else {
      stack.pop();
      order.push(node);
    }
  }
  return order;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Add an owned gradient into a leaf's `.grad` (reusing the leaf's gradient buffer across steps). */
function accumulateLeaf(ctx: Context, leaf: Tensor, g: DeviceTensor): void {
  if (!sameShape(g.shape, leaf.shape) && numel(g.shape) !== leaf.size)
    throw new ShapeError(`gradient [${g.shape.join(', ')}] does not match leaf [${leaf.shape.join(', ')}]`);
  const { grad, fresh } = leaf.gradSlot();
  if (!grad) {
    g = asF32(ctx, g);
    const data = sameShape(g.shape, leaf.shape) ? g : { ...g, shape: [...leaf.shape] };
    leaf.grad = new Tensor(ctx, data, false, null, 0, false);
    return;
  }
  // overwrite a stale gradient (after zeroGrad) or add to a live one (accumulate reads a 16-bit g exactly): the
  // gradient keeps one buffer across steps, so with the pool handing buffers out by id every step reuses the same
  // buffers and bind groups
  accumulate(ctx, grad.data, g, 1, fresh ? 0 : 1);
  leaf.markGradWritten();
  releaseRef(ctx, g.buffer);
}

/**
 * Backpropagate from `root` with output gradient `grad` (ones for a one-element root). Gradients of nodes are
 * summed, leaves that require grad accumulate into `.grad`, and every node's saved tensors are released as
 * soon as its backward has run.
 */
export function backward(root: Tensor, grad?: Tensor): void {
  const ctx = root.ctx;
  if (!root.requiresGrad) throw new AutogradError('backward() on a tensor that does not require grad');
  if (grad && !sameShape(grad.shape, root.shape))
    throw new ShapeError(`backward: gradient [${grad.shape.join(', ')}] does not match output [${root.shape.join(', ')}]`);
  if (!grad && root.size !== 1)
    throw new ShapeError(`backward() without a gradient needs a one-element output, got [${root.shape.join(', ')}]`);
  const g0: DeviceTensor = grad ? upcopy(ctx, grad) : upload(ctx, new Float32Array(root.size).fill(1), root.shape);
  if (!root.node) {
    accumulateLeaf(ctx, root, g0);
    return;
  }
  if (root.node.freed)
    throw new AutogradError(
      'backward() through a graph that was already freed: a second backward over the same graph needs the forward run again',
    );
  backwardFrom(ctx, root.node, root.outputIndex, g0);
}

/**
 * {@link backward} from output `outputIndex` of `rootNode` with the gradient `g0` (f32, the output's shape), which
 * this takes over (one reference, released once used): no copy of it, and the output tensor itself need not be
 * alive (`checkpoint` drops its recomputed output before backpropagating through it).
 */
export function backwardFrom(ctx: Context, rootNode: Node, outputIndex: number, g0: DeviceTensor): void {
  const order = topoOrder(rootNode);
  const grads = new Map<Node, (DeviceTensor | null)[]>();
  grads.set(rootNode, Array.from({ length: rootNode.nOutputs }, (_, i) => (i === outputIndex ? g0 : null)));
  for (let n = order.length - 1; n >= 0; n--) {
    const node = order[n]!;
    const gs = grads.get(node);
    grads.delete(node);
    if (!gs || gs.every((g) => g === null)) {
      node.free();
      continue;
    }
    if (node.freed) throw new AutogradError(`backward() through the freed graph of '${node.name}'`);
    const inGrads = node.backward(gs);
    for (const g of gs) if (g) releaseRef(ctx, g.buffer);
    node.free();
    node.inputs.forEach((input, i) => {
      const g = inGrads[i];
      if (!g) return;
      if (!input.requiresGrad) {
        releaseRef(ctx, g.buffer);
        return;
      }
      if (input.node) {
        let slot = grads.get(input.node);
        if (!slot) grads.set(input.node, (slot = Array(input.node.nOutputs).fill(null)));
        const prev = slot[input.outputIndex];
        if (prev) {
          // two gradients meet: their sum in f32 (a 16-bit one was written for a single reader that rounds it)
          const sum = (slot[input.outputIndex] = asF32(ctx, prev));
          accumulate(ctx, sum, g);
          releaseRef(ctx, g.buffer);
        } else slot[input.outputIndex] = g;
      } else accumulateLeaf(ctx, input, g);
    });
  }
}

/** An owned gradient in f32: `g` (f32), or an exact f32 copy of a 16-bit one (an op may write the gradient of an
 *  input in 16 bits where that input's one reader rounds it so anyway: the gated activations for an f16
 *  projection), which takes over g's reference. Sums and leaves' `.grad` stay f32. */
function asF32(ctx: Context, g: DeviceTensor): DeviceTensor {
  if (g.dtype === 'f32') return g;
  const out = cast(ctx, g, 'f32');
  releaseRef(ctx, g.buffer);
  return out;
}

/** An owned f32 copy of a gradient tensor's storage. */
function upcopy(ctx: Context, t: Tensor): DeviceTensor {
  const out = { ...t.data, buffer: ctx.alloc(numel(t.shape) * 4), dtype: 'f32' as const, shape: [...t.shape] };
  accumulate(ctx, out, t.data, 1, 0);
  return out;
}

setBackwardRunner(backward);
