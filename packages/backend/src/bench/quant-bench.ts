/**
 * Quantized weights on the GPU machine (a program, not a test). Prints ONE JSON object:
 * - `adapter`: the adapter and its subgroup-matrix configurations, with the int8 ones (i8/u8 -> i32/u32) apart;
 * - `copy`: the vec4 copy kernel's bandwidth (bytes read + written), the yardstick of the GEMV;
 * - `memory`: GPU bytes of the 1.1B configuration's linear weights (TinyLlama: hidden 2048, intermediate 5632,
 *   22 layers, 4 KV heads of 64) quantized on the GPU per format, measured from the pool (size classes included)
 *   and exact, against f32; and the
 *   whole model's ratio with the embeddings and LM head (32000 x 2048 each) kept in bf16;
 * - `gemv`: the decode shape (1 and 16 rows) per format: GPU time, bytes read (codes + scales + x), GB/s, and
 *   the f16-weight GEMV of the same shape through `matmul` for comparison;
 * - `tiled`: the fused dequant-matmul (`tiled`) and dequantize-then-matmul (`dequant`) forward and input gradient
 *   at training shape, TFLOP/s beside the f32 and f16-weight `matmul` (all kernels of a call summed).
 * - `int8TensorCores`: an i8 x i8 -> i32 subgroup-matrix probe kernel's TOPS at 4096^3 (sampled exact check)
 *   beside the f16 `matmul` TFLOP/s of the same shape, or why it is unavailable.
 * Each fused result is checked against `matmul` on the dequantized weight (relative error printed).
 *
 *   bash .gpu/run.sh quant-bench [--quick] [--reps=N]
 */
import i8ProbeWgsl from '../../../../shaders/quant-i8-probe.wgsl';
import { createContext, type Context } from '../context';
import { matmul } from '../ops/core/matmul';
import { copy } from '../ops/core/transpose';
import { quantBytes, quantSpec, type QuantSpec } from '../ops/quant/formats';
import { quantLinear, quantLinearBackward } from '../ops/quant/qmatmul';
import { dequantize, quantize, releaseQuant } from '../ops/quant/quantize';
import { download, empty, release, upload, uploadBytes, type DeviceTensor } from '../tensor';
import { relErr, rng } from '../testing';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const reps = Number(args.find((a) => a.startsWith('--reps='))?.split('=')[1] ?? (quick ? 3 : 20));
const log = (s: string) => process.stderr.write(s + '\n');

function randomData(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (2 * r() - 1) * scale;
  return x;
}

/** GPU time (s) per call of f: the profiler's time of every kernel f dispatches (the names are for the log), or
 *  wall time without timestamp queries. */
async function gpuTime(ctx: Context, names: string[], f: () => void): Promise<number> {
  for (let i = 0; i < 2; i++) f();
  await ctx.sync();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) f();
  await ctx.sync();
  const wall = (performance.now() - t0) / 1e3 / reps;
  if (!ctx.profiler.enabled) return wall;
  ctx.profiler.reset();
  for (let i = 0; i < reps; i++) f();
  await ctx.sync();
  const entries = await ctx.profiler.summary();
  if (process.env.QUANT_BENCH_KERNELS) log(`${names[0]}: ${entries.map((e) => e.name).join(', ')}`);
  const sum = entries.reduce((s, e) => s + (e.meanUs * e.count) / reps, 0);
  return sum > 0 ? sum / 1e6 : wall;
}

const SPECS: [string, QuantSpec][] = [
  ['int8-row', quantSpec('int8', 0)],
  ['int4-g64', quantSpec('int4', 64)],
  ['nf4-g64', quantSpec('nf4', 64)],
  ['nf4-g64-dq', quantSpec('nf4', 64, true)],
];

async function main() {
  const ctx = await createContext({ profile: true });
  const info = ctx.info;
  const out: Record<string, unknown> = { date: new Date().toISOString(), quick, reps };
  const configs = (info.subgroupMatrixConfigs ?? []) as unknown as Record<string, unknown>[];
  out.adapter = {
    vendor: info.vendor,
    architecture: info.architecture,
    description: info.description,
    isSoftware: info.isSoftware,
    features: info.features,
    subgroupMatrixConfigs: configs,
    int8SubgroupMatrix: configs.filter((c) => /^[iu]8$/.test(String(c.componentType))),
  };
  log(`adapter: ${info.description} (${info.vendor}); int8 subgroup matrices: ${JSON.stringify((out.adapter as { int8SubgroupMatrix: unknown }).int8SubgroupMatrix)}`);

  // copy bandwidth
  {
    const n = quick ? 1 << 20 : 1 << 28; // f32 elements: 1 GiB
    const src = empty(ctx, [n]);
    const dst = empty(ctx, [n]);
    const s = await gpuTime(ctx, ['transpose-copy'], () => copy(ctx, src, { out: dst }));
    out.copy = { bytes: 8 * n, ms: s * 1e3, GBps: (8 * n) / s / 1e9 };
    release(ctx, src, dst);
    log(`copy: ${((8 * n) / s / 1e9).toFixed(0)} GB/s`);
  }

  // weight memory of the 1.1B configuration
  {
    const h = quick ? 256 : 2048;
    const inter = quick ? 704 : 5632;
    const layers = quick ? 2 : 22;
    const kv = quick ? 32 : 256;
    const shapes: [number, number][] = [
      [h, h],
      [kv, h],
      [kv, h],
      [h, h],
      [inter, h],
      [inter, h],
      [h, inter],
    ];
    const src = new Map<string, DeviceTensor>();
    for (const [N, K] of shapes) if (!src.has(`${N}x${K}`)) src.set(`${N}x${K}`, upload(ctx, randomData(N * K, N + K, 0.02), [N, K], 'bf16'));
    const linearParams = layers * shapes.reduce((s, [N, K]) => s + N * K, 0);
    const embed = 2 * 32000 * h;
    const mem: Record<string, unknown> = { linearParams, f32Bytes: 4 * linearParams };
    for (const [name, spec] of SPECS) {
      await ctx.sync();
      const before = ctx.memory.live;
      const qs = [];
      for (let l = 0; l < layers; l++) for (const [N, K] of shapes) qs.push(quantize(ctx, src.get(`${N}x${K}`)!, spec));
      await ctx.sync();
      const bytes = ctx.memory.live - before;
      const exact = layers * shapes.reduce((t, [N, K]) => t + quantBytes(spec, N, K), 0);
      mem[name] = {
        bytes,
        exactBytes: exact,
        ratioLinearsExact: exact / (4 * linearParams),
        ratioLinears: bytes / (4 * linearParams),
        ratioWholeModel: (bytes + 2 * embed) / (4 * (linearParams + embed)),
      };
      for (const q of qs) releaseQuant(ctx, q);
      ctx.trimPool();
    }
    for (const t of src.values()) release(ctx, t);
    out.memory = mem;
    log(`memory: ${JSON.stringify(mem)}`);
  }

  // decode GEMV
  {
    const shapes: [number, number][] = quick ? [[256, 512]] : [[5632, 2048], [4096, 4096], [14336, 4096]];
    const rows = [];
    for (const [N, K] of shapes) {
      const w = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
      for (const M of [1, 16]) {
        const x = upload(ctx, randomData(M * K, 9), [M, K]);
        const yF16 = empty(ctx, [M, N]);
        const tF16 = await gpuTime(ctx, ['matmul-v0', 'matmul-v1', 'matmul-v4', 'matmul-v5'], () => matmul(ctx, x, w, { transB: true, out: yF16 }));
        const ref = await download(ctx, yF16);
        for (const [name, spec] of SPECS) {
          const q = quantize(ctx, w, spec);
          const wd = dequantize(ctx, q);
          const refQ = await download(ctx, matmul(ctx, x, wd, { transB: true }));
          const y = empty(ctx, [M, N]);
          const t = await gpuTime(ctx, ['dequant-gemv', 'dequant-dq-scales'], () => quantLinear(ctx, x, q, { out: y, variant: 'gemv' }));
          const err = relErr(await download(ctx, y), refQ);
          const codeBytes = N * q.layout.wpr * 4;
          const scaleBytes = spec.doubleQuant ? N * q.layout.nb * (1 + 4 / 256) : N * q.layout.nb * (q.layout.scaleDtype === 'f16' ? 2 : 4);
          const read = codeBytes + scaleBytes + M * K * 4;
          rows.push({
            N, K, M, format: name,
            us: t * 1e6,
            bytesRead: read,
            GBps: read / t / 1e9,
            f16us: tF16 * 1e6,
            speedupVsF16: tF16 / t,
            relErrVsDequantMatmul: err,
            quantNoiseVsF16: relErr(refQ, ref),
          });
          log(`gemv ${name} [${M}x${K}]x[${N}x${K}]^T: ${(t * 1e6).toFixed(1)} us, ${(read / t / 1e9).toFixed(0)} GB/s, f16 ${(tF16 * 1e6).toFixed(1)} us`);
          releaseQuant(ctx, q);
          release(ctx, wd, y);
        }
        release(ctx, x, yF16);
      }
      release(ctx, w);
    }
    out.gemv = rows;
  }

  // training shape
  {
    const [M, N, K] = quick ? [256, 704, 256] : [4096, 5632, 2048];
    const flops = 2 * M * N * K;
    const w32 = upload(ctx, randomData(N * K, 3, 0.02), [N, K]);
    const w16 = upload(ctx, randomData(N * K, 3, 0.02), [N, K], 'f16');
    const x = upload(ctx, randomData(M * K, 4), [M, K]);
    const dy = upload(ctx, randomData(M * N, 5), [M, N]);
    const y = empty(ctx, [M, N]);
    const dx = empty(ctx, [M, K]);
    const mm = ['matmul-v0', 'matmul-v1', 'matmul-v4', 'matmul-v5'];
    const t32 = await gpuTime(ctx, mm, () => matmul(ctx, x, w32, { transB: true, out: y }));
    const t16 = await gpuTime(ctx, mm, () => matmul(ctx, x, w16, { transB: true, out: y }));
    const tb32 = await gpuTime(ctx, mm, () => matmul(ctx, dy, w32, { out: dx }));
    const rows: Record<string, unknown>[] = [{ format: 'f32-weight', fwdTflops: flops / t32 / 1e12, bwdTflops: flops / tb32 / 1e12 }, { format: 'f16-weight', fwdTflops: flops / t16 / 1e12 }];
    const all = ['dequant-matmul', 'dequant-dq-scales', 'dequant-weight', ...mm, 'matmul-tc'];
    for (const [name, spec] of SPECS) {
      const q = quantize(ctx, w32, spec);
      const wd = dequantize(ctx, q);
      const refF = await download(ctx, matmul(ctx, x, wd, { transB: true }));
      const refB = await download(ctx, matmul(ctx, dy, wd));
      for (const variant of ['tiled', 'dequant'] as const) {
        const tf = await gpuTime(ctx, all, () => quantLinear(ctx, x, q, { out: y, variant }));
        const errF = relErr(await download(ctx, y), refF);
        const tb = await gpuTime(ctx, all, () => quantLinearBackward(ctx, dy, q, dx, variant));
        const errB = relErr(await download(ctx, dx), refB);
        rows.push({ format: name, variant, fwdTflops: flops / tf / 1e12, bwdTflops: flops / tb / 1e12, fwdMs: tf * 1e3, bwdMs: tb * 1e3, relErrFwd: errF, relErrBwd: errB });
        log(`${variant} ${name}: fwd ${(flops / tf / 1e12).toFixed(2)} TFLOP/s, bwd ${(flops / tb / 1e12).toFixed(2)}`);
      }
      releaseQuant(ctx, q);
      release(ctx, wd);
    }
    out.tiled = { M, N, K, rows };
  }
  // the probe last: the JSON so far goes to the log first, in case the probe does not return
  log(`results before the int8 probe: ${JSON.stringify(out)}`);
  out.int8TensorCores = await int8Probe(ctx, configs);
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  ctx.destroy();
}

/**
 * The int8 tensor-core probe (shaders/quant-i8-probe.wgsl) at 4096^3 beside the f16 `matmul` of the same shape:
 * TOPS, and a sampled check of the i32 results against the host. Any failure is reported, not thrown.
 */
async function int8Probe(ctx: Context, configs: Record<string, unknown>[]): Promise<unknown> {
  const cfg = configs.find((c) => c.componentType === 'i8' && c.resultComponentType === 'i32');
  if (!cfg) return { available: false, reason: 'the adapter offers no i8 -> i32 subgroup-matrix configuration' };
  const S = quick ? 256 : 4096;
  const res: Record<string, unknown> = { available: true, config: cfg, shape: [S, S, S] };
  try {
    const [SM, SN, SK] = [Number(cfg.M), Number(cfg.N), Number(cfg.K)];
    const SG = ctx.info.subgroupSizes?.max ?? 32;
    const r = rng(5);
    const a8 = new Int8Array(S * S).map(() => Math.floor(r() * 255) - 127);
    const b8 = new Int8Array(S * S).map(() => Math.floor(r() * 255) - 127);
    const a = uploadBytes(ctx, a8, [S, S / 4], 'i32');
    const b = uploadBytes(ctx, b8, [S, S / 4], 'i32');
    const c = empty(ctx, [S, S], 'i32');
    const k = await ctx.compile({
      name: 'quant-i8-probe',
      code:
        `const SM: u32 = ${SM}u;\nconst SN: u32 = ${SN}u;\nconst SK: u32 = ${SK}u;\nconst SG: u32 = ${SG}u;\n` +
        `alias Lm = subgroup_matrix_left<i8, ${SK}, ${SM}>;\nalias Rm = subgroup_matrix_right<i8, ${SN}, ${SK}>;\n` +
        `alias Acc = subgroup_matrix_result<i32, ${SN}, ${SM}>;\n` +
        i8ProbeWgsl,
      bindings: [
        { name: 'a', access: 'read', dtype: 'i32' },
        { name: 'b', access: 'read', dtype: 'i32' },
        { name: 'c', access: 'rw', dtype: 'i32' },
      ],
      params: ['u32:M', 'u32:N', 'u32:K'],
      enables: ['subgroups', 'chromium_experimental_subgroup_matrix'],
    });
    const run = () => ctx.dispatch(k, [a.buffer, b.buffer, c.buffer], [S / SN, S / SM, 1], [S, S, S]);
    const t = await gpuTime(ctx, ['quant-i8-probe'], run);
    const got = (await download(ctx, c)) as Int32Array;
    let bad = 0;
    const rr = rng(9);
    for (let s = 0; s < 64; s++) {
      const i = Math.floor(rr() * S);
      const j = Math.floor(rr() * S);
      let want = 0;
      for (let x = 0; x < S; x++) want += a8[i * S + x]! * b8[j * S + x]!;
      if (got[i * S + j] !== want) bad++;
    }
    res.tops = (2 * S * S * S) / t / 1e12;
    res.ms = t * 1e3;
    res.sampledMismatches = bad;
    release(ctx, a, b, c);
  } catch (e) {
    res.error = String((e as Error).message ?? e).slice(0, 500);
  }
  try {
    const a16 = upload(ctx, randomData(S * S, 1), [S, S], 'f16');
    const b16 = upload(ctx, randomData(S * S, 2), [S, S], 'f16');
    const c32 = empty(ctx, [S, S]);
    const t = await gpuTime(ctx, ['matmul'], () => matmul(ctx, a16, b16, { transB: true, out: c32 }));
    res.f16MatmulTflops = (2 * S * S * S) / t / 1e12;
    release(ctx, a16, b16, c32);
  } catch (e) {
    res.f16Error = String((e as Error).message ?? e).slice(0, 300);
  }
  return res;
}

main().catch((e) => {
  process.stderr.write(`quant-bench: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
