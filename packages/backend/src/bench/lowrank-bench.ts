/**
 * LoRA's low-rank products on the GPU machine (a program, not a test): `lowRankProject` (x A^T, dY B),
 * `lowRankOuter` (dA = v^T x, dB = dY^T u) per kernel variant, and `lowRankUpdate` (y += s u B^T) beside
 * matmul's accumulate, at the 1.1B LoRA step's shapes (2048 tokens, K in {2048, 256, 5632}, r 16; the big operand
 * f16 as under f16 autocast). GPU time from the profiler (kernel and finish pass) after a 1 s spin-up, GB/s of
 * the big operand, and each variant's largest relative difference from variant 1. Prints ONE JSON object.
 *   bash .gpu/run.sh lowrank-bench [--reps=50] [--quick]
 */
import { createContext, type Context } from '../context';
import { matmul } from '../ops/core/matmul';
import { lowRankOuter, lowRankProject, lowRankTuning, lowRankUpdate } from '../ops/core/lowrank';
import { download, release, upload, type DeviceTensor } from '../tensor';
import { randn, relErr } from '../testing';

const args = process.argv.slice(2);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = args.includes('--quick');
const reps = Number(opt('reps') ?? (quick ? 3 : 50));
const log = (s: string) => process.stderr.write(s + '\n');

async function time(gpu: Context, f: () => DeviceTensor | void): Promise<{ us: number; wallUs: number; kernels: Record<string, number> }> {
  for (let i = 0; i < 3; i++) drop(gpu, f());
  await gpu.sync();
  const s0 = performance.now();
  while (performance.now() - s0 < (quick ? 10 : 200)) {
    drop(gpu, f());
    await gpu.sync();
  }
  gpu.profiler.reset();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) drop(gpu, f());
  await gpu.sync();
  const wallUs = ((performance.now() - t0) * 1e3) / reps;
  const sum = await gpu.profiler.summary();
  const kernels = Object.fromEntries(sum.map((e) => [e.name, +((e.totalMs * 1e3) / reps).toFixed(2)]));
  return { us: +Object.values(kernels).reduce((a, b) => a + b, 0).toFixed(2), wallUs: +wallUs.toFixed(2), kernels };
}

function drop(gpu: Context, t: DeviceTensor | void): void {
  if (t) gpu.release(t.buffer);
}

async function main(): Promise<void> {
  const gpu = await createContext({ profile: true });
  const T = quick ? 256 : 2048;
  const R = 16;
  const dims = quick ? [256, 64] : [2048, 256, 5632];
  const rows: Record<string, unknown>[] = [];
  for (const K of dims) {
    const big = upload(gpu, randn(T * K, 2), [T, K], 'f16');
    const a = upload(gpu, randn(R * K, 3), [R, K]);
    const b = upload(gpu, randn(K * R, 4), [K, R]);
    const z = upload(gpu, randn(T * R, 5), [T, R]);
    const bytes = T * K * 2;
    if (K === dims[0]) {
      // the GPU idles at low clocks: 1 s of work before the first timing
      const s0 = performance.now();
      while (performance.now() - s0 < (quick ? 10 : 1000)) {
        drop(gpu, lowRankProject(gpu, big, a));
        await gpu.sync();
      }
    }
    const cases: [string, () => DeviceTensor][] = [
      ['project rk (x A^T)', () => lowRankProject(gpu, big, a)],
      ['project kr (dY B)', () => lowRankProject(gpu, big, b, { wLayout: 'kr' })],
      ['outer rq (dA = v^T x)', () => lowRankOuter(gpu, big, z, { outLayout: 'rq' })],
      ['outer qr (dB = dY^T u)', () => lowRankOuter(gpu, big, z)],
    ];
    for (const [name, f] of cases) {
      const ref = await download(gpu, withVariant(1, f, gpu));
      for (const variant of [1, 2] as const) {
        lowRankTuning.variant = variant;
        const out = f();
        const diff = relErr(await download(gpu, out), Float64Array.from(ref));
        gpu.release(out.buffer);
        const t = await time(gpu, f);
        rows.push({ op: name, T, K, R, variant, ...t, GBps: +(bytes / t.us / 1e3).toFixed(0), relDiffVsV1: diff });
        log(`${name} K ${K} v${variant}: ${t.us} us (${(bytes / t.us / 1e3).toFixed(0)} GB/s), wall ${t.wallUs} us, diff ${diff.toExponential(1)}`);
      }
    }
    // y [T, K] += s z b^T: the update kernel against matmul's accumulate (y f32: one read and one write)
    const y = upload(gpu, randn(T * K, 6), [T, K]);
    const ybytes = T * K * 8;
    for (const [name, f] of [
      ['update (lowRankUpdate)', () => void lowRankUpdate(gpu, y, z, b, { alpha: 1e-9 })],
      ['update (matmul accumulate)', () => void matmul(gpu, z, b, { transB: true, alpha: 1e-9, accumulate: true, out: y })],
    ] as const) {
      const t = await time(gpu, f);
      rows.push({ op: name, T, K, R, ...t, GBps: +(ybytes / t.us / 1e3).toFixed(0) });
      log(`${name} K ${K}: ${t.us} us (${(ybytes / t.us / 1e3).toFixed(0)} GB/s of y read + written), wall ${t.wallUs} us`);
    }
    release(gpu, big, a, b, z, y);
  }
  lowRankTuning.variant = 2;
  process.stdout.write(JSON.stringify({ bench: 'lowrank', date: new Date().toISOString(), adapter: gpu.info.description ?? gpu.info.vendor, reps, rows }) + '\n');
  gpu.destroy();
}

function withVariant(v: 1 | 2, f: () => DeviceTensor, _gpu: Context): DeviceTensor {
  const keep = lowRankTuning.variant;
  lowRankTuning.variant = v;
  try {
    return f();
  } finally {
    lowRankTuning.variant = keep;
  }
}

main().catch((e) => {
  log(String(e?.stack ?? e));
  process.exit(1);
});
