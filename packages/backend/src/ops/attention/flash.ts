/**
 * Fused causal scaled-dot-product attention (FlashAttention-2 style), forward and backward, f32 math.
 *
 * Kernels (shaders/attention-*.wgsl, specialised per head dim and tile shape): the forward keeps BR query
 * rows per workgroup and streams K/V tiles through workgroup memory with an online softmax; the backward
 * computes delta = rowsum(dO * O), then one pass over K/V blocks (dK, dV, GQA groups summed in the loop) and
 * one over Q blocks (dQ). Each thread owns a 4 x c block of scores in registers; global loads of the next
 * tile are issued one compute phase ahead (software pipelining). Tiles that the causal mask or the sliding
 * window hide entirely are skipped (shaders/attention-mask.wgsl holds the visibility rule all kernels share).
 * Measured on an H200 (Dawn/Vulkan) at B=8, H=12, T=S=1024, D=64, causal: forward 0.76 ms, backward 2.82 ms,
 * together 3.57 ms; PyTorch eager fp32 (matmul, mask, softmax, matmul; TF32 off) 4.28 ms there.
 * f16 q, k, v on an adapter with subgroup matrices take the tensor-core kernels of ./flash-tc.ts instead
 * (chosen per call by {@link flashAttentionTcPath}; `tensorCores: false` keeps these).
 */
import fwdWgsl from '../../../../../shaders/attention-fwd.wgsl';
import preWgsl from '../../../../../shaders/attention-bwd-pre.wgsl';
import dkdvWgsl from '../../../../../shaders/attention-bwd-dkdv.wgsl';
import dqWgsl from '../../../../../shaders/attention-bwd-dq.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { grid1d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import type { KernelDef, ParamSpec } from '../../kernel';
import { empty, type DeviceTensor } from '../../tensor';
import {
  attnDims,
  checkFits,
  checkFloat,
  checkOut,
  dummyBuffer,
  fmt,
  resolveScale,
  resolveSoftcap,
  resolveWindow,
  rowLayout,
  withMaskRule,
  specialize,
  type AttentionOptions,
  type AttnDims,
} from './common';
import { attentionTiles, checkTiles, tileShape, type AttentionTile, type AttentionTiles } from './tiles';
import { attentionTcPath, encodeTcAttn, tcAttnDsBytes, tcAttnKernel, tcAttnTileProblem, type TcAttnKind, type TcAttnPath, type TcAttnTiles } from './flash-tc';

const LOG2E = Math.LOG2E;

/** Options of {@link flashAttention}. */
export interface FlashAttentionOptions extends AttentionOptions {
  /** Output `f32 [B, T, Hq, D]` to write into. */
  out?: DeviceTensor;
  /** Logsumexp output `f32 [B, Hq, T]` to write into. */
  lse?: DeviceTensor;
  /** Override the tile sizes (tuning; default {@link attentionTiles}). */
  tiles?: AttentionTiles;
  /** Tensor cores (see ops/attention/flash-tc.ts): undefined = use them for f16 q, k, v where the adapter has
   *  subgroup matrices; false = never; true = require them (a ShapeError says why they cannot run). */
  tensorCores?: boolean;
  /** Override tensor-core tiles (tuning and tests; the kernels not named keep the tiles chosen per device). */
  tcTiles?: Partial<TcAttnTiles>;
}

/** Options of {@link flashAttentionBackward}. */
export interface FlashAttentionBackwardOptions extends AttentionOptions {
  /** Gradient outputs to write into: dq `f32 [B, T, Hq, D]`, dk and dv `f32 [B, S, Hkv, D]`. */
  dq?: DeviceTensor;
  dk?: DeviceTensor;
  dv?: DeviceTensor;
  /** Override the tile sizes (tuning; default {@link attentionTiles}). */
  tiles?: AttentionTiles;
  /** As {@link FlashAttentionOptions.tensorCores} (the path needs f16 q, k, v; dOut may be any float dtype). */
  tensorCores?: boolean;
  /** As {@link FlashAttentionOptions.tcTiles}. */
  tcTiles?: Partial<TcAttnTiles>;
  /**
   * On tensor cores, the most bytes the dK/dV pass may store dS in (f16 `[B, Hq, S, T]`, T rounded up to 8) so
   * that the dQ pass reads it instead of recomputing S and dP: two products fewer, same f16 dS. Above it (or with
   * 0) the dQ pass recomputes. Default {@link ATTENTION_DS_BUDGET}; capped by the device's storage-binding size.
   */
  dsBudget?: number;
}

/** Default {@link FlashAttentionBackwardOptions.dsBudget}: 256 MiB (B 8, Hq 12, T = S = 1024 takes 192 MiB). */
export const ATTENTION_DS_BUDGET = 256 * 2 ** 20;

/** Result of {@link flashAttention}. */
export interface FlashAttentionResult {
  /** `f32 [B, T, Hq, D]`. */
  out: DeviceTensor;
  /** Natural-log logsumexp of each row's scaled, masked scores, `f32 [B, Hq, T]` (-inf for a row with no
   *  visible key); the backward needs it. */
  lse: DeviceTensor;
}

/** Result of {@link flashAttentionBackward}: f32 gradients shaped like q, k and v. */
export interface FlashAttentionGrads {
  dq: DeviceTensor;
  dk: DeviceTensor;
  dv: DeviceTensor;
}

/** A portable attention shader specialised for its head dim and tile (built once per kernel-cache key). */
const code = (src: string, consts: Record<string, number>): string => specialize(withMaskRule(src), consts);

function fwdConsts(D: number, [br, bc, cn = 4]: AttentionTile): Record<string, number> {
  const { DV, DS } = rowLayout(D);
  const { TC, DC, NT } = tileShape(D, br, bc, cn);
  const TR = br / 4;
  return { D, DV, DS, BR: br, BC: bc, TR, TC, CN: cn, DC, PS: TR + 1, NT, NKL: Math.ceil((bc * DV) / NT), NKM: Math.ceil(bc / NT) };
}

function dkdvConsts(D: number, [bc, br, cq = 4]: AttentionTile): Record<string, number> {
  const { DV, DS } = rowLayout(D);
  const { TC: TQ, DC, NT } = tileShape(D, bc, br, cq);
  const TK = bc / 4;
  return { D, DV, DS, BC: bc, BR: br, TK, TQ, CQ: cq, DC, PS: TK + 1, NT, NQL: Math.ceil((br * DV) / NT), NQM: Math.ceil(br / NT) };
}

function dqConsts(D: number, [br, bc, ck = 4]: AttentionTile): Record<string, number> {
  const { DV, DS } = rowLayout(D);
  const { TC, DC, NT } = tileShape(D, br, bc, ck);
  const TR = br / 4;
  return { D, DV, DS, BR: br, BC: bc, TR, TC, CK: ck, DC, PS: TR + 1, NT, NKL: Math.ceil((bc * DV) / NT), NKM: Math.ceil(bc / NT) };
}

const tileName = (t: AttentionTile) => `${t[0]}x${t[1]}c${t[2] ?? 4}`;

interface Resolved {
  dims: AttnDims;
  causal: boolean;
  scale: number;
  qOffset: number;
  window: number;
  cap: { qscale: number; capin: number; capmul: number };
  tiles: AttentionTiles;
}

/**
 * The tensor-core path for these inputs, or null for the portable kernels: f16 q, k and v on an adapter with a
 * plan (see {@link attentionTcPath}), unless `tensorCores: false`. `tensorCores: true` where it cannot run throws
 * a ShapeError with the reason.
 */
export function flashAttentionTcPath(
  ctx: Context,
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  opts: { tensorCores?: boolean; tcTiles?: Partial<TcAttnTiles> } = {},
): Exclude<TcAttnPath, { reason: string }> | null {
  if (opts.tensorCores !== undefined && typeof opts.tensorCores !== 'boolean')
    throw new ConfigError(`attention: tensorCores must be true, false or undefined, got ${String(opts.tensorCores)}`);
  if (opts.tensorCores === false) return null;
  const D = q.shape[3] ?? 0;
  let why: string | null = null;
  let path: TcAttnPath | null = null;
  if (q.dtype !== 'f16' || k.dtype !== 'f16' || v.dtype !== 'f16') why = `q, k and v must be f16 (got ${fmt(q)}, ${fmt(k)}, ${fmt(v)})`;
  else {
    path = attentionTcPath(ctx, D);
    if ('reason' in path) why = path.reason;
  }
  if (why !== null || !path || 'reason' in path) {
    if (opts.tensorCores) throw new ShapeError(`attention: tensorCores: true, but ${why}`);
    return null;
  }
  if (!opts.tcTiles) return path;
  const tiles = { ...path.tiles };
  for (const kind of Object.keys(opts.tcTiles) as TcAttnKind[]) {
    const t = opts.tcTiles[kind];
    if (!(kind in tiles)) throw new ConfigError(`attention tcTiles: unknown kernel '${kind}' (fwd, dq, dkdv, dqds)`);
    if (t === undefined) continue;
    const p = tcAttnTileProblem(kind, path.plan, ctx.info.limits, D, t);
    if (p) throw new ConfigError(`attention tcTiles.${kind} ${JSON.stringify(t)}: ${p}`);
    tiles[kind] = t;
  }
  return { plan: path.plan, tiles };
}

const notReady = (kind: string) =>
  new ShapeError(`attention: tensorCores: true, but the tensor-core ${kind} kernel is not ready (await attentionTcReady(ctx); failures: attentionTcFailures(ctx))`);

function resolve(ctx: Context, q: DeviceTensor, k: DeviceTensor, v: DeviceTensor, opts: AttentionOptions & { tiles?: AttentionTiles }): Resolved {
  const dims = attnDims(ctx, q, k, v, opts.keyMask);
  const causal = opts.causal ?? true;
  const qOffset = opts.qOffset ?? dims.S - dims.T;
  if (!Number.isInteger(qOffset) || Math.abs(qOffset) > 2 ** 30)
    throw new ConfigError(`attention: qOffset must be an integer, got ${opts.qOffset}`);
  const tiles = opts.tiles ?? attentionTiles(ctx, dims.D);
  if (opts.tiles) checkTiles(ctx, dims.D, opts.tiles);
  // A window of at least the last query's position + 1 hides nothing: 0 then (this also keeps the kernels'
  // i32 range arithmetic far from overflow).
  const w = resolveWindow('attention', opts.slidingWindow, causal);
  const window = w < qOffset + dims.T ? w : 0;
  const scale = resolveScale(dims.D, opts.scale);
  return { dims, causal, scale, qOffset, window, cap: resolveSoftcap('attention', scale, opts.softcap), tiles };
}

const FWD_PARAMS: ParamSpec[] = [
  'u32:T',
  'u32:S',
  'u32:Hq',
  'u32:Hkv',
  'u32:G',
  'i32:qOffset',
  'u32:causal',
  'u32:window',
  'u32:hasMask',
  'f32:scale2',
  'f32:capmul',
];
const BWD_PARAMS: ParamSpec[] = [
  'u32:T',
  'u32:S',
  'u32:Hq',
  'u32:Hkv',
  'u32:G',
  'i32:qOffset',
  'u32:causal',
  'u32:window',
  'u32:hasMask',
  'f32:scale',
  'f32:scale2',
  'f32:capin',
  'f32:capmul',
];

/**
 * Fused causal scaled-dot-product attention, forward (FlashAttention style: K/V tiles staged in workgroup
 * memory, online softmax; the [T, S] score matrix is never materialised).
 *
 * `q` is `[B, T, Hq, D]`, `k` and `v` are `[B, S, Hkv, D]` (f32, f16 or bf16 storage, f32 math), with `Hkv`
 * dividing `Hq` (grouped-query attention: query head h reads kv head `h / (Hq / Hkv)`), `D <= 256`.
 * Returns `out = softmax(cap(scale * q k^T) + mask) v` as `f32 [B, T, Hq, D]` (`cap` the optional logit
 * soft-capping) and the row logsumexp
 * `lse` `f32 [B, Hq, T]` that {@link flashAttentionBackward} takes. See {@link AttentionOptions} for the
 * causal alignment (`qOffset`) and the key padding mask; a row with no visible key outputs zeros.
 * @throws ShapeError when shapes or dtypes do not fit.
 */
export function flashAttention(
  ctx: Context,
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  opts: FlashAttentionOptions = {},
): FlashAttentionResult {
  const r = resolve(ctx, q, k, v, opts);
  const { B, T, S, Hq, Hkv, G, D } = r.dims;
  checkOut('out', opts.out, [B, T, Hq, D]);
  checkOut('lse', opts.lse, [B, Hq, T]);
  const out = opts.out ?? empty(ctx, [B, T, Hq, D]);
  const lse = opts.lse ?? empty(ctx, [B, Hq, T]);
  if (B * T * Hq === 0) return { out, lse };
  const mask = opts.keyMask;
  const tc = flashAttentionTcPath(ctx, q, k, v, opts);
  if (tc) {
    const ok = encodeTcAttn(ctx, 'fwd', tc, r.dims, mask?.dtype ?? 'u32', 'f16',
      [q.buffer, k.buffer, v.buffer, mask?.buffer ?? dummyBuffer(ctx), out.buffer, lse.buffer],
      [T, S, Hq, Hkv, G, r.qOffset, r.causal ? 1 : 0, r.window, mask ? 1 : 0, r.cap.qscale, r.cap.capmul]);
    if (ok) return { out, lse };
    if (opts.tensorCores) throw notReady('forward');
  }
  const tf = r.tiles.fwd;
  const br = tf[0];
  const maskDt = mask?.dtype ?? 'u32';
  const fwd = cachedKernel(ctx, `attn:fwd:${D}:${tileName(tf)}:${q.dtype}:${k.dtype}:${v.dtype}:${maskDt}`, (): KernelDef => ({
    name: `attention_fwd_d${D}_${tileName(tf)}`,
    code: code(fwdWgsl, fwdConsts(D, tf)),
    bindings: [
      { name: 'q', access: 'read', dtype: q.dtype },
      { name: 'k', access: 'read', dtype: k.dtype },
      { name: 'v', access: 'read', dtype: v.dtype },
      { name: 'mask', access: 'read', dtype: maskDt },
      { name: 'o', access: 'rw', dtype: 'f32' },
      { name: 'lse', access: 'rw', dtype: 'f32' },
    ],
    params: FWD_PARAMS,
  }));
  ctx.dispatch(
    fwd,
    [q.buffer, k.buffer, v.buffer, mask?.buffer ?? dummyBuffer(ctx), out.buffer, lse.buffer],
    [Math.ceil(T / br), Hq, B],
    [T, S, Hq, Hkv, G, r.qOffset, r.causal ? 1 : 0, r.window, mask ? 1 : 0, r.cap.qscale, r.cap.capmul],
  );
  return { out, lse };
}

/**
 * Backward of {@link flashAttention} (FlashAttention-2): given `dOut` (`[B, T, Hq, D]`, any float dtype), the
 * forward's inputs, its output `out` and logsumexp `lse`, returns f32 `dq`, `dk`, `dv`. Three dispatches:
 * `delta = rowsum(dOut * out)`, one pass over K/V blocks (dK, dV; with grouped-query attention each kv head
 * sums over its q heads inside the loop) and one over Q blocks (dQ). On tensor cores, where dS fits
 * `dsBudget`: delta, dK/dV storing dS (f16), and dQ = dS K reading it (no second S and dP); else two: the dQ pass
 * computes delta and runs first. Deterministic: no atomics, each output
 * element written once by one thread with a fixed summation order, so repeated runs are bit-identical.
 * Pass the same options (causal, scale, qOffset, keyMask, slidingWindow, softcap) as to the forward.
 * @throws ShapeError when shapes or dtypes do not fit.
 */
export function flashAttentionBackward(
  ctx: Context,
  dOut: DeviceTensor,
  q: DeviceTensor,
  k: DeviceTensor,
  v: DeviceTensor,
  out: DeviceTensor,
  lse: DeviceTensor,
  opts: FlashAttentionBackwardOptions = {},
): FlashAttentionGrads {
  const r = resolve(ctx, q, k, v, opts);
  const { B, T, S, Hq, Hkv, G, D } = r.dims;
  for (const [w, t] of [['dOut', dOut], ['out', out]] as const) {
    checkFloat(w, t);
    if (t.shape.length !== 4 || t.shape.some((d, i) => d !== q.shape[i]))
      throw new ShapeError(`attention backward: ${w} ${fmt(t)} must have q's shape [${q.shape.join(', ')}]`);
    checkFits(ctx, w, t);
  }
  if (lse.dtype !== 'f32' || lse.shape.length !== 3 || lse.shape[0] !== B || lse.shape[1] !== Hq || lse.shape[2] !== T)
    throw new ShapeError(`attention backward: lse ${fmt(lse)} must be f32[${B}, ${Hq}, ${T}]`);
  checkOut('dq', opts.dq, q.shape);
  checkOut('dk', opts.dk, k.shape);
  checkOut('dv', opts.dv, v.shape);
  const dq = opts.dq ?? empty(ctx, q.shape);
  const dk = opts.dk ?? empty(ctx, k.shape);
  const dv = opts.dv ?? empty(ctx, v.shape);
  if (B * S * Hkv === 0 && B * T * Hq === 0) return { dq, dk, dv };
  const mask = opts.keyMask;
  const maskBuf = mask?.buffer ?? dummyBuffer(ctx);
  const maskDt = mask?.dtype ?? 'u32';
  const { capin, capmul } = r.cap;
  const params = [T, S, Hq, Hkv, G, r.qOffset, r.causal ? 1 : 0, r.window, mask ? 1 : 0, r.scale, r.scale * LOG2E, capin, capmul];

  const delta = empty(ctx, [B, Hq, T]);
  const rows = B * T * Hq;
  const tc = flashAttentionTcPath(ctx, q, k, v, opts);
  // On tensor cores with dS within the budget: the delta pass, dK/dV storing dS, dQ = dS K. Else the tensor-core dQ
  // pass computes delta itself (and writes it for dK/dV): it runs first; else the delta pass, dK/dV, then the
  // portable dQ.
  const budget = opts.dsBudget ?? ATTENTION_DS_BUDGET;
  if (typeof budget !== 'number' || !(budget >= 0)) throw new ConfigError(`attention backward: dsBudget must be a number of bytes >= 0, got ${String(opts.dsBudget)}`);
  const dsBytes = tc && rows > 0 && B * S * Hkv > 0 ? tcAttnDsBytes(r.dims) : Infinity;
  let ds: DeviceTensor | null = null;
  if (tc && dsBytes <= Math.min(budget, ctx.maxBinding)) {
    // both kernels requested (their checks start) before either is used: dS is only written if dQ can read it
    const kd = tcAttnKernel(ctx, 'dkdv', tc.plan, D, tc.tiles.dkdv, maskDt, dOut.dtype, 'f32', true);
    const kq = tcAttnKernel(ctx, 'dqds', tc.plan, D, tc.tiles.dqds, maskDt, 'f16');
    if (kd && kq) ds = empty(ctx, [dsBytes / 2], 'f16');
    else if (opts.tensorCores) throw notReady('dK/dV (dS stored) and dQ-from-dS');
  }
  let dqDone = false;
  if (rows > 0 && tc && !ds) {
    dqDone = encodeTcAttn(ctx, 'dq', tc, r.dims, maskDt, dOut.dtype,
      [q.buffer, k.buffer, v.buffer, dOut.buffer, lse.buffer, maskBuf, out.buffer, delta.buffer, dq.buffer], params, out.dtype);
    if (!dqDone && opts.tensorCores) throw notReady('dq');
  }
  if (rows > 0 && !dqDone) {
    const g = grid1d(rows * 16, 256);
    const pre = cachedKernel(ctx, `attn:bwd-pre:${dOut.dtype}:${out.dtype}`, () => ({
      name: 'attention_bwd_pre',
      code: preWgsl,
      bindings: [
        { name: 'dout', access: 'read', dtype: dOut.dtype },
        { name: 'out', access: 'read', dtype: out.dtype },
        { name: 'delta', access: 'rw', dtype: 'f32' },
      ],
      params: ['u32:rows', 'u32:T', 'u32:Hq', 'u32:D', 'u32:row'],
    }));
    ctx.dispatch(pre, [dOut.buffer, out.buffer, delta.buffer], g.wg, [rows, T, Hq, D, g.row]);
  }

  const inputs = [
    { name: 'q', access: 'read', dtype: q.dtype },
    { name: 'k', access: 'read', dtype: k.dtype },
    { name: 'v', access: 'read', dtype: v.dtype },
    { name: 'dout', access: 'read', dtype: dOut.dtype },
    { name: 'lse', access: 'read', dtype: 'f32' },
    { name: 'delta', access: 'read', dtype: 'f32' },
    { name: 'mask', access: 'read', dtype: maskDt },
  ] as const;
  const inBufs = [q.buffer, k.buffer, v.buffer, dOut.buffer, lse.buffer, delta.buffer, maskBuf];
  const inKey = `${q.dtype}:${k.dtype}:${v.dtype}:${dOut.dtype}:${maskDt}`;
  const tcDkdv = (): boolean => {
    if (!tc) return false;
    if (ds) {
      encodeTcAttn(ctx, 'dkdv', tc, r.dims, maskDt, dOut.dtype, [...inBufs, dk.buffer, dv.buffer, ds.buffer], params, 'f32', true);
      encodeTcAttn(ctx, 'dqds', tc, r.dims, maskDt, 'f16', [k.buffer, ds.buffer, dq.buffer], params);
      dqDone = true;
      return true;
    }
    if (encodeTcAttn(ctx, 'dkdv', tc, r.dims, maskDt, dOut.dtype, [...inBufs, dk.buffer, dv.buffer], params)) return true;
    if (opts.tensorCores) throw notReady('dK/dV');
    return false;
  };

  if (B * S * Hkv > 0 && !tcDkdv()) {
    const tk = r.tiles.dkdv;
    const bc = tk[0];
    const kdkdv = cachedKernel(ctx, `attn:dkdv:${D}:${tileName(tk)}:${inKey}`, () => ({
      name: `attention_bwd_dkdv_d${D}_${tileName(tk)}`,
      code: code(dkdvWgsl, dkdvConsts(D, tk)),
      bindings: [...inputs, { name: 'dk_out', access: 'rw', dtype: 'f32' }, { name: 'dv_out', access: 'rw', dtype: 'f32' }],
      params: BWD_PARAMS,
    }));
    ctx.dispatch(kdkdv, [...inBufs, dk.buffer, dv.buffer], [Math.ceil(S / bc), Hkv, B], params);
  }
  if (rows > 0 && !dqDone) {
    const tq = r.tiles.dq;
    const br = tq[0];
    const kdq = cachedKernel(ctx, `attn:dq:${D}:${tileName(tq)}:${inKey}`, () => ({
      name: `attention_bwd_dq_d${D}_${tileName(tq)}`,
      code: code(dqWgsl, dqConsts(D, tq)),
      bindings: [...inputs, { name: 'dq_out', access: 'rw', dtype: 'f32' }],
      params: BWD_PARAMS,
    }));
    ctx.dispatch(kdq, [...inBufs, dq.buffer], [Math.ceil(T / br), Hq, B], params);
  }
  ctx.release(delta.buffer);
  if (ds) ctx.release(ds.buffer);
  return { dq, dk, dv };
}
