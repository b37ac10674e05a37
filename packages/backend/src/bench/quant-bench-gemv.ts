/**
 * The decode-GEMV sections of quant-bench (see its header: `gemv`, `decode`, `placement`): GEMVs over weights
 * rotated through copies that exceed the L2 cache, timed back to back in one submission.
 */
import readProbeWgsl from '../../../../shaders/read-probe.wgsl';
import type { Context } from '../context';
import { grid1d } from '../grid';
import { ioBindings } from '../kernel';
import { cachedKernel } from '../kernel-cache';
import { matmul } from '../ops/core/matmul';
import { copy } from '../ops/core/transpose';
import { quantBytes, quantLayout, quantSpec, type QuantSpec, type QuantTensor } from '../ops/quant/formats';
import { floatWeight, gemv16Dispatch, gemvTakesLimbs, gemvTuning, gemvTuningCopy, planParts, quantGemvDispatch, quantWeight, type GemvClass, type GemvDispatch } from '../ops/quant/gemv';
import { partOffsets } from '../ops/quant/gemv-parts';
import { GEMV_SWEEP_LAYOUTS, gemvLayoutName } from '../ops/quant/gemv.cases';
import { quantLinear } from '../ops/quant/qmatmul';
import { dequantize, quantize, releaseQuant } from '../ops/quant/quantize';
import { download, empty, poison, release, upload, type DeviceTensor } from '../tensor';
import { limbWords, xLimbs } from '../ops/quant/x-limbs';
import { relErr } from '../testing';
import { args, failedLayouts, gpuTime, log, measureCopy, quick, randomData, settleMs, spinMs, spinUp, SPECS, warmMs } from './quant-bench-common';

/** Sum over shapes of log(time / the shape's best time): lower is better (a geometric-mean ranking). */
function rank(times: number[][]): number[] {
  const best = times[0]!.map((_, si) => Math.min(...times.map((t) => t[si]!)));
  return times.map((t) => t.reduce((s, v, si) => s + Math.log(v / best[si]!), 0));
}

/**
 * GPU time (s) per dispatch of GEMVs encoded back to back in one compute pass, timestamps at its start and end
 * (no pass per dispatch as under the profiler): `rounds` rounds over `list` (weights rotated over copies that
 * exceed the L2 cache several times). Each dispatch writes the same y, so consecutive ones are ordered as a
 * decode step's layers are (the barrier between them is part of the time). After a spin-up (`--spin-ms`, default
 * 150) ONE submission holds a warm-up pass (the same list for about `warmMs` of GPU time, untimed) and six timed
 * passes, so that the GPU never idles between them: with a submission and a read-back per timed pass (before
 * 2026-11-24's sixth session) nvidia-smi saw the clock drop to 345 MHz between them and one layout timed up to 4x
 * apart. The median of the last five passes (`min` the fastest, `spread` (max - min) / median).
 */
async function streamTime(ctx: Context, list: GemvDispatch[], rounds: number): Promise<{ t: number; min: number; spread: number }> {
  const dev = ctx.device;
  const passes = 6;
  const qs = dev.createQuerySet({ type: 'timestamp', count: 2 * passes });
  const res = dev.createBuffer({ size: 16 * passes, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const rd = dev.createBuffer({ size: 16 * passes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const ub = dev.createBuffer({ size: 256 * list.length, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  const u = new Uint32Array(64 * list.length);
  list.forEach((d, i) => u.set(d.params, 64 * i));
  dev.queue.writeBuffer(ub, 0, u);
  const bgs = list.map((d) =>
    dev.createBindGroup({
      layout: d.kernel.layout,
      entries: [{ binding: 0, resource: { buffer: ub, offset: 0, size: 256 } }, ...d.buffers.map((b, i) => ({ binding: i + 1, resource: { buffer: b.gpu } }))],
    }),
  );
  const encodeRounds = (pass: GPUComputePassEncoder, n: number) => {
    for (let r = 0; r < n; r++)
      list.forEach((d, i) => {
        pass.setPipeline(d.kernel.pipeline);
        pass.setBindGroup(0, bgs[i]!, [256 * i]);
        pass.dispatchWorkgroups(...d.workgroups);
      });
  };
  // the warm-up's length from one timed pass
  const timeOnce = async (): Promise<number> => {
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
    encodeRounds(pass, rounds);
    pass.end();
    enc.resolveQuerySet(qs, 0, 2, res, 0);
    enc.copyBufferToBuffer(res, 0, rd, 0, 16);
    dev.queue.submit([enc.finish()]);
    await rd.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(rd.getMappedRange().slice(0, 16));
    rd.unmap();
    return Number(t[1]! - t[0]!) / 1e9 / (rounds * list.length);
  };
  await spinUp(ctx, spinMs);
  const per = await timeOnce();
  const warmRounds = Math.min(2000, Math.max(1, Math.ceil(warmMs / 1e3 / (per * list.length))));
  const enc = dev.createCommandEncoder();
  const warm = enc.beginComputePass();
  encodeRounds(warm, warmRounds);
  warm.end();
  for (let p = 0; p < passes; p++) {
    const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * p, endOfPassWriteIndex: 2 * p + 1 } });
    encodeRounds(pass, rounds);
    pass.end();
  }
  enc.resolveQuerySet(qs, 0, 2 * passes, res, 0);
  enc.copyBufferToBuffer(res, 0, rd, 0, 16 * passes);
  dev.queue.submit([enc.finish()]);
  await rd.mapAsync(GPUMapMode.READ);
  const ts = new BigUint64Array(rd.getMappedRange().slice(0));
  rd.unmap();
  const times: number[] = [];
  for (let p = 1; p < passes; p++) times.push(Number(ts[2 * p + 1]! - ts[2 * p]!) / 1e9 / (rounds * list.length));
  for (const b of [qs, res, rd, ub]) b.destroy();
  times.sort((a, b) => a - b);
  const med = times[Math.floor(times.length / 2)]!;
  return { t: med, min: times[0]!, spread: (times[times.length - 1]! - times[0]!) / med };
}


/** `--gemv-shapes=NxK,...`: the weights of the GEMV table and the read floor instead of the default list (e.g. the
 *  7B model's gate and up projections side by side, 28672x4096). */
function tableShapes(): [number, number][] | undefined {
  const v = args.find((a) => a.startsWith('--gemv-shapes='))?.slice(14);
  return v?.split(',').map((s) => s.split('x').map(Number) as [number, number]);
}

/** A weight rotated over copies for timing: its dispatch list for x and y (under the current tuning). */
export interface Rotated {
  bytes: number;
  /** Whether {@link timeRotated} has let the GPU settle since these weights were made. */
  settled?: boolean;
  /** With `limbs` (X's int8 limbs): the integer int4 GEMV (quantized int4 weights only). */
  plan: (x: DeviceTensor, y: DeviceTensor, limbs?: DeviceTensor) => GemvDispatch[];
  free: () => void;
}

const copiesFor = (bytes: number) => Math.max(2, Math.min(64, Math.ceil((quick ? 1 << 24 : 400e6) / bytes)));

export function rotatedQuant(ctx: Context, w16: DeviceTensor, spec: QuantSpec): Rotated & { qs: QuantTensor[] } {
  const [N, K] = w16.shape as [number, number];
  const l = quantLayout(spec, N, K);
  const qs = Array.from({ length: copiesFor(quantBytes(spec, N, K)) }, () => quantize(ctx, w16, spec));
  // the bytes the GEMV kernel reads of W: codes and its scales as it reads them (double-quantized: one byte per
  // scale and an f32 absmax2 per 256, decoded in the kernel)
  const scaleBytes = spec.doubleQuant ? N * l.nb + 4 * Math.ceil((N * l.nb) / 256) : N * l.nb * (l.scaleDtype !== 'f16' ? 4 : 2);
  return {
    qs,
    bytes: N * l.wpr * 4 + scaleBytes,
    plan: (x, y, limbs) => qs.map((q) => quantGemvDispatch(ctx, x, q, y, limbs)),
    free: () => {
      for (const q of qs) releaseQuant(ctx, q);
    },
  };
}

export function rotatedF16(ctx: Context, w16: DeviceTensor): Rotated {
  const [N, K] = w16.shape as [number, number];
  const ws = Array.from({ length: copiesFor(2 * N * K) }, () => copy(ctx, w16));
  return { bytes: 2 * N * K, plan: (x, y) => ws.map((w) => gemv16Dispatch(ctx, x, w, y)), free: () => release(ctx, ...ws) };
}

/** Time (s, median) per GEMV of M rows over a rotated weight, under the current tuning; with `limbs`, the
 *  integer int4 GEMV on X's limbs (made once, outside the timing). */
export async function timeRotated(ctx: Context, w: Rotated, M: number, K: number, N: number, limbs = false) {
  // the first timing after a shape's weights were uploaded and made can read up to 3x slow (H100, 2026-11-24,
  // sixth session: the sweep's first layout of each shape; in --placement the first of six timings of one kernel
  // with fresh X and Y, 55.8 / 41.4 / 19.0 / 19.0 ... us, and 41.6 / 19.0 / 19.0 ... after a second of other GPU
  // work): once per weight, a settling time of GPU work and one whole timing, thrown away
  if (!w.settled) {
    await spinUp(ctx, settleMs);
    w.settled = true;
    await timeRotated(ctx, w, M, K, N, limbs);
  }
  const x = upload(ctx, randomData(M * K, 9), [M, K]);
  const y = empty(ctx, [M, N]);
  const xl = limbs ? xLimbs(ctx, x) : undefined;
  const list = w.plan(x, y, xl);
  const r = await streamTime(ctx, list, Math.max(2, Math.ceil(150 / list.length)));
  release(ctx, x, y, ...(xl ? [xl] : []));
  return r;
}

/** One row of X on its int8 limbs (the integer int4 GEMV): time, bytes (codes, scales and the limbs), fraction of
 *  copy, against the f16 GEMV's time `tG` (s), and its error against float64 of X and the dequantized weight. */
async function limbsRow(ctx: Context, q: Rotated & { qs: QuantTensor[] }, K: number, N: number, tG: number, copyYard: number): Promise<Record<string, number>> {
  const { t, spread } = await timeRotated(ctx, q, 1, K, N, true);
  const read = q.bytes + 4 * limbWords(K);
  const xh = randomData(K, 9);
  const x = upload(ctx, xh, [1, K]);
  const xl = xLimbs(ctx, x);
  const y = empty(ctx, [1, N]);
  poison(ctx, y);
  quantLinear(ctx, x, q.qs[0]!, { out: y, variant: 'gemv', xLimbs: xl });
  const wd = dequantize(ctx, q.qs[0]!);
  const w = await download(ctx, wd);
  release(ctx, wd);
  const ref = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let a = 0;
    for (let k = 0; k < K; k++) a += xh[k]! * w[n * K + k]!;
    ref[n] = a;
  }
  const err = relErr(await download(ctx, y), ref);
  release(ctx, x, xl, y);
  return { us: t * 1e6, spread, bytesRead: read, GBps: read / t / 1e9, ofCopy: read / t / 1e9 / copyYard, vsF16Gemv: tG / t, relErrVsFloat64: err };
}

/** The decode GEMV section (see the header). */
export async function gemvBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copyGBps = (out.copy as { GBps: number }).GBps;
  const int4 = quantSpec('int4', 64);
  const t0 = performance.now();
  // sweep: the layouts of each class of row counts (M = 1, 4, 16), int4/64 and f16 weights
  const bigShapes: [number, number][] = tableShapes() ?? (quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [2048, 5632]]);
  const sweepOf = async (kind: 'int4' | 'f16', cls: GemvClass, M: number, shapes: [number, number][]) => {
    // every swept layout on every shape (the small-weight layout of one row off meanwhile)
    const small = gemvTuning.oneSmall;
    gemvTuning.oneSmall = undefined;
    const layouts = GEMV_SWEEP_LAYOUTS[cls].filter((v) => !failedLayouts.has(gemvLayoutName(v)));
    const times: number[][] = layouts.map(() => []);
    for (const [N, K] of shapes) {
      const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
      const w = kind === 'int4' ? rotatedQuant(ctx, w16, int4) : rotatedF16(ctx, w16);
      for (const [vi, v] of layouts.entries()) {
        (kind === 'int4' ? gemvTuning : gemvTuning.float)[cls] = { ...v };
        times[vi]!.push((await timeRotated(ctx, w, M, K, N)).t * 1e6);
      }
      w.free();
      release(ctx, w16);
      ctx.trimPool();
    }
    gemvTuning.oneSmall = small;
    const r = rank(times);
    const best = layouts[r.indexOf(Math.min(...r))]!;
    (kind === 'int4' ? gemvTuning : gemvTuning.float)[cls] = { ...best };
    const res = { M, shapes, chosen: gemvLayoutName(best), us: Object.fromEntries(layouts.map((v, vi) => [gemvLayoutName(v), times[vi]!.map((t) => +t.toFixed(2))])) };
    log(`gemv sweep ${kind} ${cls}: chosen ${res.chosen}; ${JSON.stringify(res.us)}`);
    return res;
  };
  if (args.includes('--no-sweep')) out.gemvSweep = { skipped: true, tuning: gemvTuningCopy() };
  else {
    // --sweep=int4One,int4Few,... sweeps only those (default: all six)
    const classes = args.find((a) => a.startsWith('--sweep='))?.slice(8).split(',');
    const run = async (name: string, f: () => ReturnType<typeof sweepOf>) => (!classes || classes.includes(name) ? await f() : undefined);
    const sweep = {
      int4One: await run('int4One', () => sweepOf('int4', 'one', 1, bigShapes)),
      int4Few: await run('int4Few', () => sweepOf('int4', 'few', 4, bigShapes)),
      int4Many: await run('int4Many', () => sweepOf('int4', 'many', 16, bigShapes.slice(0, 3))),
      f16One: await run('f16One', () => sweepOf('f16', 'one', 1, bigShapes.slice(0, 3))),
      f16Few: await run('f16Few', () => sweepOf('f16', 'few', 4, bigShapes.slice(0, 3))),
      f16Many: await run('f16Many', () => sweepOf('f16', 'many', 16, bigShapes.slice(0, 2))),
      chosen: gemvTuningCopy(),
      seconds: (performance.now() - t0) / 1e3,
    };
    out.gemvSweep = sweep;
    log(`gemv sweep chosen: ${JSON.stringify(sweep.chosen)} (${sweep.seconds.toFixed(0)} s)`);
  }

  // the decode table: f16 GEMV, f16 matmul and each quantized format at 1, 4 and 16 rows
  const shapes: [number, number][] = tableShapes() ?? (quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [5632, 2048], [2048, 5632], [2048, 2048], [256, 2048]]);
  const Ms = [1, 4, 16];
  const rows: Record<string, Record<string, unknown>>[] = [];
  // --probes-only: the probes below, without the table
  for (const [N, K] of args.includes('--probes-only') ? [] : shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const byM: Record<string, Record<string, unknown>>[] = Ms.map((M) => ({ shape: { N, K, M } }));
    const f16 = rotatedF16(ctx, w16);
    for (const [mi, M] of Ms.entries()) {
      const { t, spread } = await timeRotated(ctx, f16, M, K, N);
      const read = f16.bytes + 4 * M * K;
      byM[mi]!.f16Gemv = { us: t * 1e6, spread, GBps: read / t / 1e9, ofCopy: read / t / 1e9 / copyGBps };
      const x = upload(ctx, randomData(M * K, 9), [M, K]);
      const y = empty(ctx, [M, N]);
      const tM = await gpuTime(ctx, ['matmul'], () => matmul(ctx, x, w16, { transB: true, out: y }));
      byM[mi]!.f16Matmul = { us: tM * 1e6 };
      release(ctx, x, y);
    }
    f16.free();
    for (const [name, spec] of SPECS) {
      const q = rotatedQuant(ctx, w16, spec);
      for (const [mi, M] of Ms.entries()) {
        const { t, spread } = await timeRotated(ctx, q, M, K, N);
        const read = q.bytes + 4 * M * K;
        const x = upload(ctx, randomData(M * K, 9), [M, K]);
        const y = empty(ctx, [M, N]);
        quantLinear(ctx, x, q.qs[0]!, { out: y, variant: 'gemv' });
        const wd = dequantize(ctx, q.qs[0]!);
        const ref = matmul(ctx, x, wd, { transB: true });
        const err = relErr(await download(ctx, y), await download(ctx, ref));
        release(ctx, x, y, ref, wd);
        const tG = (byM[mi]!.f16Gemv as { us: number }).us / 1e6;
        byM[mi]![name] = { us: t * 1e6, spread, bytesRead: read, GBps: read / t / 1e9, ofCopy: read / t / 1e9 / copyGBps, vsF16Gemv: tG / t, relErrVsDequantMatmul: err };
        if (M === 1 && spec.format === 'int4' && gemvTakesLimbs(ctx, q.qs[0]!, 1)) byM[mi]![`${name}Limbs`] = await limbsRow(ctx, q, K, N, tG, copyGBps);
      }
      q.free();
    }
    for (const r of byM) log(`gemv ${JSON.stringify(r)}`);
    rows.push(...byM);
    release(ctx, w16);
    ctx.trimPool();
  }
  // leave a stage out (results wrong, times only): where the int4 kernel's time goes at one row;
  // --probe-layouts=r8t128cw2,r16t128cw4,... times the kernel and the integer one (X as limbs: gemvTuning.limbs)
  // under each one-row layout
  const probes: Record<string, unknown>[] = [];
  const layouts = args.find((a) => a.startsWith('--probe-layouts='))?.slice(16).split(',');
  const one = gemvTuning.one;
  const limbsSet = gemvTuning.limbs;
  for (const [N, K] of quick ? [[256, 512]] : (tableShapes() ?? [[4096, 4096], [14336, 4096], [28672, 4096]])) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const q = rotatedQuant(ctx, w16, int4);
    for (const layout of layouts ?? [undefined]) {
      const m = layout?.match(/^r(\d+)t(\d+)cw(\d)$/);
      if (layout && !m) throw new Error(`--probe-layouts: '${layout}' is not rNtNcwN`);
      if (m) gemvTuning.one = gemvTuning.limbs = { rows: +m[1]!, threads: +m[2]!, subgroupRows: false, chunkWords: +m[3]! as 1 | 2 | 4 };
      for (const probe of layouts ? [undefined] : ([undefined, 'no-x', 'no-deq', 'no-scale', 'w-only'] as const)) {
        gemvTuning.probe = probe;
        probes.push({ N, K, ...(layout ? { layout } : {}), probe: probe ?? 'none', us: (await timeRotated(ctx, q, 1, K, N)).t * 1e6 });
      }
      const decode = gemvTuning.limbsDecode;
      gemvTuning.probe = undefined; // (the probes' last would leave a stage out of the limbs kernel too)
      for (const d of ['offset', 'signed'] as const)
        if (gemvTakesLimbs(ctx, q.qs[0]!, 1)) {
          gemvTuning.limbsDecode = d;
          probes.push({ N, K, ...(layout ? { layout } : {}), probe: `limbs ${d}`, us: (await timeRotated(ctx, q, 1, K, N, true)).t * 1e6 });
        }
      gemvTuning.limbsDecode = decode;
    }
    gemvTuning.one = one;
    gemvTuning.limbs = limbsSet;
    gemvTuning.probe = undefined;
    q.free();
    release(ctx, w16);
  }
  log(`gemv probes: ${JSON.stringify(probes)}`);
  // the yardstick: the best copy of the process, before or after (the first ran at 2.5 TB/s, the last at 3.0 on
  // 2026-11-24: the clock had not finished ramping); every fraction against it
  const copyAfter = await measureCopy(ctx);
  const yardstick = Math.max(copyGBps, copyAfter.GBps);
  for (const r of rows) for (const v of Object.values(r)) if ('GBps' in v && typeof v.GBps === 'number') (v as { ofCopy: number }).ofCopy = v.GBps / yardstick;
  out.gemv = { copyGBps: yardstick, copyBefore: copyGBps, copyAfter, rows, probes, seconds: (performance.now() - t0) / 1e3 };
}

/** The decode section (see the header). */
export async function decodeBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copy = out.copy as { GBps: number };
  const t0 = performance.now();
  const shapes: [number, number][] = quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096], [2048, 5632], [256, 2048]];
  const saved = { decode: gemvTuning.decode, probe: gemvTuning.probe };
  const rows: Record<string, unknown>[] = [];
  for (const [N, K] of shapes) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    const f16 = rotatedF16(ctx, w16);
    const q = rotatedQuant(ctx, w16, quantSpec('int4', 64));
    for (const M of [1, 4]) {
      const row: Record<string, unknown> = { N, K, M };
      const tF = (await timeRotated(ctx, f16, M, K, N)).t;
      row.f16 = { us: tF * 1e6, ofCopy: (f16.bytes + 4 * M * K) / tF / 1e9 / copy.GBps };
      for (const [name, decode, probe] of [['shift', 'shift'], ['mask', 'mask'], ['mask no-deq', 'mask', 'no-deq'], ['mask no-x', 'mask', 'no-x']] as const) {
        gemvTuning.decode = decode;
        gemvTuning.probe = probe;
        const { t, spread } = await timeRotated(ctx, q, M, K, N);
        const read = q.bytes + 4 * M * K;
        row[name] = { us: +(t * 1e6).toFixed(2), spread: +spread.toFixed(3), ofCopy: +(read / t / 1e9 / copy.GBps).toFixed(3), vsF16: +(tF / t).toFixed(3) };
      }
      gemvTuning.decode = saved.decode;
      gemvTuning.probe = saved.probe;
      log(`decode ${JSON.stringify(row)}`);
      rows.push(row);
    }
    q.free();
    f16.free();
    release(ctx, w16);
    ctx.trimPool();
  }
  out.decode = { copyGBps: copy.GBps, layouts: { one: gemvTuning.one, few: gemvTuning.few }, rows, seconds: (performance.now() - t0) / 1e3 };
}

/** The placement section (see the header). */
export async function placementBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const res: Record<string, unknown>[] = [];
  for (const [N, K] of quick ? [[256, 512]] : [[14336, 4096], [4096, 4096]]) {
    const w16 = upload(ctx, randomData(N * K, 7, 0.02), [N, K], 'f16');
    for (const kind of ['int4', 'f16'] as const) {
      const make = () => (kind === 'int4' ? rotatedQuant(ctx, w16, quantSpec('int4', 64)) : rotatedF16(ctx, w16));
      let w = make();
      const freshXY: number[] = [];
      for (let i = 0; i < 6; i++) freshXY.push(+((await timeRotated(ctx, w, 1, K, N)).t * 1e6).toFixed(2));
      w.free();
      const freshW: number[] = [];
      for (let i = 0; i < 3; i++) {
        w = make();
        freshW.push(+((await timeRotated(ctx, w, 1, K, N)).t * 1e6).toFixed(2));
        w.free();
        ctx.trimPool();
      }
      const r = { N, K, kind, bytes: w.bytes, freshXY, freshW };
      log(`placement ${JSON.stringify(r)}`);
      res.push(r);
    }
    release(ctx, w16);
    ctx.trimPool();
  }
  out.placement = res;
}

/**
 * The read-floor section (`--read-floor`): the fastest kernel that only reads B bytes once (shaders/read-probe.wgsl,
 * PER vec4s per thread), timed like the GEMVs (back to back in one pass, each dispatch writing the same y, the
 * buffer rotated over copies that exceed the L2 cache), for B = the bytes the int4/64 GEMV of each decode shape
 * reads at one row, and a large B for the asymptote: what fraction of the copy bandwidth any kernel reading those
 * bytes in one dispatch reaches on this stack.
 */
export async function readFloorBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copyGBps = (out.copy as { GBps: number } | undefined)?.GBps ?? (await measureCopy(ctx)).GBps;
  const int4 = quantSpec('int4', 64);
  const shapes: [number, number][] = tableShapes() ?? (quick ? [[256, 512]] : [[4096, 4096], [11008, 4096], [4096, 11008], [14336, 4096]]);
  const sizes = shapes.map(([N, K]) => ({ shape: `${N}x${K}`, bytes: quantBytes(int4, N, K) + 2 * K }));
  sizes.push({ shape: 'large', bytes: quick ? 1 << 22 : 256 << 20 });
  const rows: Record<string, unknown>[] = [];
  const y = empty(ctx, [4], 'u32');
  for (const { shape, bytes } of sizes) {
    const n4 = Math.ceil(bytes / 16);
    const first = upload(ctx, randomData(4 * n4, 11), [4 * n4]);
    const bufs = [first, ...Array.from({ length: copiesFor(bytes) - 1 }, () => copy(ctx, first))];
    const row: Record<string, unknown> = { shape, bytes };
    for (const per of [2, 4, 8]) {
      const kernel = cachedKernel(ctx, `read-probe:${per}`, () => ({
        name: 'read-probe',
        code: readProbeWgsl,
        bindings: ioBindings('u32', 'u32'),
        params: ['u32:n4', 'u32:row', 'u32:key'],
        consts: { PER: per },
      }));
      const { wg, row: r } = grid1d(Math.ceil(n4 / per), 256);
      const list: GemvDispatch[] = bufs.map((b) => ({ kernel, buffers: [b.buffer, y.buffer], workgroups: [wg[0], wg[1], 1], params: [n4, r / 256, 0x9e3779b9] }));
      const t = await streamTime(ctx, list, Math.max(2, Math.ceil(150 / list.length)));
      row[`per${per}`] = { us: +(t.t * 1e6).toFixed(2), GBps: +(bytes / t.t / 1e9).toFixed(0), ofCopy: +(bytes / t.t / 1e9 / copyGBps).toFixed(3), spread: +t.spread.toFixed(3) };
    }
    log(`read floor ${JSON.stringify(row)}`);
    rows.push(row);
    release(ctx, ...bufs);
    ctx.trimPool();
  }
  release(ctx, y);
  out.readFloor = { copyGBps, rows };
}

/**
 * The parts section (`--parts`; `--parts-llama` adds Llama 7B's): Mistral 7B's q/k/v and gate/up GEMVs at one row of x, one dispatch per weight
 * against one `gemvParts` dispatch for the group (`planParts`), int4/64 and f16, weights rotated over copies;
 * us per group and the parts dispatch's fraction of copy.
 */
export async function partsBench(ctx: Context, out: Record<string, unknown>): Promise<void> {
  const copyGBps = (out.copy as { GBps: number } | undefined)?.GBps ?? (await measureCopy(ctx)).GBps;
  const groups: [string, number[], number][] = quick
    ? [['small qkv', [256, 64, 64], 512]]
    : [
        ['Mistral qkv', [4096, 1024, 1024], 4096],
        ['Mistral gate+up', [14336, 14336], 4096],
        ...(args.includes('--parts-llama') ? ([['Llama qkv', [4096, 4096, 4096], 4096], ['Llama gate+up', [11008, 11008], 4096]] as [string, number[], number][]) : []),
      ];
  const int4 = quantSpec('int4', 64);
  const rows: Record<string, unknown>[] = [];
  for (const [name, Ns, K] of groups) {
    for (const kind of ['int4', 'f16'] as const) {
      const total = Ns.reduce((a, b) => a + b, 0);
      const bytes = kind === 'int4' ? quantBytes(int4, total, K) : 2 * total * K;
      const copies = copiesFor(bytes);
      const x = upload(ctx, randomData(K, 9), [1, K]);
      // per copy, each part's weight as the GEMV sees it, and its dispatch alone
      const made = Array.from({ length: copies }, (_, c) =>
        Ns.map((N, j) => {
          const w16 = upload(ctx, randomData(N * K, 7 + j + c, 0.02), [N, K], 'f16');
          if (kind === 'f16') return { w: floatWeight(w16), alone: (y: DeviceTensor) => gemv16Dispatch(ctx, x, w16, y), free: () => release(ctx, w16) };
          const q = quantize(ctx, w16, int4);
          release(ctx, w16);
          return { w: quantWeight(q), alone: (y: DeviceTensor) => quantGemvDispatch(ctx, x, q, y), free: () => releaseQuant(ctx, q) };
        }),
      );
      const ys = Ns.map((N) => empty(ctx, [1, N]));
      const { yo, end } = partOffsets(ctx, Ns, 1);
      const yAll = empty(ctx, [end]);
      const sep = made.flatMap((ws) => ws.map((m, j) => m.alone(ys[j]!)));
      const par = made.map((ws) => planParts(ctx, x, ws.map((m) => m.w), yAll, yo, 1));
      const separateUs: number[] = [];
      const partsUs: number[] = [];
      const partsOfCopy: number[] = [];
      // three times, alternating, the first thrown away (the first timing of fresh weights can read slow)
      await spinUp(ctx, settleMs);
      for (let rep = 0; rep < 3; rep++) {
        const tS = (await streamTime(ctx, sep, Math.max(2, Math.ceil(150 / sep.length)))).t * Ns.length;
        const tP = (await streamTime(ctx, par, Math.max(2, Math.ceil(150 / par.length)))).t;
        if (rep === 0) continue;
        separateUs.push(+(tS * 1e6).toFixed(2));
        partsUs.push(+(tP * 1e6).toFixed(2));
        partsOfCopy.push(+((bytes + 4 * K) / tP / 1e9 / copyGBps).toFixed(3));
      }
      const row = { group: name, Ns, K, kind, bytes, separateUs, partsUs, partsOfCopy };
      log(`parts ${JSON.stringify(row)}`);
      rows.push(row);
      for (const ws of made) for (const m of ws) m.free();
      release(ctx, x, yAll, ...ys);
      ctx.trimPool();
    }
  }
  out.parts = { copyGBps, layouts: { one: gemvTuning.one, float: gemvTuning.float.one }, rows };
}
