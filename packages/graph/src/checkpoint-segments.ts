import type { ComputeDtype } from '@rusty/autograd';
import type { ModelConfig } from './config';

/**
 * Bytes per token that one decoder layer keeps for its backward, over the bytes per token of its input (the f32
 * residual state a checkpoint keeps): what recomputing one more layer in a checkpointed segment costs, in
 * checkpoints. Counted from the config (Llama-family layers): the MLP's gate, up and activation and its normed
 * input, attention's normed input, q, k, v and output, in the compute dtype's bytes; two f32 residual sums.
 * An estimate for choosing segments (1.1B shape under f16: 8.25; the accounting of qlora-memory-bench measures 8.3).
 */
export function layerSavedRatio(c: ModelConfig, compute: ComputeDtype): number {
  const b = compute === 'f16' ? 2 : 4;
  const { hiddenSize: h, intermediateSize: i, numAttentionHeads: nh, numKeyValueHeads: kv, headDim: hd } = c;
  const bytes = b * (3 * i + h) + b * (h + 2 * nh * hd + 2 * kv * hd) + 8 * h;
  return bytes / (4 * h);
}

/**
 * Decoder layers per checkpointed segment under gradient checkpointing, when the model does not set it: the k of
 * 1..4 with the smallest `ceil(layers / k) + (k - 1) r` (checkpoints alive in the last segment's backward, plus the
 * saved state of the segment's other layers, r = {@link layerSavedRatio}); the smaller k on a tie. Each layer is
 * recomputed once whatever k is, so k changes memory only, never the values. The 1.1B shape (22 layers, r 8.25)
 * under f16 gets 2: 11 + 8.25 checkpoints' worth against 22; a 2-layer model gets 1.
 */
export function checkpointSegment(c: ModelConfig, compute: ComputeDtype): number {
  const r = layerSavedRatio(c, compute);
  const n = c.numHiddenLayers;
  let best = 1;
  for (let k = 2; k <= 4; k++) if (Math.ceil(n / k) + (k - 1) * r < Math.ceil(n / best) + (best - 1) * r) best = k;
  return best;
}
