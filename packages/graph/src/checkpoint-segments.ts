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
 * The lengths (decoder layers, in order) of the checkpointed segments when the model sets no uniform length.
 * Backward recomputes segment j while the inputs of segments 0..j are kept, beside the saved state of its other
 * layers: about (j + 1) + (L_j - 1) r checkpoints' worth (r = {@link layerSavedRatio}). The schedule keeps the largest
 * of these smallest: segments as long as a bound C allows (L_j = 1 + floor((C - j - 1) / r), longer first, single
 * layers last), for the smallest C whose segments cover every layer. Each layer is recomputed once whatever the
 * lengths, so they change memory only, never the values. The 1.1B shape (22 layers, r 8.25) under f16: seven
 * segments of 2 layers, then eight of 1, 15.25 checkpoints' worth against 22 for one layer each and 19.25 for
 * segments of 2 (qlora-memory-bench: 2.764 / 2.639 / 2.577 GiB for 1 each / 2 each / this, with the other changes).
 */
export function checkpointSegments(c: ModelConfig, compute: ComputeDtype): number[] {
  const r = layerSavedRatio(c, compute);
  const n = c.numHiddenLayers;
  const within = (bound: number): number[] | null => {
    const out: number[] = [];
    for (let j = 0, left = n; left > 0; j++) {
      if (j + 1 > bound) return null;
      const l = Math.min(left, 1 + Math.floor((bound - j - 1) / r + 1e-9));
      out.push(l);
      left -= l;
    }
    return out;
  };
  // the bound is met with equality by some segment: (j + 1) + m r for a segment index j and m more layers
  const bounds: number[] = [];
  for (let j = 1; j <= n; j++) for (let m = 0; j + m * r <= n; m++) bounds.push(j + m * r);
  for (const b of bounds.sort((x, y) => x - y)) {
    const s = within(b);
    if (s) return s;
  }
  return Array<number>(n).fill(1);
}
