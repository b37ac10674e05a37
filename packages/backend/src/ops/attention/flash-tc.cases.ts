/**
 * The tensor-core attention checks, shared by `flash-tc.test.ts` (vitest, where the adapter has subgroup matrices)
 * and the GPU-machine entry `src/bench/attention-tc-check.ts`
 * (no vitest there): forward and backward (dQ, dK, dV) on f16 q, k, v, against a float64 reference of the
 * f16-rounded inputs, into NaN-poisoned outputs: causal and not, odd T and S, GQA, key padding, sliding window,
 * soft-capping, head dims that are not fragment multiples, f32 upstream gradients, forced tiles.
 */
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr } from '../../testing';
import { refAttention, refAttentionBackward, type RefDims, type RefOpts } from './attention.ref';
import { flashAttention, flashAttentionBackward } from './flash';
import { attentionTcFailures, attentionTcReady, type TcAttnTiles } from './flash-tc';

/** Relative error (max |got - want| / max |want|) the tensor-core kernels must stay under. */
export const TC_ATTN_TOL = 1e-3;

export interface TcAttnCase extends RefDims {
  causal?: boolean;
  qOffset?: number;
  mask?: boolean;
  window?: number;
  softcap?: number;
  scale?: number;
  doutDtype?: DType;
  tcTiles?: Partial<TcAttnTiles>;
  /** The backward's dsBudget: 0 = the dQ pass recomputes S and dP; default: dK/dV stores dS for it. */
  dsBudget?: number;
}

export interface TcAttnResult {
  name: string;
  /** relative errors of out, lse (absolute error over max(1, max |lse|)), dq, dk, dv */
  err: Record<'out' | 'lse' | 'dq' | 'dk' | 'dv', number>;
}

export const caseName = (c: TcAttnCase): string =>
  `B${c.B} T${c.T} S${c.S} Hq${c.Hq} Hkv${c.Hkv} D${c.D}${c.causal === false ? ' non-causal' : ''}` +
  `${c.qOffset !== undefined ? ` qOffset${c.qOffset}` : ''}${c.mask ? ' mask' : ''}${c.window ? ` window${c.window}` : ''}` +
  `${c.softcap ? ` softcap${c.softcap}` : ''}${c.scale ? ` scale${c.scale}` : ''}${c.doutDtype ? ` dout:${c.doutDtype}` : ''}` +
  `${c.tcTiles ? ` tiles ${JSON.stringify(c.tcTiles)}` : ''}${c.dsBudget !== undefined ? ` dsBudget${c.dsBudget}` : ''}`;

function lseErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let e = 0;
  let m = 1;
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    if (w === -Infinity) {
      if (g !== -Infinity) return Infinity;
      continue;
    }
    if (!Number.isFinite(g)) return Infinity;
    e = Math.max(e, Math.abs(g - w));
    m = Math.max(m, Math.abs(w));
  }
  return e / m;
}

/** Run `fn` with tensor cores required; a first call that finds the kernels still being checked waits for them. */
async function whenReady(ctx: Context, fn: () => void): Promise<void> {
  // the backward's two kernels are requested one after the other: up to one wait each
  for (let tries = 0; ; tries++) {
    try {
      fn();
      return;
    } catch (e) {
      if (!/not ready/.test((e as Error).message) || tries >= 3) throw e;
      await attentionTcReady(ctx);
      const failed = [...attentionTcFailures(ctx)];
      if (failed.length) throw new Error(failed.map(([k, err]) => `${k}: ${err.message}`).join('\n'));
    }
  }
}

let seed = 9100;

/** Forward and backward of one case on the tensor-core path (required: throws where it cannot run), against
 *  float64. */
export async function runTcAttnCase(ctx: Context, c: TcAttnCase): Promise<TcAttnResult> {
  const up = async (n: number, shape: number[], dt: DType): Promise<[DeviceTensor, Float64Array]> => {
    const t = upload(ctx, randn(n, seed++), shape, dt);
    return [t, Float64Array.from(await download(ctx, t))];
  };
  const [q, qv] = await up(c.B * c.T * c.Hq * c.D, [c.B, c.T, c.Hq, c.D], 'f16');
  const [k, kv] = await up(c.B * c.S * c.Hkv * c.D, [c.B, c.S, c.Hkv, c.D], 'f16');
  const [v, vv] = await up(c.B * c.S * c.Hkv * c.D, [c.B, c.S, c.Hkv, c.D], 'f16');
  const [dOut, dov] = await up(c.B * c.T * c.Hq * c.D, [c.B, c.T, c.Hq, c.D], c.doutDtype ?? 'f16');
  let mv: Int32Array | undefined;
  if (c.mask) {
    mv = new Int32Array(c.B * c.S);
    for (let b = 0; b < c.B; b++) for (let s = 0; s < c.S; s++) mv[b * c.S + s] = b === 1 ? +(s >= 3) : +((s * 7 + 3) % 5 !== 0);
  }
  const mask = mv ? upload(ctx, mv, [c.B, c.S], 'i32') : undefined;
  const ro: RefOpts = {
    causal: c.causal ?? true,
    scale: c.scale ?? 1 / Math.sqrt(c.D),
    qOffset: c.qOffset ?? c.S - c.T,
    mask: mv,
    window: c.window,
    softcap: c.softcap,
  };
  const opts = {
    causal: c.causal,
    qOffset: c.qOffset,
    keyMask: mask,
    scale: c.scale,
    slidingWindow: c.window,
    softcap: c.softcap,
    tensorCores: true,
    tcTiles: c.tcTiles,
  };
  const out = empty(ctx, [c.B, c.T, c.Hq, c.D]);
  const lse = empty(ctx, [c.B, c.Hq, c.T]);
  const dq = empty(ctx, q.shape);
  const dk = empty(ctx, k.shape);
  const dv = empty(ctx, v.shape);
  for (const t of [out, lse, dq, dk, dv]) poison(ctx, t);
  await whenReady(ctx, () => flashAttention(ctx, q, k, v, { ...opts, out, lse }));
  await whenReady(ctx, () => flashAttentionBackward(ctx, dOut, q, k, v, out, lse, { ...opts, dq, dk, dv, dsBudget: c.dsBudget }));
  const ref = refAttention(c, ro, qv, kv, vv);
  const g = refAttentionBackward(c, ro, qv, kv, vv, dov);
  const err = {
    out: relErr(await download(ctx, out), ref.out),
    lse: lseErr(await download(ctx, lse), ref.lse),
    dq: relErr(await download(ctx, dq), g.dq),
    dk: relErr(await download(ctx, dk), g.dk),
    dv: relErr(await download(ctx, dv), g.dv),
  };
  release(ctx, q, k, v, dOut, out, lse, dq, dk, dv, ...(mask ? [mask] : []));
  return { name: caseName(c), err };
}

/** The cases for an adapter with subgroup matrices (sizes for a float64 reference in a few seconds). Every case's
 *  backward stores dS for the dQ pass (the default within its budget) unless it says `dsBudget: 0`. */
export function tcAttnCases(): TcAttnCase[] {
  const recompute: TcAttnCase[] = [
    { B: 2, T: 128, S: 128, Hq: 4, Hkv: 4, D: 64, dsBudget: 0 },
    { B: 2, T: 45, S: 103, Hq: 6, Hkv: 2, D: 128, mask: true, dsBudget: 0 },
    { B: 1, T: 131, S: 131, Hq: 2, Hkv: 2, D: 64, window: 37, dsBudget: 0 },
    { B: 1, T: 65, S: 65, Hq: 2, Hkv: 1, D: 64, softcap: 5, scale: 0.3, dsBudget: 0 },
    { B: 1, T: 19, S: 19, Hq: 2, Hkv: 1, D: 13, mask: true, dsBudget: 0 },
    { B: 1, T: 99, S: 99, Hq: 2, Hkv: 1, D: 64, tcTiles: { fwd: { nsg: 2, b: 32 }, dq: { nsg: 2, b: 32 }, dkdv: { nsg: 2, b: 16 } }, dsBudget: 0 },
  ];
  return [
    ...recompute,
    { B: 2, T: 128, S: 128, Hq: 4, Hkv: 4, D: 64 },
    { B: 1, T: 77, S: 77, Hq: 4, Hkv: 2, D: 64 },
    { B: 2, T: 45, S: 103, Hq: 6, Hkv: 2, D: 128, mask: true },
    { B: 1, T: 200, S: 200, Hq: 2, Hkv: 1, D: 64, causal: false, mask: true },
    { B: 1, T: 131, S: 131, Hq: 2, Hkv: 2, D: 64, window: 37 },
    { B: 1, T: 65, S: 65, Hq: 2, Hkv: 1, D: 64, softcap: 5, scale: 0.3 },
    { B: 1, T: 33, S: 50, Hq: 2, Hkv: 2, D: 72 },
    { B: 1, T: 19, S: 19, Hq: 2, Hkv: 1, D: 13, mask: true },
    { B: 1, T: 1, S: 1, Hq: 1, Hkv: 1, D: 64 },
    { B: 1, T: 40, S: 40, Hq: 2, Hkv: 1, D: 32, qOffset: -5 },
    { B: 1, T: 70, S: 70, Hq: 2, Hkv: 2, D: 64, doutDtype: 'f32' },
    { B: 1, T: 257, S: 257, Hq: 2, Hkv: 1, D: 128 },
    { B: 1, T: 99, S: 99, Hq: 2, Hkv: 1, D: 64, tcTiles: { fwd: { nsg: 2, b: 32 }, dq: { nsg: 2, b: 32 }, dkdv: { nsg: 2, b: 16 } } },
    { B: 1, T: 99, S: 99, Hq: 2, Hkv: 1, D: 64, tcTiles: { fwd: { nsg: 1, b: 16 }, dq: { nsg: 4, b: 32 }, dkdv: { nsg: 1, b: 32 } } },
    { B: 1, T: 150, S: 150, Hq: 2, Hkv: 1, D: 64, tcTiles: { fwd: { nsg: 4, b: 32 }, dq: { nsg: 4, b: 32 }, dkdv: { nsg: 4, b: 32 } } },
    { B: 1, T: 150, S: 150, Hq: 2, Hkv: 1, D: 64, tcTiles: { fwd: { nsg: 2, b: 64 }, dq: { nsg: 2, b: 64 }, dkdv: { nsg: 2, b: 64 } } },
    // dQ-from-dS tiles other than dK/dV's blocks: its key tiles straddle blocks dK/dV never wrote (masked per pair)
    { B: 1, T: 99, S: 99, Hq: 2, Hkv: 1, D: 64, window: 21, tcTiles: { dkdv: { nsg: 4, b: 64 }, dqds: { nsg: 1, b: 16 } } },
    { B: 2, T: 83, S: 83, Hq: 4, Hkv: 2, D: 64, tcTiles: { dkdv: { nsg: 1, b: 32 }, dqds: { nsg: 2, b: 64 } } },
    { B: 1, T: 61, S: 90, Hq: 2, Hkv: 1, D: 128, mask: true, tcTiles: { dqds: { nsg: 4, b: 32 } } },
  ];
}
