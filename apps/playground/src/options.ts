// The run options of the page and their defaults. Fine-tuning uses the same names and defaults as
// `rusty finetune` (packages/cli/src/commands/finetune.ts and loopFlags in commands/common.ts own them; the test
// options.test.ts reads the CLI's flag table and fails if these drift). Pretraining uses the CLI's `tiny` size
// preset (packages/cli/src/presets.ts), the one `rusty train` picks on a CPU software adapter.

/** LoRA fine-tuning options (camelCase names of `rusty finetune`'s flags). */
export interface FinetuneOptions {
  r: number;
  alpha: number;
  targets: string[];
  seqLen: number;
  pack: 'auto' | 'yes' | 'no';
  steps: number;
  batchSize: number;
  gradientAccumulation: number;
  lr: number;
  lrSchedule: 'cosine' | 'constant';
  /** Default: 5% of the steps. */
  warmup?: number;
  weightDecay: number;
  gradClip: number;
  gradientCheckpointing: boolean;
  seed: number;
}

export const FINETUNE_DEFAULTS: FinetuneOptions = {
  r: 8,
  alpha: 16,
  targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
  seqLen: 256,
  pack: 'auto',
  steps: 100,
  batchSize: 4,
  gradientAccumulation: 1,
  lr: 2e-4,
  lrSchedule: 'cosine',
  warmup: undefined,
  weightDecay: 0,
  gradClip: 1,
  gradientCheckpointing: false,
  seed: 0,
};

/** Every projection LoRA can adapt (`--targets all`). */
export const ALL_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

/** The model and run of the built-in start: `rusty train`'s `tiny` preset (about 0.11M parameters). */
export const TINY_PRESET = { hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, intermediateSize: 176, seqLen: 64, batchSize: 4, steps: 300, lr: 1e-2 };

/** Default warm-up: 5% of the steps (as the CLI). */
export const warmupOf = (warmup: number | undefined, steps: number): number => warmup ?? Math.floor(steps * 0.05);

/** `--targets all` expands to every projection. */
export const resolveTargets = (t: string[]): string[] => (t.length === 1 && (t[0] === 'all' || t[0] === 'all-linear') ? ALL_TARGETS : t);
