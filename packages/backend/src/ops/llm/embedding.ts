import embeddingWgsl from '../../../../../shaders/embedding.wgsl';
import unitLoopWgsl from '../../../../../shaders/unit-loop.wgsl';
import embeddingBwdWgsl from '../../../../../shaders/embedding-backward.wgsl';
import embeddingSortWgsl from '../../../../../shaders/embedding-sort.wgsl';
import type { Context } from '../../context';
import { ShapeError } from '../../errors';
import { empty, numel, type DeviceTensor } from '../../tensor';
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
  llmTuning,
  maxWorkgroup,
  pow2ceil,
  rowChunks,
  rowShape,
  sameShape,
  vecFor,
  vecPrelude,
} from './common';

const WG = 256;
const UPT = 4;

/** Bitonic sort blocks: as many (key, value) pairs as fit the workgroup memory, up to 4096 (tunable:
 *  `llmTuning.shapes.emb_sort.max`). */
function sortShape(ctx: Context): { wg: number; block: number } {
  const mem = ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const cap = llmTuning.shapes.emb_sort?.max ?? 4096;
  const block = Math.max(64, Math.min(cap, 2 ** Math.floor(Math.log2(mem / 8))));
  return { wg: Math.min(block / 2, maxWorkgroup(ctx)), block };
}

function checkWeight(op: string, w: DeviceTensor): [number, number] {
  checkFloat(w, `${op}: weight`);
  if (w.shape.length !== 2) throw new ShapeError(`${op}: weight must be [vocab, D], got ${fmt(w.shape)}`);
  return w.shape as [number, number];
}

/**
 * Embedding lookup: `out[..., :] = weight[ids[...], :]`. `ids` i32 of any shape, `weight` [vocab, D] in
 * f32/f16/bf16; returns f32 [...ids.shape, D]. An id outside [0, vocab) gives a row of zeros (the kernel
 * never reads out of bounds) and no gradient. Coalesced along D, 16-bit weights read a word (two values) per
 * load. A weight (or output) larger than one storage binding (a 128k x 4096 f32 table is 2 GiB) is bound in
 * row chunks: one dispatch per (weight chunk, output chunk).
 */
export function embedding(ctx: Context, ids: DeviceTensor, weight: DeviceTensor, opts: { out?: DeviceTensor } = {}): DeviceTensor {
  const op = 'embedding';
  checkInt(ids, `${op}: ids`);
  const [vocab, d] = checkWeight(op, weight);
  const shape = [...ids.shape, d];
  const out = opts.out ?? empty(ctx, shape);
  if (opts.out) checkOut(opts.out, shape, `${op}: out`);
  const n = numel(ids.shape);
  if (n === 0 || d === 0) return out;
  const wPlan = rowChunks(ctx, op, vocab, [[weight, d * elemBytes(weight), 'weight']]);
  const oPlan = rowChunks(ctx, op, n, [
    [out, d * 4, 'out'],
    [ids, 4, 'ids'],
  ]);
  const vec = vecFor(d, [weight.dtype]);
  const k = llmKernel(ctx, `embedding:v${vec}:${weight.dtype}`, () => ({
    code: vecPrelude({ WG, UPT }, vec, [['w', weight.dtype]], ['out']) + embeddingWgsl + unitLoopWgsl,
    bindings: [
      { name: 'ids', access: 'read', dtype: 'i32' },
      { name: 'w', access: 'read', dtype: weight.dtype },
      { name: 'out', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:units', 'u32:D', 'u32:du', 'u32:vocab', 'u32:v0', 'u32:vrows', 'u32:zero'],
  }));
  const wRow = d * elemBytes(weight);
  for (const [n0, n1] of oPlan.ranges) {
    const units = ((n1 - n0) * d) / vec;
    const idsB = bindUnits(oPlan, ids, 4, n0, n1);
    const outB = bindUnits(oPlan, out, d * 4, n0, n1);
    for (const [v0, v1] of wPlan.ranges) {
      const wB = bindUnits(wPlan, weight, wRow, v0, v1);
      const params = [units, d, d / vec, vocab, v0, v1 - v0, v0 === 0 ? 1 : 0];
      ctx.dispatch(k, [idsB, wB, outB], grid(Math.ceil(units / (WG * UPT))), params);
    }
  }
  return out;
}

/**
 * Backward of {@link embedding}: `dw[v, :] = sum of dy[n, :] over the positions n with ids[n] == v`, summed in
 * increasing n (deterministic, no atomics, no read-back). f32 [vocab, D]; every row is written (zeros for ids
 * that do not occur). `dy` is [...ids.shape, D] in f32/f16/bf16. `paddingIdx` (PyTorch's `padding_idx`, HF's
 * `pad_token_id`): that row gets no gradient.
 *
 * Steps: a bitonic sort of the (id, position) pairs on the GPU, O(N log^2 N) work: blocks of up to 4096
 * pairs sorted in workgroup memory (one dispatch), then for each doubling of the merge size past the block
 * one global pass per distance >= the block and one in-block pass (N = 8192: 3 dispatches; 65536: 15); a
 * binary search per vocabulary row for its run of positions, O(vocab log N); then one workgroup per
 * vocabulary row sums its run in position order, reading dy once (N*D) and writing dw once (vocab*D).
 * `dw` (or `dy`) larger than one storage binding is bound in row chunks: the sums run once per (dw chunk, dy
 * chunk), dy chunks in order adding to dw, so each sum is still taken in increasing n (same result).
 */
export function embeddingBackward(
  ctx: Context,
  ids: DeviceTensor,
  dy: DeviceTensor,
  vocab: number,
  opts: { out?: DeviceTensor; paddingIdx?: number | null } = {},
): DeviceTensor {
  const op = 'embeddingBackward';
  checkInt(ids, `${op}: ids`);
  checkFloat(dy, `${op}: dy`);
  if (dy.shape.length !== ids.shape.length + 1 || !sameShape(dy.shape.slice(0, -1), ids.shape))
    throw new ShapeError(`${op}: dy ${fmt(dy.shape)} must be [...ids.shape, D] for ids ${fmt(ids.shape)}`);
  if (!Number.isInteger(vocab) || vocab < 0) throw new ShapeError(`${op}: vocab ${vocab} must be a non-negative integer`);
  const d = dy.shape[dy.shape.length - 1]!;
  const dw = opts.out ?? empty(ctx, [vocab, d]);
  if (opts.out) checkOut(opts.out, [vocab, d], `${op}: out`);
  if (vocab === 0 || d === 0) return dw;
  const n = numel(ids.shape);
  const dwPlan = rowChunks(ctx, op, vocab, [[dw, d * 4, 'dw']]);
  const dyPlan = rowChunks(ctx, op, n, [[dy, d * elemBytes(dy), 'dy']]);

  // 1. sort (id, position) pairs
  const { wg: swg, block: B } = sortShape(ctx);
  const P = Math.max(B, pow2ceil(n));
  const keys = empty(ctx, [P], 'u32');
  const vals = empty(ctx, [P], 'u32');
  const sortDef = (entryPoint: string) => () => ({
    code: `const WG: u32 = ${swg}u;\nconst B: u32 = ${B}u;\n` + embeddingSortWgsl,
    entryPoint,
    bindings: [
      { name: 'ids', access: 'read' as const, dtype: 'i32' as const },
      { name: 'keys', access: 'rw' as const, dtype: 'u32' as const },
      { name: 'vals', access: 'rw' as const, dtype: 'u32' as const },
    ],
    params: ['u32:n', 'u32:P', 'u32:vocab', 'u32:k', 'u32:j', 'u32:pad'] as const,
  });
  const sortBufs = [ids.buffer, keys.buffer, vals.buffer];
  const tagS = `wg${swg}:b${B}`;
  const kLocal = llmKernel(ctx, `emb_sort_local:${tagS}`, sortDef('sort_local'));
  const kMergeL = llmKernel(ctx, `emb_merge_local:${tagS}`, sortDef('merge_local'));
  const kMergeG = llmKernel(ctx, `emb_merge_global:${tagS}`, sortDef('merge_global'));
  const pi = opts.paddingIdx;
  if (pi !== undefined && pi !== null && !(Number.isInteger(pi) && pi >= 0 && pi < vocab))
    throw new ShapeError(`${op}: paddingIdx ${pi} must be an id of the vocabulary (0..${vocab - 1})`);
  const pad = pi ?? 0xffffffff;
  ctx.dispatch(kLocal, sortBufs, grid(P / B), [n, P, vocab, 0, 0, pad]);
  for (let k = 2 * B; k <= P; k *= 2) {
    for (let j = k / 2; j >= B; j /= 2) ctx.dispatch(kMergeG, sortBufs, grid(Math.ceil(P / 2 / swg)), [n, P, vocab, k, j, pad]);
    ctx.dispatch(kMergeL, sortBufs, grid(P / B), [n, P, vocab, k, 0, pad]);
  }

  // 2. run offsets per vocabulary row, 3. sums
  const offs = empty(ctx, [vocab + 1], 'u32');
  checkBindable(ctx, op, [keys, 'sort keys'], [offs, 'row offsets']);
  const vec = vecFor(d, [dy.dtype]);
  const { wg, nv } = rowShape(ctx, d / vec, 'emb_bwd');
  const bwdDef = (entryPoint: string) => () => ({
    code:
      vecPrelude({ WG: wg, NV: nv, NC: Math.max(nv, 1) }, vec, [['dy', dy.dtype], ['dw', 'rw']], ['dw']) + embeddingBwdWgsl,
    entryPoint,
    bindings: [
      { name: 'keys', access: 'read' as const, dtype: 'u32' as const },
      { name: 'vals', access: 'read' as const, dtype: 'u32' as const },
      { name: 'dy', access: 'read' as const, dtype: dy.dtype },
      { name: 'offs', access: 'rw' as const, dtype: 'u32' as const },
      { name: 'dw', access: 'rw' as const, dtype: 'f32' as const },
    ],
    params: ['u32:n', 'u32:vocab', 'u32:D', 'u32:v0', 'u32:vrows', 'u32:n0', 'u32:nrows', 'u32:acc'] as const,
  });
  const tag = `wg${wg}:nv${nv}:v${vec}:${dy.dtype}`;
  const kOff = llmKernel(ctx, `emb_offsets:${tag}`, bwdDef('offsets'));
  const kAcc = llmKernel(ctx, `emb_accum:${tag}`, bwdDef('accum'));
  const dyRow = d * elemBytes(dy);
  const [dy0, dy1] = dyPlan.ranges[0]!;
  const [dw0, dw1] = dwPlan.ranges[0]!;
  const dyB0 = bindUnits(dyPlan, dy, dyRow, dy0, dy1);
  const bufs0 = [keys.buffer, vals.buffer, dyB0, offs.buffer, bindUnits(dwPlan, dw, d * 4, dw0, dw1)];
  ctx.dispatch(kOff, bufs0, grid(Math.ceil((vocab + 1) / wg)), [n, vocab, d, 0, 0, 0, 0, 0]);
  for (const [v0, v1] of dwPlan.ranges) {
    const dwB = bindUnits(dwPlan, dw, d * 4, v0, v1);
    // no positions: one pass writes the zero rows
    const dyRanges = n > 0 ? dyPlan.ranges : [[0, 0] as [number, number]];
    dyRanges.forEach(([n0, n1], i) => {
      const dyB = n > 0 ? bindUnits(dyPlan, dy, dyRow, n0, n1) : dy.buffer;
      const params = [n, vocab, d, v0, v1 - v0, n0, n1 - n0, i > 0 ? 1 : 0];
      ctx.dispatch(kAcc, [keys.buffer, vals.buffer, dyB, offs.buffer, dwB], grid(v1 - v0), params);
    });
  }
  ctx.release(keys.buffer);
  ctx.release(vals.buffer);
  ctx.release(offs.buffer);
  return dw;
}
