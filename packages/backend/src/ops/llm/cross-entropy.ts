import ceWgsl from '../../../../../shaders/cross-entropy.wgsl';
import ceReduceWgsl from '../../../../../shaders/cross-entropy-reduce.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { empty, release, type DeviceTensor } from '../../tensor';
import {
  bindUnits,
  checkBindable,
  checkFloat,
  checkInt,
  checkOut,
  elemBytes,
  fmt,
  grid,
  llmKernel,
  maxWorkgroup,
  reduceCode,
  rowChunks,
  rowShape,
  vecFor,
  vecPrelude,
} from './common';

/** Options of {@link crossEntropy}. */
export interface CrossEntropyOptions {
  /** Targets equal to this are skipped (loss 0, zero gradient, not counted). Default -100. */
  ignoreIndex?: number;
  /** PyTorch `label_smoothing` in [0, 1]. Default 0. */
  labelSmoothing?: number;
  /** `'mean'` (default: over the non-ignored rows) or `'sum'`. */
  reduction?: 'mean' | 'sum';
  /** Factor on the gradient: dlogits = gradScale * d(loss)/d(logits) (the upstream gradient of the loss, a
   *  loss scale). Default 1. */
  gradScale?: number;
  /** Also write dlogits (default true). Without it the logits are read once. */
  computeGrad?: boolean;
  /** f32 [N, V] tensor for dlogits. */
  dlogitsOut?: DeviceTensor;
  /**
   * The divisor of the mean, an f32 [1] tensor (e.g. {@link crossEntropyCount} of a whole batch whose logits
   * are processed in row chunks); by default the count of this call's non-ignored targets is computed.
   */
  count?: DeviceTensor;
}

/** Outputs of {@link crossEntropy} (all f32). */
export interface CrossEntropyResult {
  /** [1]: the reduced loss. */
  loss: DeviceTensor;
  /** [N]: per-row loss (0 for ignored rows), PyTorch's `reduction='none'`. */
  rowLoss: DeviceTensor;
  /** [1]: the number of targets that are not `ignoreIndex` (the `count` option itself when given). */
  count: DeviceTensor;
  /** [N, V]: gradient of `loss` times `gradScale` (absent with `computeGrad: false`). */
  dlogits?: DeviceTensor;
}

/**
 * Cross-entropy with log-softmax over the vocabulary, fused with its gradient: PyTorch's
 * `F.cross_entropy(logits, targets, ignore_index, label_smoothing, reduction)` (no label shift). `logits`
 * [N, V] f32/f16/bf16, `targets` i32 [N]. Three dispatches, no read-back: the count of non-ignored targets
 * (one workgroup), the fused pass (one workgroup per row: logsumexp, row loss and dlogits =
 * (softmax - onehot) * gradScale / count written directly; rows up to 64 values per thread of 512 threads,
 * 32k f32 or 64k 16-bit logits, stay in registers, longer rows are read twice), and the mean (one workgroup,
 * fixed order). A non-ignored target outside
 * [0, V) makes its row loss, the mean and its gradient row NaN. Logits (or dlogits) larger than one storage
 * binding (e.g. 8k tokens x 128k vocabulary in f32, 4 GiB) are processed in row chunks, one fused dispatch per
 * chunk, all sharing the one count.
 */
export function crossEntropy(
  ctx: Context,
  logits: DeviceTensor,
  targets: DeviceTensor,
  opts: CrossEntropyOptions = {},
): CrossEntropyResult {
  const op = 'crossEntropy';
  checkFloat(logits, `${op}: logits`);
  checkInt(targets, `${op}: targets`);
  if (logits.shape.length !== 2) throw new ShapeError(`${op}: logits must be [N, V], got ${fmt(logits.shape)}`);
  const [n, v] = logits.shape as [number, number];
  if (targets.shape.length !== 1 || targets.shape[0] !== n)
    throw new ShapeError(`${op}: targets ${fmt(targets.shape)} must be [${n}] for logits ${fmt(logits.shape)}`);
  if (v < 1) throw new ShapeError(`${op}: logits ${fmt(logits.shape)} has no classes`);
  const eps = opts.labelSmoothing ?? 0;
  if (!(eps >= 0 && eps <= 1)) throw new ShapeError(`${op}: labelSmoothing ${eps} is outside [0, 1]`);
  const ignore = opts.ignoreIndex ?? -100;
  const mean = (opts.reduction ?? 'mean') === 'mean' ? 1 : 0;
  const grad = opts.computeGrad ?? true;
  let dlogits: DeviceTensor | undefined;
  if (grad) {
    dlogits = opts.dlogitsOut ?? empty(ctx, [n, v]);
    if (opts.dlogitsOut) checkOut(opts.dlogitsOut, [n, v], `${op}: dlogitsOut`);
  }
  checkBindable(ctx, op, [targets, 'targets']);
  if (opts.count && (opts.count.dtype !== 'f32' || opts.count.shape.length !== 1 || opts.count.shape[0] !== 1))
    throw new ShapeError(`${op}: count must be f32[1], got ${opts.count.dtype}${fmt(opts.count.shape)}`);
  const rowLoss = empty(ctx, [n]);
  const loss = empty(ctx, [1]);
  const count = opts.count ?? empty(ctx, [1]);
  const reduce = reduceKernels(ctx);
  const reduceBufs = [targets.buffer, rowLoss.buffer, count.buffer, loss.buffer];
  if (!opts.count) ctx.dispatch(reduce.count, reduceBufs, 1, [n, ignore, mean]);
  const red = reduceCode(ctx);

  if (n > 0) {
    const vec = vecFor(v, [logits.dtype]);
    const { wg, nv } = rowShape(ctx, v / vec, 'ce');
    const key = `ce:wg${wg}:nv${nv}:v${vec}:${red.tag}:${grad ? 'g' : 'n'}:${logits.dtype}`;
    const k = llmKernel(ctx, key, () => ({
      code:
        vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1), GRAD: grad }, vec, [['logits', logits.dtype]], grad ? ['dl'] : []) +
        (grad ? '' : 'fn st_dl(e: u32, v: V) { }\n') +
        (vec === 1
          ? 'fn onehot(e: u32, tg: u32) -> V { return select(0.0, 1.0, e == tg); }\n'
          : 'fn onehot(e: u32, tg: u32) -> V { return vec2f(select(0.0, 1.0, e == tg), select(0.0, 1.0, e + 1u == tg)); }\n') +
        red.code +
        ceWgsl,
      enables: red.enables,
      bindings: [
        { name: 'logits', access: 'read', dtype: logits.dtype },
        { name: 'tgt', access: 'read', dtype: 'i32' },
        { name: 'cnt', access: 'read', dtype: 'f32' },
        { name: 'rowloss', access: 'rw', dtype: 'f32' },
        ...(grad ? [{ name: 'dl', access: 'rw' as const, dtype: 'f32' as const }] : []),
      ],
      params: ['u32:rows', 'u32:V', 'i32:ignoreIndex', 'f32:gradScale', 'f32:smoothing', 'u32:mean'],
    }));
    const lRow = v * elemBytes(logits);
    const plan = rowChunks(ctx, op, n, [
      [logits, lRow, 'logits'],
      [targets, 4, 'targets'],
      [rowLoss, 4, 'rowLoss'],
      ...(dlogits ? [[dlogits, v * 4, 'dlogits'] as const] : []),
    ]);
    for (const [r0, r1] of plan.ranges) {
      const bufs = [
        bindUnits(plan, logits, lRow, r0, r1),
        bindUnits(plan, targets, 4, r0, r1),
        count.buffer,
        bindUnits(plan, rowLoss, 4, r0, r1),
        ...(dlogits ? [bindUnits(plan, dlogits, v * 4, r0, r1)] : []),
      ];
      ctx.dispatch(k, bufs, grid(r1 - r0), [r1 - r0, v, ignore, opts.gradScale ?? 1, eps, mean]);
    }
  }
  ctx.dispatch(reduce.finish, reduceBufs, 1, [n, ignore, mean]);
  return { loss, rowLoss, count, dlogits };
}

function reduceKernels(ctx: Context) {
  const rwg = Math.min(1024, maxWorkgroup(ctx));
  const red = reduceCode(ctx);
  const def = (entryPoint: string) => () => ({
    code: `const WG: u32 = ${rwg}u;\n` + red.code + ceReduceWgsl,
    entryPoint,
    enables: red.enables,
    bindings: [
      { name: 'tgt', access: 'read' as const, dtype: 'i32' as const },
      { name: 'rowloss', access: 'read' as const, dtype: 'f32' as const },
      { name: 'cnt', access: 'rw' as const, dtype: 'f32' as const },
      { name: 'loss', access: 'rw' as const, dtype: 'f32' as const },
    ],
    params: ['u32:rows', 'i32:ignoreIndex', 'u32:mean'] as const,
  });
  return {
    count: llmKernel(ctx, `ce_count:wg${rwg}:${red.tag}`, def('count')),
    finish: llmKernel(ctx, `ce_finish:wg${rwg}:${red.tag}`, def('finish')),
  };
}

/**
 * The number of `targets` (i32 [N]) that are not `ignoreIndex`, as an f32 [1] tensor on the GPU (one
 * workgroup, no read-back): the divisor of the mean cross-entropy, to pass as `count` when a batch's logits
 * go through {@link crossEntropy} in row chunks.
 */
export function crossEntropyCount(ctx: Context, targets: DeviceTensor, opts: { ignoreIndex?: number } = {}): DeviceTensor {
  checkInt(targets, 'crossEntropyCount: targets');
  if (targets.shape.length !== 1) throw new ShapeError(`crossEntropyCount: targets must be [N], got ${fmt(targets.shape)}`);
  const count = empty(ctx, [1]);
  const unusedIn = empty(ctx, [1]);
  const unusedOut = empty(ctx, [1]);
  const bufs = [targets.buffer, unusedIn.buffer, count.buffer, unusedOut.buffer];
  ctx.dispatch(reduceKernels(ctx).count, bufs, 1, [targets.shape[0]!, opts.ignoreIndex ?? -100, 1]);
  release(ctx, unusedIn, unusedOut);
  return count;
}
