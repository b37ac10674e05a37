// The timing loop of the training-step benchmarks (train-bench, lora-step-1b): warm-up steps, a wait for the
// tensor-core pipelines (built after an asynchronous WGSL check; portable kernels run meanwhile) and one more
// warm-up step on them, then the timed steps, each encoded while the GPU runs the one before; the loss is read
// once at the end. Peak memory and the profiler start over after the warm-up.
import { kernelsReady, type Context } from '@rusty/backend';
import type { Tensor } from '@rusty/autograd';

/** What {@link timeSteps} measured. */
export interface StepTiming {
  stepMs: number;
  /** Host time spent encoding (the step functions' own time), per step. */
  encodeCpuMsPerStep: number;
  dispatchesPerStep: number;
  /** The last step's loss. */
  loss: number;
  /** Kernel times summed over the timed steps, largest first (when the context profiles). */
  profile?: { name: string; count: number; totalMs: number; meanUs: number }[];
}

/** Run `warmup` + 1 untimed steps, then time `steps` steps of `step` (which returns its loss). */
export async function timeSteps(ctx: Context, step: () => Tensor, o: { warmup: number; steps: number; profile: boolean }): Promise<StepTiming> {
  for (let i = 0; i < o.warmup; i++) step().dispose();
  await kernelsReady(ctx);
  step().dispose();
  await ctx.sync();
  if (o.profile) ctx.profiler.reset();
  ctx.resetPeak();
  const d0 = ctx.stats.dispatches;
  const t0 = performance.now();
  let cpu = 0;
  let last: Tensor | null = null;
  for (let i = 0; i < o.steps; i++) {
    const c0 = performance.now();
    last?.dispose();
    last = step();
    cpu += performance.now() - c0;
  }
  const loss = await last!.item();
  const stepMs = (performance.now() - t0) / o.steps;
  last!.dispose();
  return {
    stepMs,
    encodeCpuMsPerStep: cpu / o.steps,
    dispatchesPerStep: (ctx.stats.dispatches - d0) / o.steps,
    loss,
    profile: o.profile ? await ctx.profiler.summary() : undefined,
  };
}
