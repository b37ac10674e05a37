/**
 * Flash-attention benchmark: forward, backward and forward+backward at B=8, H=12, T=S=1024, D=64, causal, f32
 * (the sizes of `attention_torch.py`), timed with `await ctx.sync()` over repetitions after warm-up.
 * Prints ONE JSON object. Also checks a sample of the results against a float64 CPU reference (some query
 * rows of out and dq, some keys of dk and dv) so that a fast wrong kernel is caught.
 *
 *   node attention-bench.js [--quick] [--B 8] [--H 12] [--Hkv 12] [--T 1024] [--D 64] [--reps 20]
 *                           [--noncausal] [--tiles '{"fwd":[64,32],"dkdv":[32,32],"dq":[64,16]}'] [--nocheck]
 *                           [--profile]   (adds per-kernel GPU times from timestamp queries)
 *                           [--fwdonly]   (time the forward only)
 *                           [--window 256] (sliding window)  [--softcap 50] (logit soft-capping)
 *                           [--dtype f16]  (q, k, v and dO stored in f16: the tensor-core kernels where the
 *                           adapter has subgroup matrices, see ops/attention/flash-tc.ts) [--notc] (f16, portable)
 *                           [--tctiles '{"fwd":{"nsg":4,"b":64},"dq":{"nsg":4,"b":64},"dkdv":{"nsg":4,"b":64},"dqds":{"nsg":4,"b":64}}']
 *                           (any subset) [--dsbudget BYTES] (tensor-core backward: 0 = dQ recomputes S and dP
 *                           instead of reading the dS that dK/dV stores; default ATTENTION_DS_BUDGET)
 *
 *   node attention-bench.js --decode [--B 4] [--H 32] [--Hkv 8] [--D 128] [--len 4096]
 *     times the decode path instead (one query per sequence against a KV cache of len positions).
 *
 * TFLOP/s count useful work only, FlashAttention's convention: forward 4*B*H*T*S*D flops (two matmuls),
 * halved when causal (with a sliding window: 4*B*H*D times the visible (query, key) pairs); backward 2.5x the
 * forward (five matmuls).
 */
import { createContext } from '../context';
import { attentionDecode } from '../ops/attention/decode';
import { flashAttention, flashAttentionBackward } from '../ops/attention/flash';
import { attentionTiles, type AttentionTiles } from '../ops/attention/tiles';
import { attentionTcFailures, attentionTcReady, tcAttnDsBytes, type TcAttnTiles } from '../ops/attention/flash-tc';
import { ATTENTION_DS_BUDGET, flashAttentionTcPath } from '../ops/attention/flash';
import { roundTo } from '../ops/core/core.ref';
import type { DType } from '../dtype';
import { download, upload } from '../tensor';
import { randn } from '../testing';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const flag = (name: string) => process.argv.includes(`--${name}`);

const quick = flag('quick');
const B = Number(arg('B') ?? (quick ? 1 : 8));
const H = Number(arg('H') ?? (quick ? 2 : 12));
const Hkv = Number(arg('Hkv') ?? H);
const T = Number(arg('T') ?? (quick ? 128 : 1024));
const D = Number(arg('D') ?? (quick ? 64 : 64));
const reps = Number(arg('reps') ?? (quick ? 3 : 20));
const causal = !flag('noncausal');
const tilesArg = arg('tiles');
const window = arg('window') !== undefined ? Number(arg('window')) : undefined;
const softcap = arg('softcap') !== undefined ? Number(arg('softcap')) : undefined;
const S = T;
const dtype = (arg('dtype') ?? 'f32') as DType;
const tensorCores = flag('notc') ? false : undefined;
const tcTilesArg = arg('tctiles');

async function decodeBench(): Promise<void> {
  const ctx = await createContext();
  const b = Number(arg('B') ?? (quick ? 1 : 4));
  const h = Number(arg('H') ?? (quick ? 4 : 32));
  const hkv = Number(arg('Hkv') ?? (quick ? 2 : 8));
  const d = Number(arg('D') ?? (quick ? 64 : 128));
  const len = Number(arg('len') ?? (quick ? 300 : 4096));
  const q = upload(ctx, randn(b * h * d, 1), [b, 1, h, d]);
  const kc = upload(ctx, randn(b * len * hkv * d, 2), [b, len, hkv, d]);
  const vc = upload(ctx, randn(b * len * hkv * d, 3), [b, len, hkv, d]);
  const dopts = { slidingWindow: window, softcap };
  const out = attentionDecode(ctx, q, kc, vc, len, dopts);
  const r = Number(arg('reps') ?? (quick ? 5 : 200));
  for (let i = 0; i < 5; i++) attentionDecode(ctx, q, kc, vc, len, { ...dopts, out });
  await ctx.sync();
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const t0 = performance.now();
    for (let i = 0; i < r; i++) attentionDecode(ctx, q, kc, vc, len, { ...dopts, out });
    await ctx.sync();
    best = Math.min(best, (performance.now() - t0) / r);
  }
  const bytes = 2 * b * Math.min(len, window ?? len) * hkv * d * 4;
  console.log(
    JSON.stringify({
      bench: 'attention decode f32',
      device: `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim(),
      B: b,
      H: h,
      Hkv: hkv,
      D: d,
      len,
      window,
      softcap,
      decode_ms: +best.toFixed(4),
      kv_gbps: +(bytes / best / 1e6).toPrecision(3),
    }),
  );
  ctx.destroy();
}

async function main(): Promise<void> {
  const ctx = await createContext({ profile: flag('profile') });
  const tiles: AttentionTiles = tilesArg ? (JSON.parse(tilesArg) as AttentionTiles) : attentionTiles(ctx, D);
  // host copies as the GPU stores them (f16-rounded for --dtype f16): the sample check's float64 inputs
  const qh = roundTo(dtype, randn(B * T * H * D, 1));
  const kh = roundTo(dtype, randn(B * S * Hkv * D, 2));
  const vh = roundTo(dtype, randn(B * S * Hkv * D, 3));
  const doh = roundTo(dtype, randn(B * T * H * D, 4));
  const q = upload(ctx, qh, [B, T, H, D], dtype);
  const k = upload(ctx, kh, [B, S, Hkv, D], dtype);
  const v = upload(ctx, vh, [B, S, Hkv, D], dtype);
  const dO = upload(ctx, doh, [B, T, H, D], dtype);
  const tcTiles = tcTilesArg ? (JSON.parse(tcTilesArg) as Partial<TcAttnTiles>) : undefined;
  const dsBudget = arg('dsbudget') !== undefined ? Number(arg('dsbudget')) : undefined;
  const opts = { causal, tiles, slidingWindow: window, softcap, tensorCores, tcTiles, dsBudget };
  const tc = flashAttentionTcPath(ctx, q, k, v, opts);
  flashAttention(ctx, q, k, v, opts);
  flashAttentionBackward(ctx, dO, q, k, v, flashAttention(ctx, q, k, v, opts).out, flashAttention(ctx, q, k, v, opts).lse, opts);
  // tensor-core kernels are built after an asynchronous check: wait for it, then every call below runs them
  await attentionTcReady(ctx);
  const tcFailures = [...attentionTcFailures(ctx)].map(([key, e]) => `${key}: ${e.message.slice(0, 2000)}`);
  const f = flashAttention(ctx, q, k, v, opts);
  const g = flashAttentionBackward(ctx, dO, q, k, v, f.out, f.lse, opts);
  const fwd = () => flashAttention(ctx, q, k, v, { ...opts, out: f.out, lse: f.lse });
  const bwd = () => flashAttentionBackward(ctx, dO, q, k, v, f.out, f.lse, { ...opts, dq: g.dq, dk: g.dk, dv: g.dv });
  await ctx.sync();

  async function time(fn: () => void): Promise<number> {
    for (let i = 0; i < 2; i++) fn();
    await ctx.sync();
    let best = Infinity;
    for (let round = 0; round < 3; round++) {
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) fn();
      await ctx.sync();
      best = Math.min(best, (performance.now() - t0) / reps);
    }
    return best;
  }
  const fwdMs = await time(fwd);
  const fwdOnly = flag('fwdonly');
  const bwdMs = fwdOnly ? NaN : await time(bwd);
  const bothMs = fwdOnly ? NaN : await time(() => {
    fwd();
    bwd();
  });
  let pairs = 0;
  for (let t = 0; t < T && window; t++) pairs += Math.min(S - T + t + 1, S) - Math.max(0, S - T + t - window + 1);
  const fwdFlop = window ? 4 * B * H * D * pairs : (4 * B * H * T * S * D) / (causal ? 2 : 1);
  const bwdFlop = 2.5 * fwdFlop;
  const tf = (flop: number, ms: number) => +(flop / ms / 1e9).toPrecision(3);

  let kernels: { name: string; meanUs: number }[] | undefined;
  if (flag('profile') && ctx.profiler.enabled) {
    await ctx.sync();
    ctx.profiler.reset();
    for (let i = 0; i < 5; i++) {
      fwd();
      bwd();
    }
    await ctx.sync();
    kernels = (await ctx.profiler.summary()).map((k) => ({ name: k.name, meanUs: +k.meanUs.toFixed(1) }));
  }

  let check: Record<string, number> | string = 'skipped';
  if (!flag('nocheck')) {
    fwd();
    bwd();
    check = sampleCheck(
      await download(ctx, f.out),
      await download(ctx, g.dq),
      await download(ctx, g.dk),
      await download(ctx, g.dv),
      qh,
      kh,
      vh,
      doh,
    );
  }
  console.log(
    JSON.stringify({
      bench: `flash-attention ${dtype}`,
      device: `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim(),
      dtype,
      path: tc && !tcFailures.length ? 'tensor-cores' : 'portable',
      tcPlan: tc ? { frag: `${tc.plan.frag.M}x${tc.plan.frag.N}x${tc.plan.frag.K}`, subgroup: tc.plan.subgroupSize, tiles: tc.tiles } : undefined,
      tcFailures: tcFailures.length ? tcFailures : undefined,
      tcBackward: tc ? (tcAttnDsBytes({ B, T, S, Hq: H }) <= Math.min(dsBudget ?? ATTENTION_DS_BUDGET, ctx.maxBinding) ? `dS stored (${(tcAttnDsBytes({ B, T, S, Hq: H }) / 2 ** 20).toFixed(1)} MiB)` : 'dQ recomputes') : undefined,
      workgroupStorage: ctx.info.limits.maxComputeWorkgroupStorageSize,
      B,
      H,
      Hkv,
      T,
      S,
      D,
      causal,
      window,
      softcap,
      reps,
      tiles,
      fwd_ms: +fwdMs.toFixed(4),
      bwd_ms: +bwdMs.toFixed(4),
      fwd_bwd_ms: +bothMs.toFixed(4),
      fwd_tflops: tf(fwdFlop, fwdMs),
      bwd_tflops: tf(bwdFlop, bwdMs),
      fwd_bwd_tflops: tf(fwdFlop + bwdFlop, bothMs),
      flops_convention: 'fwd 4*B*H*T*S*D (/2 causal), bwd 2.5x fwd',
      kernels,
      check,
    }),
  );
  ctx.destroy();
}

/** Max relative error (vs the max |ref|) over sampled rows of out/dq (b = 0, heads 0 and last) and sampled keys
 *  of dk/dv (kv head 0), against float64. */
function sampleCheck(
  out: ArrayLike<number>,
  dq: ArrayLike<number>,
  dk: ArrayLike<number>,
  dv: ArrayLike<number>,
  q: Float64Array,
  k: Float64Array,
  v: Float64Array,
  dO: Float64Array,
): Record<string, number> {
  const G = H / Hkv;
  const scale = 1 / Math.sqrt(D);
  const qo = S - T;
  const qi = (b: number, t: number, h: number) => ((b * T + t) * H + h) * D;
  const ki = (b: number, s: number, h: number) => ((b * S + s) * Hkv + h) * D;
  const err = { out: [0, 0], dq: [0, 0], dk: [0, 0], dv: [0, 0] } as Record<string, [number, number]>;
  const acc = (name: string, got: number, want: number) => {
    const e = err[name]!;
    e[0] = Math.max(e[0], Math.abs(got - want));
    e[1] = Math.max(e[1], Math.abs(want));
  };
  // softmax row, dP row, delta for (b, t, h)
  const row = (b: number, t: number, h: number) => {
    const kh = Math.floor(h / G);
    const p = new Float64Array(S);
    const cd = new Float64Array(S); // d(score) / d(scale * q.k): 1, or 1 - tanh^2 with soft-capping
    const n = causal ? Math.min(S, qo + t + 1) : S;
    const lo = window ? Math.max(0, qo + t - window + 1) : 0;
    let m = -Infinity;
    for (let s = lo; s < n; s++) {
      let a = 0;
      for (let x = 0; x < D; x++) a += q[qi(b, t, h) + x]! * k[ki(b, s, kh) + x]!;
      const th = softcap ? Math.tanh((a * scale) / softcap) : 0;
      p[s] = softcap ? softcap * th : a * scale;
      cd[s] = softcap ? 1 - th * th : 1;
      m = Math.max(m, p[s]!);
    }
    let l = 0;
    for (let s = lo; s < n; s++) l += p[s] = Math.exp(p[s]! - m);
    for (let s = lo; s < n; s++) p[s]! /= l;
    const dp = new Float64Array(S);
    let delta = 0;
    for (let s = lo; s < n; s++) {
      let a = 0;
      for (let x = 0; x < D; x++) a += dO[qi(b, t, h) + x]! * v[ki(b, s, kh) + x]!;
      dp[s] = a;
      delta += p[s]! * a;
    }
    return { p, cd, dp, delta, lo, n, kh };
  };
  const rows = [0, 1, Math.floor(T / 2) + 3, T - 1].filter((t) => t < T);
  for (const h of [0, H - 1])
    for (const t of rows) {
      const { p, cd, dp, delta, lo, n, kh } = row(0, t, h);
      for (let x = 0; x < D; x++) {
        let o = 0;
        let g = 0;
        for (let s = lo; s < n; s++) {
          o += p[s]! * v[ki(0, s, kh) + x]!;
          g += p[s]! * (dp[s]! - delta) * cd[s]! * scale * k[ki(0, s, kh) + x]!;
        }
        acc('out', out[qi(0, t, h) + x]!, o);
        acc('dq', dq[qi(0, t, h) + x]!, g);
      }
    }
  // dk, dv of a few keys of kv head 0: sum over all query rows of its q heads
  const keys = [0, Math.floor(S / 3), S - 1];
  const dkr = keys.map(() => new Float64Array(D));
  const dvr = keys.map(() => new Float64Array(D));
  for (let h = 0; h < G; h++)
    for (let t = 0; t < T; t++) {
      if (causal && qo + t < keys[0]!) continue;
      const { p, cd, dp, delta } = row(0, t, h);
      keys.forEach((s, i) => {
        if (p[s] === 0) return;
        const ds = p[s]! * (dp[s]! - delta) * cd[s]! * scale;
        for (let x = 0; x < D; x++) {
          dvr[i]![x]! += p[s]! * dO[qi(0, t, h) + x]!;
          dkr[i]![x]! += ds * q[qi(0, t, h) + x]!;
        }
      });
    }
  keys.forEach((s, i) => {
    for (let x = 0; x < D; x++) {
      acc('dk', dk[ki(0, s, 0) + x]!, dkr[i]![x]!);
      acc('dv', dv[ki(0, s, 0) + x]!, dvr[i]![x]!);
    }
  });
  const res: Record<string, number> = {};
  for (const [n, [e, m]] of Object.entries(err)) res[`${n}_relerr`] = +(m ? e / m : e).toExponential(2);
  return res;
}

if (flag('decode')) await decodeBench();
else await main();
