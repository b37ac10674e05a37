/**
 * LLM kernel benchmark: prints ONE JSON object with the effective bandwidth (bytes read + written, counted
 * as each kernel moves them, over wall time) of RMSNorm (forward, fused add, backward), RoPE, SwiGLU,
 * embedding and cross-entropy forward+backward at LLM sizes (8192 rows of 4096, a 32k and a 128k
 * vocabulary), plus a vec4 copy kernel as the reference for what the memory system gives.
 *
 *   bash ../shared/gpu/pack.sh packages/backend/src/bench/llm-bench.ts   (from the repo root)
 *   bash .gpu/run.sh llm-bench [--quick] [--iters I] [--cases a,b] [--profile] [--tune ce.max=16,sg=0]
 *
 * The GPU is first kept busy for about half a second (clocks up). Each case: warm-up, then repetitions
 * encoded back to back (at least `iters`, and enough for about 20 ms of work) and one `await ctx.sync()`,
 * repeated 3 times; the median is reported. Inputs are filled on the GPU with hashed pseudo-random values
 * (never zeros). `--profile` adds per-kernel GPU times from timestamp queries (a second context, one pass per
 * dispatch). `--tune` sets `llmTuning` (sg=0|1: subgroup reductions; <family>.<target|max|wg>=n: launch
 * shapes). `--quick`: tiny sizes for a CPU adapter.
 */
import { createContext, type Context } from '../context';
import type { DType } from '../dtype';
import { addRmsNorm, rmsNorm, rmsNormBackward, rmsNormChunks } from '../ops/llm/rmsnorm';
import { rope, ropeInvFreq } from '../ops/llm/rope';
import { swiglu, swigluBackward } from '../ops/llm/gated';
import { embedding, embeddingBackward } from '../ops/llm/embedding';
import { crossEntropy } from '../ops/llm/cross-entropy';
import { llmTuning } from '../ops/llm/common';
import { grid1d } from '../grid';
import { empty, numel, release, upload, type DeviceTensor } from '../tensor';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const gpuOnly = argv.includes('--gpu-only');
const profile = gpuOnly || argv.includes('--profile');
const arg = (name: string, dflt: number) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const ITERS = arg('--iters', quick ? 2 : 20);
const ci = argv.indexOf('--cases');
const ONLY = ci >= 0 ? new Set(argv[ci + 1]!.split(',')) : null;
const ti = argv.indexOf('--tune');
if (ti >= 0)
  for (const kv of argv[ti + 1]!.split(',')) {
    const [k, v] = kv.split('=') as [string, string];
    if (k === 'sg') llmTuning.subgroups = v !== '0';
    else if (k === 'vec2') llmTuning.vec2 = v !== '0';
    else {
      const [fam, field] = k.split('.') as [string, 'target' | 'max' | 'wg'];
      (llmTuning.shapes[fam] ??= {})[field] = Number(v);
    }
  }

const ROWS = quick ? 64 : 8192;
const D = quick ? 256 : 4096;
const INTER = quick ? 512 : 14336;
const HEADS = quick ? 4 : 32;
const HEAD_DIM = quick ? 64 : 128;
const VOCAB = quick ? 1000 : 32000;
const VOCAB_BIG = quick ? 4000 : 128256;
const ROWS_BIG = quick ? 16 : 2048;
const COPY_N = quick ? 1 << 18 : 1 << 26; // f32 elements

const FILL_WGSL = `
fn hash(x: u32) -> u32 {
  var h = x * 0x9e3779b1u + p.seed;
  h = (h ^ (h >> 16u)) * 0x85ebca6bu;
  h = (h ^ (h >> 13u)) * 0xc2b2ae35u;
  return h ^ (h >> 16u);
}
fn val(i: u32) -> f32 { return (f32(hash(i) >> 8u) * (1.0 / 16777216.0) * 2.0 - 1.0) * p.scale; }
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = g.x + g.y * p.row;
  if (t >= p.words) { return; }
  if (p.kind == 0u) { dst[t] = bitcast<u32>(val(t)); return; }
  var lo: u32; var hi: u32;
  if (p.kind == 1u) { lo = f32_to_f16_bits(val(2u * t)); hi = f32_to_f16_bits(val(2u * t + 1u)); }
  else { lo = f32_to_bf16_bits(val(2u * t)); hi = f32_to_bf16_bits(val(2u * t + 1u)); }
  dst[t] = lo | (hi << 16u);
}`;

function rand(ctx: Context, shape: number[], dtype: DType = 'f32', scale = 1, seed = 1): DeviceTensor {
  const t = empty(ctx, shape, dtype);
  const n = numel(shape);
  const kind = dtype === 'f32' ? 0 : dtype === 'f16' ? 1 : 2;
  const words = kind === 0 ? n : Math.ceil(n / 2);
  const k = ctx.kernel({
    name: 'llm-bench-fill',
    code: FILL_WGSL,
    bindings: [{ name: 'dst', access: 'rw', dtype: 'u32' }],
    params: ['u32:words', 'u32:kind', 'u32:seed', 'f32:scale', 'u32:row'],
  });
  const { wg, row } = grid1d(words, 256);
  ctx.dispatch(k, [t.buffer], wg, [words, kind, seed, scale, row]);
  return t;
}

interface Case {
  name: string;
  /** Bytes one run reads and writes. */
  bytes: number;
  run: () => void;
  /** Encode `n` runs at once (where one run per submit would cost more than the kernel). */
  batch?: (n: number) => void;
  done: () => void;
}

/** The vec4 copy reference: a raw pipeline on the context's device (array<vec4f> bindings). */
function copyCase(ctx: Context): Case {
  const dev = ctx.device;
  const src = rand(ctx, [COPY_N]);
  const dst = empty(ctx, [COPY_N]);
  const n4 = COPY_N / 4;
  const module = dev.createShaderModule({
    code: `@group(0) @binding(0) var<storage, read> s: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> d: array<vec4f>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = g.x + g.y * nw.x * 256u;
  if (i < ${n4}u) { d[i] = s[i]; }
}`,
  });
  const pipeline = dev.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const bg = dev.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: src.buffer.gpu, size: COPY_N * 4 } },
      { binding: 1, resource: { buffer: dst.buffer.gpu, size: COPY_N * 4 } },
    ],
  });
  const groups = Math.ceil(n4 / 256);
  const gy = Math.ceil(groups / 65535);
  const gx = Math.ceil(groups / gy);
  const batch = (n: number) => {
    ctx.flush();
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bg);
    for (let i = 0; i < n; i++) pass.dispatchWorkgroups(gx, gy);
    pass.end();
    dev.queue.submit([enc.finish()]);
  };
  return { name: 'copy_vec4', bytes: 8 * COPY_N, run: () => batch(1), batch, done: () => release(ctx, src, dst) };
}

function cases(ctx: Context): Case[] {
  const out: Case[] = [];
  const add = (name: string, make: () => Omit<Case, 'name'>) => {
    if (!ONLY || ONLY.has(name)) out.push({ name, ...make() });
  };
  const rd = ROWS * D;
  add('copy_vec4', () => copyCase(ctx));
  add('copy_f32', () => {
    // the same copy through the context (scalar loads, 4 per thread 256 apart): timed by --profile too
    const src = rand(ctx, [COPY_N]);
    const dst = empty(ctx, [COPY_N]);
    const k = ctx.kernel({
      name: 'llm-bench-copy',
      code: `@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_index) t: u32) {
  let b = (w.x + w.y * nw.x) * 1024u + t;
  if (b + 768u < p.n) {
    let v0 = s[b]; let v1 = s[b + 256u]; let v2 = s[b + 512u]; let v3 = s[b + 768u];
    d[b] = v0; d[b + 256u] = v1; d[b + 512u] = v2; d[b + 768u] = v3;
  }
}`,
      bindings: [
        { name: 's', access: 'read', dtype: 'f32' },
        { name: 'd', access: 'rw', dtype: 'f32' },
      ],
      params: ['u32:n'],
    });
    const groups = Math.ceil(COPY_N / 1024);
    const gy = Math.ceil(groups / 65535);
    return {
      bytes: 8 * COPY_N,
      run: () => ctx.dispatch(k, [src.buffer, dst.buffer], [Math.ceil(groups / gy), gy], [COPY_N]),
      done: () => release(ctx, src, dst),
    };
  });
  for (const dt of ['f32', 'bf16'] as const) {
    const eb = dt === 'f32' ? 4 : 2;
    add(`rmsnorm_fwd_${dt}`, () => {
      const x = rand(ctx, [ROWS, D], dt);
      const w = rand(ctx, [D], 'f32', 1, 2);
      const y = empty(ctx, [ROWS, D]);
      const rs = empty(ctx, [ROWS]);
      return {
        bytes: rd * eb + D * 4 + rd * 4 + ROWS * 4,
        run: () => void rmsNorm(ctx, x, w, { out: y, rstdOut: rs }),
        done: () => release(ctx, x, w, y, rs),
      };
    });
  }
  add('add_rmsnorm_fwd_f32', () => {
    const x = rand(ctx, [ROWS, D]);
    const r = rand(ctx, [ROWS, D], 'f32', 1, 3);
    const w = rand(ctx, [D], 'f32', 1, 2);
    const y = empty(ctx, [ROWS, D]);
    const s = empty(ctx, [ROWS, D]);
    const rs = empty(ctx, [ROWS]);
    return {
      bytes: 4 * rd * 4 + D * 4 + ROWS * 4,
      run: () => void addRmsNorm(ctx, x, r, w, { out: y, sumOut: s, rstdOut: rs }),
      done: () => release(ctx, x, r, w, y, s, rs),
    };
  });
  add('rmsnorm_bwd_f32', () => {
    const x = rand(ctx, [ROWS, D]);
    const dy = rand(ctx, [ROWS, D], 'f32', 1, 4);
    const w = rand(ctx, [D], 'f32', 1, 2);
    const { y, rstd } = rmsNorm(ctx, x, w);
    const dx = empty(ctx, [ROWS, D]);
    const dw = empty(ctx, [D]);
    const { chunks } = rmsNormChunks(ROWS);
    return {
      // dy, x read, dx written, dw partials written and read back, rstd, w, dw
      bytes: 3 * rd * 4 + 2 * chunks * D * 4 + ROWS * 4 + 2 * D * 4,
      run: () => void rmsNormBackward(ctx, dy, x, w, rstd, { dxOut: dx, dwOut: dw }),
      done: () => release(ctx, x, dy, w, y, rstd, dx, dw),
    };
  });
  add('rope_fwd_f32', () => {
    const t = ROWS;
    const x = rand(ctx, [1, t, HEADS, HEAD_DIM]);
    const inv = ropeInvFreq({ theta: 500000, headDim: HEAD_DIM });
    const invT = upload(ctx, inv, [inv.length]);
    const y = empty(ctx, [1, t, HEADS, HEAD_DIM]);
    return {
      bytes: 2 * t * HEADS * HEAD_DIM * 4,
      run: () => void rope(ctx, x, invT, { out: y }),
      done: () => release(ctx, x, invT, y),
    };
  });
  for (const dt of ['f32', 'bf16'] as const) {
    const eb = dt === 'f32' ? 4 : 2;
    const n = ROWS * INTER;
    add(`swiglu_fwd_${dt}`, () => {
      const g = rand(ctx, [ROWS, INTER], dt, 3);
      const u = rand(ctx, [ROWS, INTER], dt, 1, 5);
      const o = empty(ctx, [ROWS, INTER]);
      return { bytes: n * (2 * eb + 4), run: () => void swiglu(ctx, g, u, { out: o }), done: () => release(ctx, g, u, o) };
    });
  }
  add('swiglu_bwd_f32', () => {
    const n = ROWS * INTER;
    const g = rand(ctx, [ROWS, INTER], 'f32', 3);
    const u = rand(ctx, [ROWS, INTER], 'f32', 1, 5);
    const dy = rand(ctx, [ROWS, INTER], 'f32', 1, 6);
    const dg = empty(ctx, [ROWS, INTER]);
    const du = empty(ctx, [ROWS, INTER]);
    return {
      bytes: n * 20,
      run: () => void swigluBackward(ctx, dy, g, u, { dgateOut: dg, dupOut: du }),
      done: () => release(ctx, g, u, dy, dg, du),
    };
  });
  const ce = (name: string, rows: number, vocab: number, dt: DType) =>
    add(name, () => {
      const eb = dt === 'f32' ? 4 : 2;
      const x = rand(ctx, [rows, vocab], dt, 8);
      const ids = Array.from({ length: rows }, (_, i) => (i % 10 === 3 ? -100 : (i * 7919) % vocab));
      const tg = upload(ctx, ids, [rows], 'i32');
      const dl = empty(ctx, [rows, vocab]);
      const live = ids.filter((v) => v !== -100).length;
      let last: DeviceTensor[] = [];
      return {
        // logits of non-ignored rows read once, dlogits written for every row, targets, row losses
        bytes: live * vocab * eb + rows * vocab * 4 + rows * 16,
        run: () => {
          release(ctx, ...last);
          const r = crossEntropy(ctx, x, tg, { dlogitsOut: dl });
          last = [r.loss, r.rowLoss, r.count];
        },
        done: () => release(ctx, x, tg, dl, ...last),
      };
    });
  ce('cross_entropy_fwd_bwd_f32_32k', ROWS, VOCAB, 'f32');
  ce('cross_entropy_fwd_bwd_bf16_32k', ROWS, VOCAB, 'bf16');
  ce('cross_entropy_fwd_bwd_bf16_128k', ROWS_BIG, VOCAB_BIG, 'bf16');
  add('embedding_fwd_bf16', () => {
    const w = rand(ctx, [VOCAB, D], 'bf16');
    const ids = upload(ctx, Array.from({ length: ROWS }, (_, i) => (i * 7919) % VOCAB), [ROWS], 'i32');
    const o = empty(ctx, [ROWS, D]);
    return { bytes: ROWS * D * 6 + ROWS * 4, run: () => void embedding(ctx, ids, w, { out: o }), done: () => release(ctx, w, ids, o) };
  });
  add('embedding_bwd_f32', () => {
    const ids = upload(ctx, Array.from({ length: ROWS }, (_, i) => (i * 7919) % VOCAB), [ROWS], 'i32');
    const dy = rand(ctx, [ROWS, D]);
    const dw = empty(ctx, [VOCAB, D]);
    return {
      bytes: ROWS * D * 4 + VOCAB * D * 4,
      run: () => void embeddingBackward(ctx, ids, dy, VOCAB, { out: dw }),
      done: () => release(ctx, ids, dy, dw),
    };
  });
  return out;
}

function runN(c: Case, n: number): void {
  if (c.batch) c.batch(n);
  else for (let i = 0; i < n; i++) c.run();
}

async function timeCase(ctx: Context, c: Case): Promise<number> {
  runN(c, 2);
  await ctx.sync();
  let t0 = performance.now();
  runN(c, 2);
  await ctx.sync();
  const est = (performance.now() - t0) / 2;
  const iters = Math.max(ITERS, Math.min(2000, Math.ceil((quick ? 2 : 20) / Math.max(est, 1e-3))));
  const ms: number[] = [];
  for (let round = 0; round < 3; round++) {
    t0 = performance.now();
    runN(c, iters);
    await ctx.sync();
    ms.push((performance.now() - t0) / iters);
  }
  ms.sort((a, b) => a - b);
  return ms[1]!;
}

/** Keep the GPU busy for about `ms` so that its clocks are up before the first case. */
async function heat(ctx: Context, ms: number): Promise<void> {
  const c = copyCase(ctx);
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    c.batch!(20);
    await ctx.sync();
  }
  c.done();
}

async function main(): Promise<void> {
  const ctx = await createContext();
  await heat(ctx, quick ? 50 : 500);
  const results: Record<string, { ms: number; GBs: number; bytes: number; ofCopy?: number; gpuUs?: number; gpuGBs?: number }> = {};
  for (const c of gpuOnly ? [] : cases(ctx)) {
    const ms = await timeCase(ctx, c);
    results[c.name] = { ms: +ms.toFixed(4), GBs: +(c.bytes / ms / 1e6).toFixed(1), bytes: c.bytes };
    c.done();
    ctx.trimPool();
  }
  const copy = results.copy_vec4?.GBs;
  if (copy) for (const r of Object.values(results)) r.ofCopy = +(r.GBs / copy).toFixed(3);
  const info = ctx.info;
  ctx.destroy();
  let kernels: unknown;
  if (profile) {
    const pctx = await createContext({ profile: true });
    if (pctx.info.features.timestampQuery) {
      await heat(pctx, quick ? 50 : 300);
      kernels = {};
      for (const c of cases(pctx)) {
        runN(c, 2);
        await pctx.sync();
        await pctx.profiler.summary();
        pctx.profiler.reset();
        for (let i = 0; i < ITERS; i++) c.run();
        await pctx.sync();
        const ks = (await pctx.profiler.summary())
          .filter((k) => k.name !== 'llm-bench-fill')
          .map((k) => ({ name: k.name, us: +(k.meanUs * (k.count / ITERS)).toFixed(1) }));
        (kernels as Record<string, unknown>)[c.name] = ks;
        const us = ks.reduce((a, k) => a + k.us, 0);
        if (us > 0) {
          const r = (results[c.name] ??= { ms: NaN, GBs: NaN, bytes: c.bytes });
          r.gpuUs = +us.toFixed(1);
          r.gpuGBs = +(c.bytes / us / 1e3).toFixed(1);
        }
        pctx.profiler.reset();
        c.done();
        pctx.trimPool();
      }
    }
    pctx.destroy();
  }
  console.log(
    JSON.stringify({
      bench: 'llm',
      device: `${info.vendor} ${info.architecture} ${info.description}`.trim(),
      quick,
      tuning: llmTuning,
      sizes: { rows: ROWS, d: D, intermediate: INTER, heads: HEADS, headDim: HEAD_DIM, vocab: VOCAB, vocabBig: VOCAB_BIG, rowsBig: ROWS_BIG },
      results,
      ...(kernels ? { kernels } : {}),
    }),
  );
}

await main();
