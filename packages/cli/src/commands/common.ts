import { createContext, setF32MatmulPrecision, type Context, type F32MatmulPrecision } from '@rusty/backend';
import { flag, withDefault } from '../args';

/** Flags of the data a command reads. */
export const dataFlags = {
  include: flag.list('globs of files to take from --data directories (e.g. "**/*.ts,**/*.md")', { value: '<globs>' }),
  exclude: flag.list('globs of files to leave out of --data directories', { value: '<globs>' }),
};

/** Flags of the optimisation loop (train and finetune). */
export function loopFlags(d: { steps: number | string; lr: number | string; weightDecay: number; batch: number | string }) {
  const note = (v: number | string) => (typeof v === 'string' ? ` (default ${v})` : '');
  return {
    steps: typeof d.steps === 'string' ? flag.int(`optimizer steps${note(d.steps)}`, { min: 1 }) : withDefault(flag.int('optimizer steps', { min: 1 }), d.steps),
    'batch-size':
      typeof d.batch === 'string'
        ? flag.int(`sequences per micro-batch${note(d.batch)}`, { short: 'b', min: 1 })
        : withDefault(flag.int('sequences per micro-batch', { short: 'b', min: 1 }), d.batch),
    'gradient-accumulation': withDefault(flag.int('micro-batches per optimizer step (effective batch = batch-size x this)', { min: 1 }), 1),
    lr: typeof d.lr === 'string' ? flag.num(`peak learning rate${note(d.lr)}`, { positive: true }) : withDefault(flag.num('peak learning rate', { positive: true }), d.lr),
    'lr-schedule': withDefault(flag.choice(['cosine', 'constant'], 'after the warm-up: cosine decay to lr/10, or constant'), 'cosine'),
    warmup: flag.int('warm-up steps of the learning rate ; default 5% of --steps', { min: 0 }),
    'weight-decay': withDefault(flag.num('AdamW weight decay (not applied to norms and biases)', { min: 0 }), d.weightDecay),
    'grad-clip': withDefault(flag.num('clip the global gradient norm to this (0: no clipping)', { min: 0 }), 1),
    'matmul-precision': withDefault(flag.choice(['highest', 'high'], "f32 products: highest = f32 arithmetic (the portable FMA kernels; with tensor cores, products with a frozen base weight from a 16-bit checkpoint run exactly on them: the weight's f16 image times three f16 planes of the input); high = about 22 significant bits (f32 has 24, TF32 11) on tensor cores where the GPU has them: two planes times the frozen weight's image, or three f16 products per f32 product (PyTorch's set_float32_matmul_precision('high') names the same trade); f16 products of --mixed-precision are not affected"), 'highest'),
    'gradient-checkpointing': flag.bool('recompute each layer in the backward pass instead of keeping its activations (less memory, ~30% slower)'),
    'val-split': withDefault(flag.num('share of the data windows held out for validation', { min: 0, below: 1 }), 0.05),
    'eval-every': flag.int('evaluate on the validation windows every N steps (default: at the end)', { min: 1 }),
    'eval-batches': withDefault(flag.int('at most this many validation batches per evaluation', { min: 1 }), 20),
    'save-every': flag.int('write a checkpoint every N steps (default: at the end and on Ctrl-C)', { min: 1 }),
    seed: withDefault(flag.int('seed of the initialisation, data order and split', { min: 0 }), 0),
    'log-every': flag.int('without a terminal: a progress line every N steps (default steps/20)', { min: 1 }),
    resume: flag.bool('continue the run in --out from its newest checkpoint (same options; --steps may be raised)'),
    overwrite: flag.bool('replace what --out holds (a model, an adapter, or an earlier run: its checkpoints and metrics)'),
  };
}

/** The GPU context, its f32 products at `precision` (default 'highest'; `--matmul-precision`). */
export async function openContext(precision: F32MatmulPrecision = 'highest'): Promise<Context> {
  const ctx = await createContext();
  setF32MatmulPrecision(ctx, precision);
  return ctx;
}

/** A line about software adapters (so slowness is no surprise). */
export function noteSoftware(ctx: Context, label: string, extra = ''): void {
  if (ctx.info.isSoftware) process.stderr.write(`${label}: running on a CPU software adapter (${ctx.info.description || ctx.info.device}): slow${extra}\n`);
}

/** Default warm-up: 5% of the steps. */
export const warmupOf = (warmup: number | undefined, steps: number): number => warmup ?? Math.floor(steps * 0.05);
