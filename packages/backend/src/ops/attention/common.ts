import maskWgsl from '../../../../../shaders/attention-mask.wgsl';
import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { floatNames, isFloat, storageBytes } from '../../dtype';
import { ConfigError, ShapeError } from '../../errors';
import { numel, type DeviceTensor } from '../../tensor';

/** Options shared by the attention forward and backward. */
export interface AttentionOptions {
  /** Causal masking: key s is visible to query t iff `s <= qOffset + t`. Default true. */
  causal?: boolean;
  /** Score scale. Default `1 / sqrt(D)`. */
  scale?: number;
  /**
   * Absolute position of query 0 among the keys (causal only; may be negative). Default `S - T`: the queries
   * are the last T positions, as with a KV cache (FlashAttention's bottom-right alignment; 0 when T = S).
   */
  qOffset?: number;
  /** Key padding mask, i32 or u32 `[B, S]`: 1 keeps key s of sequence b, 0 masks it. A query row with no
   *  visible key outputs zeros (and logsumexp -inf), and gets zero gradients. */
  keyMask?: DeviceTensor;
  /**
   * Sliding-window attention (Mistral, Gemma 2/3 local layers), causal only: the query at absolute position
   * `p = qOffset + t` sees key s iff `s <= p && s > p - slidingWindow`, i.e. the last `slidingWindow` keys up
   * to and including its own position (HF transformers `sliding_window_overlay` on the causal mask). A positive
   * integer; undefined or null means full causal attention. Key tiles outside every row's window are skipped,
   * so the cost is O(T * slidingWindow).
   */
  slidingWindow?: number | null;
  /**
   * Attention logit soft-capping (Gemma 2's `attn_logit_softcapping`): each score `x = scale * q.k` becomes
   * `softcap * tanh(x / softcap)` before masking and softmax (the backward multiplies dS by `1 - tanh^2`).
   * A positive number; undefined or null: no capping.
   */
  softcap?: number | null;
}

export interface AttnDims {
  B: number;
  T: number;
  S: number;
  Hq: number;
  Hkv: number;
  G: number;
  D: number;
}


export const fmt = (t: DeviceTensor): string => `${t.dtype}[${t.shape.join(', ')}]`;

/** Largest head dim the kernels take. */
export const MAX_HEAD_DIM = 256;

export function checkFloat(what: string, t: DeviceTensor): void {
  if (!isFloat(t.dtype)) throw new ShapeError(`attention: ${what} must be ${floatNames()}, got ${fmt(t)}`);
}

export function checkFits(ctx: Context, what: string, t: DeviceTensor): void {
  if (storageBytes(t.dtype, numel(t.shape)) > ctx.maxBinding)
    throw new ShapeError(
      `attention: ${what} ${fmt(t)} exceeds the device's storage binding limit of ${ctx.maxBinding} bytes (split the batch)`,
    );
}

/** Validate q [B, T, Hq, D], k and v [B, S, Hkv, D] (and the key mask) and return the sizes. */
export function attnDims(ctx: Context, q: DeviceTensor, k: DeviceTensor, v: DeviceTensor, keyMask?: DeviceTensor): AttnDims {
  if (q.shape.length !== 4 || k.shape.length !== 4 || v.shape.length !== 4)
    throw new ShapeError(`attention: q, k, v must be [B, T, Hq, D] and [B, S, Hkv, D], got q ${fmt(q)}, k ${fmt(k)}, v ${fmt(v)}`);
  checkFloat('q', q);
  checkFloat('k', k);
  checkFloat('v', v);
  const [B, T, Hq, D] = q.shape as [number, number, number, number];
  const [Bk, S, Hkv, Dk] = k.shape as [number, number, number, number];
  if (k.shape.some((d, i) => d !== v.shape[i]))
    throw new ShapeError(`attention: k ${fmt(k)} and v ${fmt(v)} must have the same shape`);
  if (Bk !== B || Dk !== D)
    throw new ShapeError(`attention: q ${fmt(q)} and k ${fmt(k)} disagree in batch or head dim (q [B, T, Hq, D], k [B, S, Hkv, D])`);
  if (Hkv === 0 || Hq % Hkv !== 0)
    throw new ShapeError(`attention: kv heads (${Hkv}, k ${fmt(k)}) must divide query heads (${Hq}, q ${fmt(q)})`);
  if (D < 1 || D > MAX_HEAD_DIM) throw new ShapeError(`attention: head dim ${D} of q ${fmt(q)} is outside 1..${MAX_HEAD_DIM}`);
  if (Hq > 65535 || B > 65535) throw new ShapeError(`attention: at most 65535 heads and batch rows, got q ${fmt(q)}`);
  if (keyMask) checkMask(keyMask, B, S, k);
  for (const [w, t] of [['q', q], ['k', k], ['v', v]] as const) checkFits(ctx, w, t);
  return { B, T, S, Hq, Hkv, G: Hq / Hkv, D };
}

export function checkMask(mask: DeviceTensor, B: number, S: number, k: DeviceTensor): void {
  if (mask.dtype !== 'i32' && mask.dtype !== 'u32')
    throw new ShapeError(`attention: keyMask must be i32 or u32, got ${fmt(mask)}`);
  if (mask.shape.length !== 2 || mask.shape[0] !== B || mask.shape[1] !== S)
    throw new ShapeError(`attention: keyMask ${fmt(mask)} must be [B, S] = [${B}, ${S}] for k ${fmt(k)}`);
}

export function checkOut(what: string, t: DeviceTensor | undefined, shape: readonly number[]): void {
  if (!t) return;
  if (t.dtype !== 'f32' || t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
    throw new ShapeError(`attention: ${what} must be f32[${shape.join(', ')}], got ${fmt(t)}`);
}

const dummies = new WeakMap<Context, GpuBuffer[]>();

/** A tiny buffer bound in place of an absent binding (slot 0: read-only uses, slot 1: writable uses, so that
 *  one dispatch never binds the same buffer both ways). */
export function dummyBuffer(ctx: Context, slot: 0 | 1 = 0): GpuBuffer {
  let l = dummies.get(ctx);
  if (!l) dummies.set(ctx, (l = []));
  let b = l[slot];
  if (!b || b.released) {
    b = ctx.alloc(16);
    ctx.write(b, new Uint32Array(4));
    l[slot] = b;
  }
  return b;
}

/**
 * Specialise a shader template: rewrite its `const NAME: u32 = ...u;` lines, then expand its unroll blocks
 * (`//@unroll i N` ... `//@end`, N a literal or one of the consts, nestable), repeating the body with every
 * `$i` replaced by the literal `0u`, `1u`, ... so that private arrays are only indexed by constants.
 */
export function specialize(src: string, consts: Readonly<Record<string, number>>): string {
  let out = src;
  for (const [k, v] of Object.entries(consts)) {
    const re = new RegExp(`^const ${k}: u32 = \\d+u;$`, 'm');
    if (!re.test(out)) throw new Error(`attention shader template has no 'const ${k}: u32' line`);
    out = out.replace(re, `const ${k}: u32 = ${v}u;`);
  }
  return unroll(out.split('\n'), consts).join('\n');
}

function unroll(lines: string[], consts: Readonly<Record<string, number>>): string[] {
  const res: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s*\/\/@unroll (\w+) (\w+)\s*$/.exec(lines[i]!);
    if (!m) {
      if (/^\s*\/\/@end\s*$/.test(lines[i]!)) throw new Error(`attention shader template: unmatched //@end at line ${i + 1}`);
      res.push(lines[i]!);
      continue;
    }
    let depth = 1;
    let j = i + 1;
    for (; j < lines.length; j++) {
      if (/^\s*\/\/@unroll /.test(lines[j]!)) depth++;
      else if (/^\s*\/\/@end\s*$/.test(lines[j]!) && --depth === 0) break;
    }
    if (depth) throw new Error(`attention shader template: //@unroll at line ${i + 1} has no //@end`);
    const n = /^\d+$/.test(m[2]!) ? Number(m[2]) : consts[m[2]!];
    if (n === undefined) throw new Error(`attention shader template: unknown unroll count '${m[2]}'`);
    const body = unroll(lines.slice(i + 1, j), consts);
    const re = new RegExp(`\\$${m[1]}\\b`, 'g');
    for (let v = 0; v < n; v++) for (const l of body) res.push(l.replace(re, `${v}u`));
    i = j;
  }
  return res;
}

/** vec4 chunks per head-dim row and the (odd, bank-conflict-free) row stride in workgroup memory. */
export function rowLayout(D: number): { DV: number; DS: number } {
  const DV = Math.ceil(D / 4);
  return { DV, DS: DV % 2 ? DV : DV + 1 };
}

/** The kernels' `window` param: 0 for none, else the validated window. Throws a ConfigError for a window that
 *  is not a positive integer, or one without causal masking. */
export function resolveWindow(op: string, slidingWindow: number | null | undefined, causal = true): number {
  if (slidingWindow === undefined || slidingWindow === null) return 0;
  if (!Number.isInteger(slidingWindow) || slidingWindow < 1 || slidingWindow > 2 ** 30)
    throw new ConfigError(`${op}: slidingWindow must be a positive integer, got ${slidingWindow}`);
  if (!causal) throw new ConfigError(`${op}: slidingWindow ${slidingWindow} needs causal attention (causal: false given)`);
  return slidingWindow;
}

/** The kernels' soft-capping params for `scale` and `softcap`: `qscale` multiplies q (or the dot product) in
 *  the forward and decode, `capin` = scale / softcap and `capmul` = softcap * log2(e) (0: no capping). Throws
 *  a ConfigError for a softcap that is not a positive finite number. */
export function resolveSoftcap(
  op: string,
  scale: number,
  softcap: number | null | undefined,
): { qscale: number; capin: number; capmul: number } {
  if (softcap === undefined || softcap === null) return { qscale: scale * Math.LOG2E, capin: 0, capmul: 0 };
  if (!Number.isFinite(softcap) || softcap <= 0) throw new ConfigError(`${op}: softcap must be a positive number, got ${softcap}`);
  return { qscale: scale / softcap, capin: scale / softcap, capmul: softcap * Math.LOG2E };
}

/** A shader template with the shared visibility rule and soft-capping (shaders/attention-mask.wgsl) in front
 *  of it. */
export function withMaskRule(src: string): string {
  return maskWgsl + '\n' + src;
}

export function resolveScale(D: number, scale?: number): number {
  const s = scale ?? 1 / Math.sqrt(D);
  if (!Number.isFinite(s)) throw new ConfigError(`attention: scale must be finite, got ${scale}`);
  return s;
}
