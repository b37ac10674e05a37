/** Model and run sizes for training from scratch: `tiny` for CPU software adapters, `small` for real GPUs. */
export interface SizePreset {
  hiddenSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  intermediateSize: number;
  seqLen: number;
  batchSize: number;
  steps: number;
  lr: number;
}

export const PRESETS: Record<'tiny' | 'small', SizePreset> = {
  // ~0.11M parameters; lavapipe trains it at ~1-3k tokens/s (a step of 4 x 64 tokens in 0.1-0.3 s), so 300 steps
  // take one to two minutes; small batches and a high learning rate learn the most per second there
  tiny: { hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, intermediateSize: 176, seqLen: 64, batchSize: 4, steps: 300, lr: 1e-2 },
  // ~3.3M parameters
  small: { hiddenSize: 256, layers: 4, heads: 8, kvHeads: 4, intermediateSize: 688, seqLen: 256, batchSize: 16, steps: 600, lr: 2e-3 },
};

export const presetFor = (isSoftware: boolean): SizePreset => (isSoftware ? PRESETS.tiny : PRESETS.small);
