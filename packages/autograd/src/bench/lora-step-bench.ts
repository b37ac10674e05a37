/**
 * Host cost of a LoRA training step (a program, not a test): where the CPU time per dispatch goes. A stack of
 * `layers` blocks (inside `tidy`, as the Trainer runs a step), each with the seven adapted projections of a Llama layer (q, k, v, o, gate, up, down: a
 * frozen weight W [out, in] plus A [r, in] and B [out, r] trained, y = x W^T + s (x A^T) B^T), then
 * mean(h^2), backward, AdamW over every A and B, zeroGrad. Prints ONE JSON object:
 *   - per step: dispatches, submits, host encoding ms (from the first op to the last encoded dispatch, before
 *     the GPU is waited for) and us per dispatch; GPU wait ms;
 *   - where the encoding time goes: inside `ctx.dispatch` (Dawn encoding + bind-group lookups), of which in
 *     `createBindGroup` (cache misses: fresh buffer combinations), and the rest (autograd's per-op JavaScript,
 *     kernel lookups, allocation), for the forward+backward and the optimizer step separately;
 *   - the dispatch microbenchmark for comparison (relu into a fixed output: bind group cached).
 *
 *   node lora-step-bench.mjs [--layers=2] [--tokens=64] [--hidden=64] [--inter=172] [--r=8] [--steps=10]
 *                            [--weights=f32|f16] [--profile] [--foreach=1|0]
 * `--foreach=0`: AdamW with one dispatch per tensor instead of the multi-tensor arenas (the default).
 * `--profile`: the context times every dispatch (`createContext({ profile: true })`: a compute pass with
 * timestamp writes per dispatch), to show what profiling itself adds to the host cost.
 * Defaults are sizes that run on lavapipe in seconds; the host cost per dispatch does not depend on them.
 */
import { createContext, relu, empty, upload, release, type Context } from '@rusty/backend';
import { AdamW } from '../optim/adamw';
import { add, linear, mean, scale, square, tidy } from '../index';
import { Tensor } from '../tensor';

const args = process.argv.slice(2);
const opt = (name: string, d: number | string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? String(d);

interface Probe {
  dispatchMs: number;
  bindGroupMs: number;
  bindGroups: number;
}

/** Wrap ctx.dispatch and device.createBindGroup to time them (the wrappers cost ~0.1 us per call). */
function instrument(ctx: Context): Probe {
  const p: Probe = { dispatchMs: 0, bindGroupMs: 0, bindGroups: 0 };
  const d = ctx.dispatch.bind(ctx);
  ctx.dispatch = ((...a: Parameters<Context['dispatch']>) => {
    const t = performance.now();
    d(...a);
    p.dispatchMs += performance.now() - t;
  }) as Context['dispatch'];
  const dev = ctx.device;
  const cbg = dev.createBindGroup.bind(dev);
  dev.createBindGroup = ((desc: GPUBindGroupDescriptor) => {
    const t = performance.now();
    const g = cbg(desc);
    p.bindGroupMs += performance.now() - t;
    p.bindGroups++;
    return g;
  }) as GPUDevice['createBindGroup'];
  return p;
}

async function main() {
  const L = Number(opt('layers', 2));
  const T = Number(opt('tokens', 64));
  const H = Number(opt('hidden', 64));
  const I = Number(opt('inter', 172));
  const r = Number(opt('r', 8));
  const steps = Number(opt('steps', 10));
  const wdt = opt('weights', 'f32') as 'f32' | 'f16';
  const ctx = await createContext({ profile: args.includes('--profile') });
  const probe = instrument(ctx);
  let seed = 1;
  const frozen = (o: number, i: number) => Tensor.randn(ctx, [o, i], { seed: seed++, std: 0.05, dtype: wdt });
  const lora = (o: number, i: number) => ({
    A: Tensor.randn(ctx, [r, i], { seed: seed++, std: 0.05, requiresGrad: true }),
    B: Tensor.randn(ctx, [o, r], { seed: seed++, std: 0.05, requiresGrad: true }),
  });
  const shapes: [number, number][] = [
    [H, H],
    [H, H],
    [H, H],
    [H, H],
    [I, H],
    [I, H],
    [H, I],
  ];
  const layers = Array.from({ length: L }, () => shapes.map(([o, i]) => ({ W: frozen(o, i), ...lora(o, i) })));
  const params = layers.flatMap((l) => l.flatMap((p) => [p.A, p.B]));
  const opt_ = new AdamW(ctx, params, { lr: 1e-3, foreach: opt('foreach', 1) !== '0' });
  const x = Tensor.randn(ctx, [T, H], { seed: 999 });
  const proj = (h: Tensor, p: { W: Tensor; A: Tensor; B: Tensor }) => add(linear(h, p.W), scale(linear(linear(h, p.A), p.B), 2));

  const step = () => {
    const t0 = performance.now();
    const d0 = { ...probe };
    const n0 = ctx.stats.dispatches;
    const loss = tidy(() => {
    let h = x;
    for (const l of layers) {
      // attention-like half: q, k, v, o on h; mlp-like half: gate, up on h, down on their product
      const q = proj(h, l[0]!);
      const k = proj(h, l[1]!);
      const v = proj(h, l[2]!);
      h = add(h, proj(add(add(q, k), v), l[3]!));
      const g = proj(h, l[4]!);
      const u = proj(h, l[5]!);
      h = add(h, proj(add(g, u), l[6]!));
    }
    const l = mean(square(h));
    l.backward();
    return l;
    });
    const t1 = performance.now();
    const nFwdBwd = ctx.stats.dispatches - n0;
    const d1 = { ...probe };
    opt_.step();
    for (const p of params) p.zeroGrad();
    const t2 = performance.now();
    loss.dispose();
    return {
      fwdBwd: { ms: t1 - t0, dispatches: nFwdBwd, dispatchMs: d1.dispatchMs - d0.dispatchMs, bindGroups: d1.bindGroups - d0.bindGroups, bindGroupMs: d1.bindGroupMs - d0.bindGroupMs },
      optim: {
        ms: t2 - t1,
        dispatches: ctx.stats.dispatches - n0 - nFwdBwd,
        dispatchMs: probe.dispatchMs - d1.dispatchMs,
        bindGroups: probe.bindGroups - d1.bindGroups,
        bindGroupMs: probe.bindGroupMs - d1.bindGroupMs,
      },
    };
  };
  // warm-up: pipelines compile, buffers settle in the pool, bind groups get cached
  for (let i = 0; i < 3; i++) {
    step();
    await ctx.sync();
  }
  const rows: ReturnType<typeof step>[] = [];
  let gpuWait = 0;
  const s0 = ctx.stats.submits;
  for (let i = 0; i < steps; i++) {
    rows.push(step());
    const t = performance.now();
    await ctx.sync();
    gpuWait += performance.now() - t;
  }
  const avg = (f: (r: ReturnType<typeof step>) => number) => rows.reduce((a, r) => a + f(r), 0) / rows.length;
  const part = (k: 'fwdBwd' | 'optim') => {
    const ms = avg((r) => r[k].ms);
    const n = avg((r) => r[k].dispatches);
    const inDispatch = avg((r) => r[k].dispatchMs);
    const sorted = rows.map((r) => r[k].ms).sort((x, y) => x - y);
    return {
      ms: +ms.toFixed(3),
      // the median step: robust to the garbage-collection pauses and CPU contention that inflate the mean
      medianMs: +sorted[sorted.length >> 1]!.toFixed(3),
      dispatches: n,
      usPerDispatch: +((ms * 1e3) / n).toFixed(2),
      inDispatchUsPerDispatch: +((inDispatch * 1e3) / n).toFixed(2),
      outsideDispatchUsPerDispatch: +(((ms - inDispatch) * 1e3) / n).toFixed(2),
      bindGroupsCreated: avg((r) => r[k].bindGroups),
      createBindGroupMs: +avg((r) => r[k].bindGroupMs).toFixed(3),
    };
  };
  const fb = part('fwdBwd');
  const op = part('optim');

  // the dispatch microbenchmark: one small op into a fixed output, bind group cached
  const a = upload(ctx, new Float32Array(1024).fill(1), [1024]);
  const y = empty(ctx, [1024]);
  for (let i = 0; i < 1000; i++) relu(ctx, a, { out: y });
  await ctx.sync();
  const m0 = performance.now();
  for (let i = 0; i < 10000; i++) relu(ctx, a, { out: y });
  const micro = ((performance.now() - m0) * 1e3) / 10000;
  await ctx.sync();
  release(ctx, a, y);

  console.log(
    JSON.stringify({
      adapter: ctx.info.description || ctx.info.device,
      config: { layers: L, tokens: T, hidden: H, inter: I, r, weights: wdt, steps, adaptedTensors: params.length, foreach: opt_.foreach, profile: ctx.profiler.enabled },
      step: {
        hostMs: +(fb.ms + op.ms).toFixed(3),
        dispatches: fb.dispatches + op.dispatches,
        usPerDispatch: +(((fb.ms + op.ms) * 1e3) / (fb.dispatches + op.dispatches)).toFixed(2),
        submitsPerStep: (ctx.stats.submits - s0) / steps,
        gpuWaitMs: +(gpuWait / steps).toFixed(3),
      },
      forwardBackward: fb,
      optimizer: op,
      microbenchUsPerDispatch: +micro.toFixed(2),
    }),
  );
  ctx.destroy();
}

main().catch((e) => {
  console.log(JSON.stringify({ error: (e as Error).stack ?? String(e) }));
  process.exit(1);
});
