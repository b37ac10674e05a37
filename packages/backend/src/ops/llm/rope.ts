import ropeWgsl from '../../../../../shaders/rope.wgsl';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { ioBindings } from '../../kernel';
import { empty, numel, type DeviceTensor } from '../../tensor';
import { sameShape } from '../../checks';
import { copyRows } from '../copy-rows';
import { bindUnits, checkBindable, checkFloat, checkOut, elemBytes, fmt, grid, llmKernel, maxWorkgroup, pow2ceil, rowChunks } from './common';

/** Rope types whose inverse frequencies {@link ropeInvFreq} computes (HF `rope_type`). */
export type RopeType = 'default' | 'linear' | 'dynamic' | 'llama3';

/**
 * Settings for {@link ropeInvFreq}, in Rusty's names for HF's fields (`rope_theta`, `rope_scaling` /
 * `rope_parameters`, `head_dim`, `max_position_embeddings`).
 */
export interface RopeFreqConfig {
  /** HF `rope_type` (or the older `type`). Default `'default'`. */
  type?: RopeType;
  /** `rope_theta` (the base). */
  theta: number;
  /** `head_dim` (or hidden_size / num_attention_heads). */
  headDim: number;
  /** `partial_rotary_factor`: the rotary dimension is floor(headDim * factor). Default 1. */
  partialRotaryFactor?: number;
  /** linear, dynamic, llama3: the scaling factor. */
  factor?: number;
  /** llama3 */
  lowFreqFactor?: number;
  /** llama3 */
  highFreqFactor?: number;
  /** llama3: the pre-training context length (`original_max_position_embeddings`). */
  originalMaxPositionEmbeddings?: number;
  /** dynamic: `max_position_embeddings`. */
  maxPositionEmbeddings?: number;
  /** dynamic: the current sequence length (HF: max position id + 1); the base grows only when it exceeds
   *  `maxPositionEmbeddings`. Default `maxPositionEmbeddings` (HF's value at init). */
  seqLen?: number;
}

const f = Math.fround;

function need(c: RopeFreqConfig, k: keyof RopeFreqConfig): number {
  const v = c[k];
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new ConfigError(`ropeInvFreq: rope type '${c.type ?? 'default'}' needs a numeric '${k}', got ${String(v)}`);
  return v;
}

/** The rotary dimension (even) of a config: floor(headDim * partialRotaryFactor). */
export function ropeDim(c: RopeFreqConfig): number {
  const dim = Math.floor(c.headDim * (c.partialRotaryFactor ?? 1));
  if (!Number.isInteger(c.headDim) || c.headDim <= 0 || dim < 2 || dim % 2)
    throw new ConfigError(`rope: rotary dimension ${dim} (headDim ${c.headDim}) must be a positive even integer`);
  return dim;
}

/** HF's default inverse frequencies in float32 steps: 1 / (base ** (arange(0, dim, 2).float() / dim)). */
function defaultInvFreq(base: number, dim: number): Float32Array {
  const b = f(base);
  const out = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) out[i] = f(1 / f(b ** f((2 * i) / dim)));
  return out;
}

/**
 * The RoPE inverse frequencies [rotaryDim / 2] (f32), computed as HF transformers' `ROPE_INIT_FUNCTIONS`
 * do, rounding to float32 where they do, for rope types:
 * - `default`: `1 / theta^(2i/dim)`;
 * - `linear`: default / factor;
 * - `dynamic` (NTK): base = theta * ((factor * L / maxPos) - (factor - 1))^(dim / (dim - 2)) with
 *   L = max(seqLen, maxPositionEmbeddings), then default with that base;
 * - `llama3`: wavelengths 2*pi/f longer than original / lowFreqFactor are divided by factor, shorter than
 *   original / highFreqFactor kept, and smoothly interpolated in between.
 * HF caches the grown dynamic frequencies across calls; here `seqLen` decides alone.
 */
export function ropeInvFreq(config: RopeFreqConfig): Float32Array {
  const type = config.type ?? 'default';
  const dim = ropeDim(config);
  const theta = need(config, 'theta');
  switch (type) {
    case 'default':
      return defaultInvFreq(theta, dim);
    case 'linear': {
      const factor = need(config, 'factor');
      return defaultInvFreq(theta, dim).map((v) => f(v / factor));
    }
    case 'dynamic': {
      const factor = need(config, 'factor');
      const maxPos = need(config, 'maxPositionEmbeddings');
      const seq = Math.max(config.seqLen ?? maxPos, maxPos);
      const base = theta * ((factor * seq) / maxPos - (factor - 1)) ** (dim / (dim - 2));
      return defaultInvFreq(base, dim);
    }
    case 'llama3': {
      const factor = need(config, 'factor');
      const low = need(config, 'lowFreqFactor');
      const high = need(config, 'highFreqFactor');
      const old = need(config, 'originalMaxPositionEmbeddings');
      const inv = defaultInvFreq(theta, dim);
      const lowWavelen = f(old / low);
      const highWavelen = f(old / high);
      const twoPi = f(2 * Math.PI);
      return inv.map((v) => {
        const wavelen = f(twoPi / v);
        const il = wavelen > lowWavelen ? f(v / factor) : v;
        if (wavelen < highWavelen || wavelen > lowWavelen) return il;
        const smooth = f(f(f(old / wavelen) - low) / f(high - low));
        return f(f(f(f(1 - smooth) * il) / factor) + f(smooth * il));
      });
    }
    default:
      throw new ConfigError(`ropeInvFreq: unsupported rope type '${String(type)}' (supported: default, linear, dynamic, llama3)`);
  }
}

/** HF's `attention_scaling` (the factor on cos and sin) of a config: 1 for default, linear, dynamic, llama3. */
export function ropeAttentionScaling(config: RopeFreqConfig): number {
  const type = config.type ?? 'default';
  if (!['default', 'linear', 'dynamic', 'llama3'].includes(type))
    throw new ConfigError(`ropeAttentionScaling: unsupported rope type '${String(type)}'`);
  return 1;
}

/** Options of {@link rope} and {@link ropeBackward}. */
export interface RopeOptions {
  /** `'BTHD'` (default): x is [B, T, H, D] (or [T, H, D]), as the projections produce it; `'BHTD'`: HF's
   *  layout after `transpose(1, 2)`. */
  layout?: 'BTHD' | 'BHTD';
  /** Position of token t is `positionOffset + t` (a KV cache's length). Default 0. Ignored with `positionIds`. */
  positionOffset?: number;
  /** Explicit positions, i32 [B, T] or [T] (shared by the batch). */
  positionIds?: DeviceTensor;
  /** Factor on cos and sin (HF `attention_scaling`, see {@link ropeAttentionScaling}). Default 1. */
  attentionScaling?: number;
  /** f32 output of x's shape. */
  out?: DeviceTensor;
}

/** {@link ropePair}'s `store`: a KV cache's layer, written in the same dispatch. */
export interface RopeStore {
  /** The values of the new positions, [B, T, H2, D] (any float dtype). */
  v: DeviceTensor;
  /** The cache's keys and values, f32 [B, L, H2, D]: the rotated x2 goes to kCache and v to vCache at positions
   *  at .. at + T - 1 of each sequence. */
  kCache: DeviceTensor;
  vCache: DeviceTensor;
  at: number;
}

function apply(ctx: Context, op: string, x: DeviceTensor, invFreq: DeviceTensor, sign: number, opts: RopeOptions, x2?: DeviceTensor, store?: RopeStore): DeviceTensor[] {
  checkFloat(x, `${op}: x`);
  if (x.shape.length !== 3 && x.shape.length !== 4)
    throw new ShapeError(`${op}: x must be [B, T, H, D] or [T, H, D] (or [B, H, T, D] with layout 'BHTD'), got ${fmt(x.shape)}`);
  const layout = opts.layout ?? 'BTHD';
  const s4 = x.shape.length === 4 ? x.shape : [1, ...x.shape];
  const [b, t, h, d] = layout === 'BTHD' ? s4 : [s4[0]!, s4[2]!, s4[1]!, s4[3]!];
  if (invFreq.dtype !== 'f32' || invFreq.shape.length !== 1)
    throw new ShapeError(`${op}: invFreq must be f32 [rotaryDim / 2], got ${invFreq.dtype}${fmt(invFreq.shape)}`);
  const half = invFreq.shape[0]!;
  if (half < 1 || 2 * half > d!)
    throw new ShapeError(`${op}: invFreq ${fmt(invFreq.shape)} needs 1 <= 2 * ${half} <= head dim ${d} of x ${fmt(x.shape)}`);
  const maxWg = maxWorkgroup(ctx);
  if (half > maxWg) throw new ShapeError(`${op}: rotary dim ${2 * half} is over ${2 * maxWg} on this device`);
  const ids = opts.positionIds;
  if (ids) {
    if (ids.dtype !== 'i32') throw new ShapeError(`${op}: positionIds must be i32, got ${ids.dtype}${fmt(ids.shape)}`);
    const ok = (ids.shape.length === 1 && ids.shape[0] === t) || (ids.shape.length === 2 && ids.shape[0] === b && ids.shape[1] === t);
    if (!ok) throw new ShapeError(`${op}: positionIds ${fmt(ids.shape)} must be [${b}, ${t}] or [${t}] for x ${fmt(x.shape)}`);
  }
  let h2 = 0;
  if (x2) {
    checkFloat(x2, `${op}: x2`);
    const s2 = x2.shape.length === 4 ? x2.shape : [1, ...x2.shape];
    if (layout !== 'BTHD' || x2.shape.length !== x.shape.length || s2[0] !== b || s2[1] !== t || s2[3] !== d)
      throw new ShapeError(`${op}: x2 ${fmt(x2.shape)} must be [B, T, H2, D] of x ${fmt(x.shape)}, layout BTHD`);
    h2 = s2[2]!;
  }
  const y = opts.out ?? empty(ctx, x.shape);
  if (opts.out) checkOut(opts.out, x.shape, `${op}: out`);
  if (ids) checkBindable(ctx, op, [ids, 'positionIds']);
  const tokens = b! * t!;
  if (numel(x.shape) === 0) return x2 ? [y, empty(ctx, x2.shape)] : [y];
  // row chunks for tensors over one binding: tokens in layout BTHD, whole batches in BHTD
  const unitTok = layout === 'BTHD' ? 1 : t!;
  const units = tokens / unitTok;
  const perUnit = unitTok * h! * d!;
  const plan = rowChunks(
    ctx,
    op,
    units,
    [
      [x, perUnit * elemBytes(x), 'x'],
      [y, perUnit * 4, 'out'],
    ],
    layout === 'BTHD' ? 'token' : 'batch',
  );
  let L = 0;
  if (store) {
    L = store.kCache.shape[1] ?? 0;
    const cs = [b!, L, h2, d!];
    if (!sameShape(store.v.shape, x2!.shape)) throw new ShapeError(`${op}: store.v ${fmt(store.v.shape)} must be x2's shape ${fmt(x2!.shape)}`);
    checkFloat(store.v, `${op}: store.v`);
    for (const [c, n] of [[store.kCache, 'kCache'], [store.vCache, 'vCache']] as const)
      if (c.dtype !== 'f32' || !sameShape(c.shape, cs)) throw new ShapeError(`${op}: store.${n} must be f32 [${cs.join(', ')}], got ${c.dtype}${fmt(c.shape)}`);
    if (!(Number.isInteger(store.at) && store.at >= 0 && store.at + t! <= L)) throw new ShapeError(`${op}: store.at ${store.at} + ${t} positions do not fit the cache's ${L}`);
    checkBindable(ctx, op, [store.kCache, 'kCache'], [store.vCache, 'vCache'], [store.v, 'v']);
  }
  // the pair in one dispatch where each tensor fits one binding; else one call each
  if (x2 && (plan.ranges.length !== 1 || numel(x2.shape) * elemBytes(x2) > ctx.maxBinding || numel(x2.shape) * 4 > ctx.maxBinding || h2 === 0)) {
    const ys = [...apply(ctx, op, x, invFreq, sign, { ...opts, out: y }), ...apply(ctx, op, x2, invFreq, sign, { ...opts, out: undefined })];
    if (store) copyRows(ctx, ys[1]!, store.kCache, t!, 0, store.at, { src: store.v, dst: store.vCache }); // the same values, one dispatch more
    return ys;
  }
  const wg = Math.min(maxWg, Math.max(pow2ceil(half), 64, Math.min(256, pow2ceil((h! + h2) * half))));
  const key = `rope:wg${wg}:${x.dtype}:${ids ? 'ids' : 'off'}${x2 ? `:pair${h2}:${x2.dtype}` : ''}${store ? `:store:${store.v.dtype}` : ''}`;
  const y2 = x2 ? empty(ctx, x2.shape) : undefined;
  const k = llmKernel(ctx, key, () => ({
    code:
      `const WG: u32 = ${wg}u;\nconst H2: u32 = ${h2}u;\n` +
      (ids
        ? 'fn position(b: u32, t: u32) -> f32 { return f32(pos[b * p.posStrideB + t]); }\n'
        : 'fn position(b: u32, t: u32) -> f32 { return f32(i32(t) + p.posOffset); }\n') +
      (x2
        ? 'fn ld(h: u32, e: u32) -> f32 { if (h < p.H) { return read_x(e); } return read_x2(e); }\n' +
          `fn st(h: u32, e: u32, v: f32) { if (h < p.H) { y[e] = v; } else { y2[e] = v;${store ? ' kc[kshift + e] = v;' : ''} } }\n`
        : 'fn ld(h: u32, e: u32) -> f32 { return read_x(e); }\nfn st(h: u32, e: u32, v: f32) { y[e] = v; }\n') +
      // store: x2's element e of token (b, tt) goes to the cache at (b * L + at + tt) * H2 * D + ..., which is
      // e + kshift; the token's v is copied the same way
      (store
        ? 'var<private> kshift: u32;\n' +
          ropeWgsl
            .replace('//@store_pre', 'kshift = (b * (p.kvLen - p.T) + p.kvAt) * H2 * p.D;')
            .replace('//@store_post', 'for (var q = t; q < H2 * p.D; q += WG) { let e = tok * H2 * p.D + q; vc[kshift + e] = read_v(e); }')
        : ropeWgsl),
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'inv', access: 'read', dtype: 'f32' },
      ...(ids ? [{ name: 'pos', access: 'read' as const, dtype: 'i32' as const }] : []),
      { name: 'y', access: 'rw', dtype: 'f32' },
      ...(x2 ? ioBindings(x2.dtype, 'f32', ['x2', 'y2']) : []),
      ...(store
        ? [
            { name: 'kc', access: 'rw' as const, dtype: 'f32' as const },
            { name: 'v', access: 'read' as const, dtype: store.v.dtype },
            { name: 'vc', access: 'rw' as const, dtype: 'f32' as const },
          ]
        : []),
    ],
    params: [
      'u32:tokens',
      'u32:T',
      'u32:H',
      'u32:D',
      'u32:half',
      'u32:lay',
      'u32:posStrideB',
      'i32:posOffset',
      'f32:scale',
      'f32:sinSign',
      'u32:tok0',
      ...(store ? (['u32:kvLen', 'u32:kvAt'] as const) : []),
    ],
  }));
  const strideB = ids && ids.shape.length === 2 ? t! : 0;
  for (const [u0, u1] of plan.ranges) {
    const bx = bindUnits(plan, x, perUnit * elemBytes(x), u0, u1);
    const by = bindUnits(plan, y, perUnit * 4, u0, u1);
    const bufs = [bx, invFreq.buffer, ...(ids ? [ids.buffer] : []), by, ...(x2 ? [x2.buffer, y2!.buffer] : []), ...(store ? [store.kCache.buffer, store.v.buffer, store.vCache.buffer] : [])];
    const n = (u1 - u0) * unitTok;
    ctx.dispatch(k, bufs, grid(n), [
      n,
      t!,
      h!,
      d!,
      half,
      layout === 'BTHD' ? 0 : 1,
      strideB,
      opts.positionOffset ?? 0,
      opts.attentionScaling ?? 1,
      sign,
      u0 * unitTok,
      ...(store ? [L, store.at] : []),
    ]);
  }
  return y2 ? [y, y2] : [y];
}

/**
 * Rotary position embedding (HF `apply_rotary_pos_emb` with `rotate_half`): pairs (i, i + half) of each head
 * rotate by `position * invFreq[i]`; cos/sin are computed in the kernel. `x` [B, T, H, D] (or [T, H, D]; or
 * [B, H, T, D] with `layout: 'BHTD'`) in f32/f16/bf16; `invFreq` f32 [R/2] from {@link ropeInvFreq} (R <= D:
 * elements past R are copied, partial rotary). Returns f32. One workgroup per token. Tensors larger than one
 * storage binding are processed in chunks of tokens (BTHD) or of whole batches (BHTD).
 */
export function rope(ctx: Context, x: DeviceTensor, invFreq: DeviceTensor, opts: RopeOptions = {}): DeviceTensor {
  return apply(ctx, 'rope', x, invFreq, 1, opts)[0]!;
}

/**
 * {@link rope} of two tensors at the same positions in one dispatch: x [B, T, H, D] and x2 [B, T, H2, D] (layout
 * BTHD; a decoding step's queries and keys), the values of two `rope` calls bit for bit. `opts.out` is x's output.
 * Tensors larger than one storage binding take one dispatch each. With `store`, the same dispatch also writes the
 * rotated x2 and `store.v` into a KV cache's layer at `store.at` (a decoding step's keys and values: what
 * `copyRows` would copy, bit for bit).
 */
export function ropePair(ctx: Context, x: DeviceTensor, x2: DeviceTensor, invFreq: DeviceTensor, opts: RopeOptions & { store?: RopeStore } = {}): [DeviceTensor, DeviceTensor] {
  const [y, y2] = apply(ctx, 'rope', x, invFreq, 1, opts, x2, opts.store);
  return [y!, y2!];
}

/** Backward of {@link rope}: rotates `dy` by the negative angles (the transpose of the rotation). */
export function ropeBackward(ctx: Context, dy: DeviceTensor, invFreq: DeviceTensor, opts: RopeOptions = {}): DeviceTensor {
  return apply(ctx, 'ropeBackward', dy, invFreq, -1, opts)[0]!;
}
