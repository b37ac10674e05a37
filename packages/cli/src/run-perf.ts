// What a training run cost, measured from the context's counters at each finished step: steady-state throughput,
// dispatches and host time per step, and peak GPU memory. Printed in the summary of train / finetune and written
// as the `summary` line of metrics.jsonl.
import { fmtBytes, type Context } from '@rusty/backend';
import { fmtCount } from './progress';

/** The cost of a run's steps (medians over the steady steps) and its peak GPU memory. */
export interface RunPerf {
  /** Steps measured in this run (a resumed run counts its own). */
  steps: number;
  /** The first and last step of the steady window: the first {@link warmSteps} of the run (kernel compiles,
   *  pipeline builds, first allocations) and its last step are left out. [0, 0] when no step was left. */
  steadySteps: [number, number];
  /** Median tokens per second of the steady steps (padding included, as the progress display). */
  tokensPerSec: number;
  /** Median wall milliseconds per steady step (finished step to finished step). */
  stepMs: number;
  /** Median milliseconds the host spent encoding a steady step (the Trainer's `hostTime`: data, JavaScript,
   *  command encoding; the GPU works on the step before meanwhile). Below `stepMs`, the GPU is the limit. */
  hostMsPerStep: number;
  /** Median dispatches encoded per steady step. */
  dispatchesPerStep: number;
  /** Peak bytes of GPU buffers allocated (live) during the run, weights included (`ctx.memory.peak`; PyTorch's
   *  `max_memory_allocated`). */
  peakBytes: number;
  /** Peak bytes held, the pool's cached buffers included (`ctx.memory.peakReserved`; `max_memory_reserved`). */
  peakReservedBytes: number;
}

interface Mark {
  step: number;
  t: number;
  dispatches: number;
  hostMs: number;
  tokens: number;
}

const median = (xs: number[]): number => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Steps left out at the start of a run of `n` steps: 5, or half of a short run. */
export const warmSteps = (n: number): number => Math.min(5, Math.floor(n / 2));

/**
 * Records the context's counters as each step finishes. The Trainer encodes step i + 1 before it waits for step
 * i, so the interval that ends when step i finishes holds the GPU's work on step i and the host's encoding of
 * (and dispatches for) step i + 1: one step of each in steady state. The last step's interval has no encoding in it
 * (and an evaluation or a checkpoint shifts one step's encoding into the next interval): medians over the steps
 * between the warm-up and the last one. `start()` before training (it resets the memory peak:
 * the peak then covers the weights and the steps, not transients of loading), `step()` from the step callback,
 * `result()` after.
 */
export class StepMeter {
  private marks: Mark[] = [];

  constructor(private readonly ctx: Context) {}

  private mark(step: number, tokens: number, hostMs: number): Mark {
    return { step, t: performance.now(), dispatches: this.ctx.stats.dispatches, hostMs, tokens };
  }

  start(): void {
    this.ctx.resetPeak();
    this.marks = [this.mark(0, 0, 0)];
  }

  /** A step finished: the `tokens` it processed, the seconds the host spent encoding it. */
  step(step: number, tokens: number, hostTime: number): void {
    this.marks.push(this.mark(step, tokens, hostTime * 1000));
  }

  result(): RunPerf {
    const m = this.ctx.memory;
    const n = this.marks.length - 1;
    const steady = this.marks.slice(1, -1).map((b, i) => ({ b, a: this.marks[i]! })).slice(warmSteps(n));
    const ms = steady.map(({ a, b }) => b.t - a.t);
    return {
      steps: n,
      steadySteps: steady.length ? [steady[0]!.b.step, steady.at(-1)!.b.step] : [0, 0],
      tokensPerSec: median(steady.map(({ b }, i) => (ms[i]! > 0 ? (b.tokens * 1000) / ms[i]! : NaN)).filter(Number.isFinite)),
      stepMs: median(ms),
      hostMsPerStep: median(steady.map(({ b }) => b.hostMs)),
      dispatchesPerStep: median(steady.map(({ a, b }) => b.dispatches - a.dispatches)),
      peakBytes: m.peak,
      peakReservedBytes: m.peakReserved,
    };
  }
}

/** The summary lines of a run's cost. */
export function perfLines(p: RunPerf): string[] {
  const lines = [`  GPU memory  peak ${fmtBytes(p.peakBytes)} allocated, ${fmtBytes(p.peakReservedBytes)} held with the buffer pool's cache`];
  if (p.steps && Number.isFinite(p.stepMs)) {
    const [a, b] = p.steadySteps;
    lines.push(
      `  per step    ${p.stepMs.toFixed(1)} ms, host encoding ${p.hostMsPerStep.toFixed(1)} ms, ${fmtCount(p.dispatchesPerStep)} dispatches; ` +
        `${fmtCount(p.tokensPerSec)} tok/s (median of step${a === b ? ` ${a}` : `s ${a}-${b}`})`,
    );
  }
  return lines;
}
