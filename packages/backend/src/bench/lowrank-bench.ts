/**
 * LoRA's low-rank products on the GPU machine (a program, not a test): `lowRankProject` (x A^T, dY B),
 * `lowRankOuter` (dA = v^T x, dB = dY^T u) per setting of `lowRankTuning`, and `lowRankUpdate` (y += s u B^T) beside
 * matmul's accumulate, at the 1.1B LoRA step's shapes (2048 tokens, K in {2048, 256, 5632}, r 16; the big operand
 * f16 as under f16 autocast). GPU time from the profiler (kernel and finish pass; see `time`), GB/s of the big
 * operand, and each setting's largest relative difference from the default; probes time a kernel with a stage
 * left out. These are per-call times with Y cold in L2 (the matmul between calls evicts it): in the LoRA step Y was
 * just written and the same kernels run 2-3x faster (`lora-step-1b --profile`), so compare settings here, and
 * judge them in the step. Prints ONE JSON object.
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

/** GPU time per call of f from the profiler, with a 2048^3 f16 matmul before every call: the GPU never idles (it
 *  drops to 345 MHz when it does, and the host encodes one call faster than the GPU runs the pair), and the
 *  matmul's own kernels are left out of the sum. */
async function time(gpu: Context, f: () => DeviceTensor | void, heavy: () => void): Promise<{ us: number; kernels: Record<string, number> }> {
  const before = new Set<string>();
  await gpu.sync();
  gpu.profiler.reset();
  heavy();
  await gpu.sync();
  for (const e of await gpu.profiler.summary()) before.add(e.name);
  for (let i = 0; i < 20; i++) (heavy(), drop(gpu, f()));
  await gpu.sync();
  gpu.profiler.reset();
  for (let i = 0; i < reps; i++) (heavy(), drop(gpu, f()));
  await gpu.sync();
  const sum = (await gpu.profiler.summary()).filter((e) => !before.has(e.name));
  const kernels = Object.fromEntries(sum.map((e) => [e.name, +((e.totalMs * 1e3) / reps).toFixed(2)]));
  return { us: +Object.values(kernels).reduce((a, b) => a + b, 0).toFixed(2), kernels };
}

function drop(gpu: Context, t: DeviceTensor | void): void {
  if (t) gpu.release(t.buffer);
}

const tuned = { ...lowRankTuning };

async function main(): Promise<void> {
  const gpu = await createContext({ profile: true });
  const T = quick ? 256 : 2048;
  const R = 16;
  const dims = quick ? [256, 64] : [2048, 256, 5632];
  const hs = quick ? 64 : 2048;
  const ha = upload(gpu, randn(hs * hs, 9), [hs, hs], 'f16');
  const heavy = () => drop(gpu, matmul(gpu, ha, ha));
  // lowRankOuter's settings (lowRankProject has one kernel and no settings)
  const configs: { name: string; workgroups?: number; tileRows?: 32 | 64; probe?: 'no-sum' | 'no-load' }[] = [
    { name: 'default' },
    { name: '384 wg', workgroups: 384 },
    { name: '1536 wg', workgroups: 1536 },
    { name: '32-row tiles', tileRows: 32 },
    { name: 'no-sum (probe)', probe: 'no-sum' },
    { name: 'no-load (probe)', probe: 'no-load' },
  ];
  const rows: Record<string, unknown>[] = [];
  for (const K of dims) {
    const big = upload(gpu, randn(T * K, 2), [T, K], 'f16');
    const a = upload(gpu, randn(R * K, 3), [R, K]);
    const b = upload(gpu, randn(K * R, 4), [K, R]);
    const z = upload(gpu, randn(T * R, 5), [T, R]);
    const bytes = T * K * 2;
    if (K === dims[0]) {
      // the GPU idles at low clocks: 2 s of back-to-back matmuls before the first timing
      const s0 = performance.now();
      while (performance.now() - s0 < (quick ? 10 : 2000)) {
        for (let i = 0; i < 20; i++) heavy();
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
      const ref = await download(gpu, f());
      for (const c of name.startsWith('outer') ? configs : configs.slice(0, 1)) {
        Object.assign(lowRankTuning, { ...tuned, ...c });
        const out = f();
        const diff = relErr(await download(gpu, out), Float64Array.from(ref));
        gpu.release(out.buffer);
        const t = await time(gpu, f, heavy);
        rows.push({ op: name, T, K, R, config: c.name, ...t, GBps: +(bytes / t.us / 1e3).toFixed(0), relDiffVsDefault: diff });
        log(`${name} K ${K} ${c.name}: ${t.us} us (${(bytes / t.us / 1e3).toFixed(0)} GB/s) ${JSON.stringify(t.kernels)}, diff ${diff.toExponential(1)}`);
      }
      Object.assign(lowRankTuning, tuned);
    }
    // y [T, K] += s z b^T: the update kernel against matmul's accumulate (y f32: one read and one write)
    const y = upload(gpu, randn(T * K, 6), [T, K]);
    const ybytes = T * K * 8;
    for (const [name, f] of [
      ['update (lowRankUpdate)', () => void lowRankUpdate(gpu, y, z, b, { alpha: 1e-9 })],
      ['update (matmul accumulate)', () => void matmul(gpu, z, b, { transB: true, alpha: 1e-9, accumulate: true, out: y })],
    ] as const) {
      const t = await time(gpu, f, heavy);
      rows.push({ op: name, T, K, R, ...t, GBps: +(ybytes / t.us / 1e3).toFixed(0) });
      log(`${name} K ${K}: ${t.us} us (${(ybytes / t.us / 1e3).toFixed(0)} GB/s of y read + written)`);
    }
    release(gpu, big, a, b, z, y);
  }
  release(gpu, ha);
  process.stdout.write(JSON.stringify({ bench: 'lowrank', date: new Date().toISOString(), adapter: gpu.info.description ?? gpu.info.vendor, reps, rows }) + '\n');
  gpu.destroy();
}

main().catch((e) => {
  log(String(e?.stack ?? e));
  process.exit(1);
});
