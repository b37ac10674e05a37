/**
 * The GEMV checks, shared by `gemv.test.ts` (vitest, small shapes on any adapter) and the GPU-machine entry
 * `src/bench/quant-bench.ts --checks` (no vitest there; `gemvGpuCases`, the unrolled kernels at every row count):
 * quantized and 16-bit float weights against float64 of the same values, into NaN-poisoned outputs; `gemvGated`
 * against the activation kernel and the GEMV apart.
 */
import type { Context } from '../../context';
import type { DType } from '../../dtype';
import { download, empty, poison, release, upload, type DeviceTensor } from '../../tensor';
import { randn, relErr } from '../../testing';
import { quantSpec, type QuantSpec } from './formats';
import { geluTanhGate, swiglu, type GateActivation } from '../llm/gated';
import { gemv16, gemvGated, gemvTakesLimbs, gemvTuning, gemvTuningCopy, setGemvTuning, type GemvClass, type GemvSetting } from './gemv';
import { decodeLimbs, limbsRef, xLimbs } from './x-limbs';
import { rmsNorm } from '../llm/rmsnorm';
import { copy } from '../core/transpose';
import { quantLinear } from './qmatmul';
import { dequantizeRef } from './quant.ref';
import { quantize, releaseQuant } from './quantize';
import { gemvParts } from './gemv-parts';
import { name, readQuant, weights } from './quant.test-util';

export interface GemvCase {
  /** A quantized format, or a float weight (gemv16). */
  w: QuantSpec | 'f16' | 'bf16' | 'f32';
  M: number;
  N: number;
  K: number;
  x?: DType;
  bias?: boolean;
  tune?: GemvTune;
  /** Run `gemvParts` over weights of these out_features (N is ignored), each against its own reference. */
  parts?: number[];
  /** Run `gemvGated` (x = act(gate) * up) against the activation kernel and the same GEMV apart: the error is
   *  their difference (0 where they agree bit for bit). */
  gated?: GateActivation;
  /** Multiply on x's int8 limbs (`xLimbs`, or with 'norm' those `rmsNorm` writes of x, the GEMV's x then the norm's
   *  output; one row, int4): against float64 of the values the limbs hold, with x itself poisoned (NaN) before the
   *  GEMV runs, so that a kernel reading x instead fails. The limbs must be the host's (`limbsRef`) bit for bit. */
  limbs?: boolean | 'norm';
}

/** A change of {@link gemvTuning} for one case: `few` applies to the classes `one` and `few` (every M below
 *  manyFrom; and to `oneSmall`), `many` to `many`; both to quantized and 16-bit float weights alike. */
export interface GemvTune {
  few?: Partial<GemvSetting>;
  many?: Partial<GemvSetting>;
  unroll?: boolean;
  decode?: 'mask' | 'shift';
  /** A change of `gemvTuning.limbs` (the integer int4 GEMV's layout). */
  limbs?: Partial<GemvSetting>;
  limbsDecode?: 'offset' | 'signed';
}

/** Run f with `tune` applied to {@link gemvTuning}, restored after. */
export async function withGemvTune<T>(tune: GemvTune | undefined, f: () => Promise<T>): Promise<T> {
  const saved = gemvTuningCopy();
  if (tune?.few) for (const set of [gemvTuning.one, gemvTuning.few, gemvTuning.float.one, gemvTuning.float.few, ...(gemvTuning.oneSmall ? [gemvTuning.oneSmall.set] : [])]) Object.assign(set, tune.few);
  if (tune?.many) for (const set of [gemvTuning.many, gemvTuning.float.many]) Object.assign(set, tune.many);
  if (tune?.unroll !== undefined) gemvTuning.unroll = tune.unroll;
  if (tune?.decode) gemvTuning.decode = tune.decode;
  if (tune?.limbs) gemvTuning.limbs = { ...gemvTuning.limbs!, ...tune.limbs };
  if (tune?.limbsDecode) gemvTuning.limbsDecode = tune.limbsDecode;
  try {
    return await f();
  } finally {
    setGemvTuning(saved);
  }
}

/** Relative error a GEMV result must stay under (f32 accumulation in another order than float64). */
export const GEMV_TOL = 2e-6;

export function gemvCaseName(c: GemvCase): string {
  const w = typeof c.w === 'string' ? c.w : name(c.w);
  const n = c.parts ? c.parts.join('+') : `${c.N}`;
  return `${c.parts ? 'parts ' : ''}${c.gated ? `gated ${c.gated} ` : ''}${c.limbs ? 'limbs ' : ''}${w} [${c.M}, ${c.K}] x [${n}, ${c.K}]^T x ${c.x ?? 'f32'}${c.bias ? ' bias' : ''}${c.tune ? ' ' + JSON.stringify(c.tune) : ''}`;
}

/** x W^T (+ b) in float64, W [N, K]. */
export function refLinear(x: ArrayLike<number>, w: ArrayLike<number>, b: ArrayLike<number> | null, M: number, N: number, K: number): Float64Array {
  const y = new Float64Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = b ? b[n]! : 0;
      for (let k = 0; k < K; k++) s += x[m * K + k]! * w[n * K + k]!;
      y[m * N + n] = s;
    }
  return y;
}

/** Run one GEMV (quantLinear's gemv variant, or gemv16; with `parts`, gemvParts) and return its relative error
 *  against float64 (the largest of the parts'). */
export async function runGemvCase(ctx: Context, c: GemvCase): Promise<number> {
  const { M, N, K } = c;
  if (c.parts) return withGemvTune(c.tune, () => runParts(ctx, c, c.parts!));
  if (c.gated) return withGemvTune(c.tune, () => runGated(ctx, c, c.gated!));
  return withGemvTune(c.tune, async () => {
    const xt = upload(ctx, randn(M * K, M + K + 5), [M, K], c.x ?? 'f32');
    const { x, xl } = await limbsOf(ctx, c, xt);
    const bias = c.bias ? upload(ctx, randn(N, 3), [N], 'f16') : undefined;
    const b = bias ? Float64Array.from(await download(ctx, bias)) : null;
    const out = empty(ctx, [M, N]);
    poison(ctx, out);
    let w: Float64Array;
    if (typeof c.w === 'string') {
      const wt = upload(ctx, randn(N * K, N, 0.1), [N, K], c.w);
      w = Float64Array.from(await download(ctx, wt));
      gemv16(ctx, xt, wt, { bias, out });
      release(ctx, wt);
    } else {
      const wt = upload(ctx, weights(N, K, N + K), [N, K]);
      const q = quantize(ctx, wt, c.w);
      w = dequantizeRef(c.w, await readQuant(ctx, q));
      if (xl && !gemvTakesLimbs(ctx, q, M)) throw new Error(`the GEMV does not take limbs for ${gemvCaseName(c)}`);
      quantLinear(ctx, xt, q, { bias, out, variant: 'gemv', xLimbs: xl });
      release(ctx, wt);
      releaseQuant(ctx, q);
    }
    const err = relErr(await download(ctx, out), refLinear(x, w, b, M, N, K));
    release(ctx, xt, out, ...(bias ? [bias] : []), ...(xl ? [xl] : []));
    return err;
  });
}

/** x's values in float64: as stored, or with `c.limbs` those its limbs hold (then x is poisoned, and the limbs
 *  returned; with 'norm', x is first replaced by its RMSNorm, whose dispatch writes the limbs). */
async function limbsOf(ctx: Context, c: GemvCase, xt: DeviceTensor): Promise<{ x: Float64Array; xl?: DeviceTensor }> {
  if (!c.limbs) return { x: Float64Array.from(await download(ctx, xt)) };
  let xl: DeviceTensor;
  if (c.limbs === 'norm') {
    const w = upload(ctx, randn(c.K, 17), [c.K]);
    const r = rmsNorm(ctx, xt, w, { limbs: true });
    copy(ctx, r.y, { out: xt });
    release(ctx, w, r.y, r.rstd);
    xl = r.limbs!;
  } else xl = xLimbs(ctx, xt);
  const words = (await download(ctx, xl)) as Uint32Array;
  const want = limbsRef(await download(ctx, xt), c.K);
  const bad = want.findIndex((v, i) => v !== words[i]);
  if (bad >= 0) throw new Error(`limbs word ${bad}: ${words[bad]} where the host writes ${want[bad]}`);
  poison(ctx, xt);
  return { x: decodeLimbs(words, c.K), xl };
}

/** gemvGated against the activation kernel and the GEMV apart (quantLinear's gemv variant or gemv16). */
async function runGated(ctx: Context, c: GemvCase, act: GateActivation): Promise<number> {
  const { M, N, K } = c;
  const gate = upload(ctx, randn(M * K, M + K + 7, 2), [M, K]);
  const up = upload(ctx, randn(M * K, M + K + 8), [M, K]);
  const bias = c.bias ? upload(ctx, randn(N, 3), [N], 'f16') : undefined;
  const wt = upload(ctx, typeof c.w === 'string' ? randn(N * K, N, 0.1) : weights(N, K, N + K), [N, K], typeof c.w === 'string' ? c.w : 'f32');
  const q = typeof c.w === 'string' ? null : quantize(ctx, wt, c.w);
  const a = act === 'silu' ? swiglu(ctx, gate, up) : geluTanhGate(ctx, gate, up);
  const apart = q ? quantLinear(ctx, a, q, { bias, variant: 'gemv' }) : gemv16(ctx, a, wt, { bias });
  const fused = gemvGated(ctx, gate, up, act, q ?? wt, { bias });
  if (!fused) throw new Error(`gemvGated refused ${gemvCaseName(c)}`);
  const err = relErr(await download(ctx, fused), await download(ctx, apart));
  release(ctx, gate, up, wt, a, apart, fused, ...(bias ? [bias] : []));
  if (q) releaseQuant(ctx, q);
  return err;
}

/** gemvParts over weights of out_features `Ns`: each result (a sub-buffer of one poisoned buffer) against float64. */
async function runParts(ctx: Context, c: GemvCase, Ns: number[]): Promise<number> {
  const { M, K } = c;
  const xt = upload(ctx, randn(M * K, M + K + 5), [M, K], c.x ?? 'f32');
  const { x, xl } = await limbsOf(ctx, c, xt);
  const made = Ns.map((N, j) => {
    const wt = upload(ctx, typeof c.w === 'string' ? randn(N * K, N + j, 0.1) : weights(N, K, N + K + j), [N, K], typeof c.w === 'string' ? c.w : 'f32');
    const bias = c.bias ? upload(ctx, randn(N, 3 + j), [N], j % 2 ? 'f32' : 'f16') : undefined;
    return { N, wt, bias, q: typeof c.w === 'string' ? null : quantize(ctx, wt, c.w) };
  });
  const parts = made.map((m) => ({ weight: m.q ?? m.wt, bias: m.bias }));
  // a first run's results poisoned and released: the second run takes the same pool buffer, so an output it
  // failed to write reads NaN
  if (xl && !gemvTakesLimbs(ctx, made[0]!.q!, M)) throw new Error(`the GEMV does not take limbs for ${gemvCaseName(c)}`);
  const first = gemvParts(ctx, xt, parts, { xLimbs: xl });
  for (const y of first) poison(ctx, y);
  release(ctx, ...first);
  const ys = gemvParts(ctx, xt, parts, { xLimbs: xl });
  if (ys[0]!.buffer.gpu !== first[0]!.buffer.gpu) throw new Error('gemvParts case: the second run got another buffer (the poison would not be read)');
  let err = 0;
  for (const [j, m] of made.entries()) {
    const w = m.q ? dequantizeRef(c.w as QuantSpec, await readQuant(ctx, m.q)) : Float64Array.from(await download(ctx, m.wt));
    const b = m.bias ? Float64Array.from(await download(ctx, m.bias)) : null;
    err = Math.max(err, relErr(await download(ctx, ys[j]!), refLinear(x, w, b, M, m.N, K)));
  }
  release(ctx, xt, ...ys, ...(xl ? [xl] : []));
  for (const m of made) {
    release(ctx, m.wt, ...(m.bias ? [m.bias] : []));
    if (m.q) releaseQuant(ctx, m.q);
  }
  return err;
}

const mainLayout = (rows: number, threads: number, prefetch = false, chunkWords?: 1 | 2): GemvSetting => ({ rows, threads, subgroupRows: false, ...(prefetch ? { prefetch } : {}), ...(chunkWords ? { chunkWords } : {}) });
const rowsLayout = (rows: number, threads: number, prefetch = false): GemvSetting => ({ rows, threads, subgroupRows: true, ...(prefetch ? { prefetch } : {}) });

/** The layouts `quant-bench --gemv` sweeps for each class of row counts (timed at 1, 4 and 16 rows): those that
 *  won or came close in the H100 sweeps of 2026-11-24 (docs/PERFORMANCE.md; main_rows with 4, 8 or 16 lanes per
 *  row, and main with 1 or 2 rows, lost everywhere and are gone); every one is in the GPU check list. */
export const GEMV_SWEEP_LAYOUTS: Record<GemvClass, GemvSetting[]> = {
  one: [
    ...[8, 16].flatMap((r) => [64, 128, 256].map((t) => mainLayout(r, t))), mainLayout(4, 256), mainLayout(8, 64, true), rowsLayout(8, 128, true),
    ...[1, 2].flatMap((cw) => [mainLayout(8, 128, false, cw as 1 | 2), mainLayout(8, 256, false, cw as 1 | 2), mainLayout(4, 256, false, cw as 1 | 2), mainLayout(16, 128, false, cw as 1 | 2)]),
    mainLayout(8, 128, true, 2), mainLayout(8, 64, true, 2), mainLayout(8, 64, false, 2), mainLayout(4, 128, true, 2), mainLayout(8, 64, true, 1), mainLayout(12, 128, false, 2),
  ],
  few: [
    ...[4, 8].flatMap((r) => [64, 128].map((t) => mainLayout(r, t))), mainLayout(8, 64, true), rowsLayout(8, 128), rowsLayout(8, 128, true),
    ...[1, 2].flatMap((cw) => [mainLayout(8, 64, false, cw as 1 | 2), mainLayout(8, 128, false, cw as 1 | 2), mainLayout(4, 128, false, cw as 1 | 2)]),
    mainLayout(4, 128, true, 1), mainLayout(4, 64, false, 1), mainLayout(2, 128, false, 1), mainLayout(4, 256, false, 1),
  ],
  many: [mainLayout(4, 0), mainLayout(4, 0, true), ...[2, 4].flatMap((r) => [128, 256].flatMap((t) => [rowsLayout(r, t), rowsLayout(r, t, true)]))],
};

/** A layout's name in benchmark output. */
export function gemvLayoutName(v: GemvSetting): string {
  return `${v.subgroupRows ? 'rows' : 'main'} r${v.rows} t${v.threads}${v.prefetch ? ' pf' : ''}${v.chunkWords && v.chunkWords !== 4 ? ` cw${v.chunkWords}` : ''}`;
}

/** The GPU check list: every format at 1, 4, 7 and 16 rows, odd and multiple-of-block sizes, and each layout the
 *  benchmark sweeps (entry point, rows, threads, prefetch) on quantized and f16 weights. */
export function gemvGpuCases(): GemvCase[] {
  const cases: GemvCase[] = [];
  const ws: GemvCase['w'][] = [quantSpec('int4', 64), quantSpec('int4', 32), quantSpec('int4', 128), quantSpec('nf4', 64), quantSpec('nf4', 64, true), quantSpec('int8', 0), quantSpec('int8', 32), 'f16', 'bf16', 'f32'];
  for (const w of ws)
    for (const M of [1, 4, 7, 16]) {
      cases.push({ w, M, N: 301, K: 1024, bias: M === 4 });
      cases.push({ w, M, N: 77, K: 1000, x: M === 7 ? 'f16' : 'f32' });
    }
  const i4 = quantSpec('int4', 64);
  // chunks of 2 and 1 words: every format, 1 and 4 rows, odd sizes
  for (const chunkWords of [1, 2] as const)
    for (const w of [i4, quantSpec('int4', 32), quantSpec('nf4', 64), quantSpec('int8', 0), quantSpec('int8', 32), 'f16' as const, 'bf16' as const])
      for (const M of [1, 4]) cases.push({ w, M, N: 301, K: 1000, bias: M === 4, tune: { few: { rows: 8, threads: 64, subgroupRows: false, chunkWords } } });
  // the shift decode (the default is 'mask'), int4 and int8
  for (const w of [i4, quantSpec('int4', 32), quantSpec('int8', 0), quantSpec('int8', 32)])
    for (const M of [1, 4, 16]) cases.push({ w, M, N: 301, K: 1000, bias: M === 4, tune: { decode: 'shift' } });
  // entry main: rows per workgroup x threads (more in the swept layouts below), more outputs than threads
  for (const rows of [1, 2])
    for (const threads of [64, 128, 256]) cases.push({ w: i4, M: 1, N: 263, K: 4096, tune: { few: { rows, threads, subgroupRows: false } } });
  cases.push({ w: i4, M: 16, N: 50, K: 256, tune: { many: { rows: 4, threads: 32, subgroupRows: false } } }); // 64 outputs, 32 threads
  // entry main_rows, with and without prefetch: every format, odd sizes
  for (const w of [i4, quantSpec('nf4', 64), quantSpec('int8', 0), 'f16' as const])
    for (const M of [1, 4, 16])
      for (const prefetch of [false, true]) cases.push({ w, M, N: 301, K: 1000, bias: M === 4, tune: { few: { subgroupRows: true, prefetch }, many: { subgroupRows: true, prefetch } } });
  // each swept layout at its row count, int4 and f16, odd sizes
  for (const [cls, M] of [['one', 1], ['few', 4], ['many', 16]] as const)
    for (const set of GEMV_SWEEP_LAYOUTS[cls]) {
      const tune = cls === 'many' ? { many: set } : { few: set };
      cases.push({ w: i4, M, N: 263, K: 4096, tune }, { w: 'f16', M: M === 4 ? 3 : M, N: 77, K: 1000, tune });
    }
  // gemvParts: q/k/v-like and gate/up-like parts of every format, 1, 4 and 16 rows, odd sizes (workgroups across
  // part boundaries), with and without biases, and the swept one-row layouts
  for (const w of ws)
    for (const M of [1, 4, 16]) {
      // (no biases beside double-quantized scales: 17 storage buffers, past the 16 of the H100 and lavapipe;
      // gemvPartsProblem refuses that, tested in the graph package)
      cases.push({ w, M, N: 0, K: 1024, parts: [301, 77, 77], bias: M === 4 && !(typeof w !== 'string' && w.doubleQuant) });
      cases.push({ w, M, N: 0, K: 1000, parts: [263, 263] });
    }
  for (const set of GEMV_SWEEP_LAYOUTS.one) cases.push({ w: i4, M: 1, N: 0, K: 4096, parts: [263, 65, 65], tune: { few: set } });
  // the integer int4 GEMV on x's limbs: every block size, layouts (rows, threads, chunks of 2 and 4 words,
  // prefetch), odd N, K a multiple of 16 but not 32 (chunks of 4 words fall back to 2), parts with and without bias
  for (const w of [i4, quantSpec('int4', 32), quantSpec('int4', 128)])
    for (const K of [4096, 1008]) cases.push({ w, M: 1, N: 301, K, bias: K === 1008, limbs: true }, { w, M: 1, N: 0, K, parts: [301, 77, 77], bias: K === 4096, limbs: true });
  for (const rows of [1, 2, 4, 8, 12, 16])
    for (const threads of [64, 128, 256])
      for (const chunkWords of [2, 4] as const) cases.push({ w: i4, M: 1, N: 263, K: 4096, limbs: true, tune: { limbs: { rows, threads, chunkWords, prefetch: rows === 4 } } });
  cases.push({ w: i4, M: 1, N: 0, K: 4096, parts: [263, 263], limbs: true, tune: { limbs: { rows: 8, threads: 64, chunkWords: 2 } } });
  // limbs written by the RMSNorm (rows of 4096 as in a 7B model, and odd lengths), alone and for parts
  for (const K of [4096, 1008, 5120]) cases.push({ w: i4, M: 1, N: 301, K, limbs: 'norm' }, { w: i4, M: 1, N: 0, K, parts: [301, 77], limbs: 'norm' });
  // the other way to the codes' offset (gemvTuning.limbsDecode 'signed')
  for (const chunkWords of [2, 4] as const) cases.push({ w: i4, M: 1, N: 263, K: 4096, limbs: true, tune: { limbs: { rows: 4, threads: 128, chunkWords }, limbsDecode: 'signed' } });
  cases.push({ w: quantSpec('int4', 32), M: 1, N: 0, K: 1008, parts: [301, 77, 77], bias: true, limbs: true, tune: { limbsDecode: 'signed' } });
  // gemvGated: every format, 1 and 4 rows, 16-byte and scalar x loads (K % 4 = 2), both activations, a bias
  for (const w of ws)
    for (const M of [1, 4]) {
      cases.push({ w, M, N: 301, K: 1024, gated: M === 1 ? 'silu' : 'gelu_tanh', bias: M === 4 });
      cases.push({ w, M, N: 77, K: 1002, gated: M === 1 ? 'gelu_tanh' : 'silu' });
    }
  return cases;
}
