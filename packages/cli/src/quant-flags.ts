// The --quantize / --group-size flags of finetune and generate, and what they become for the loader.
import { QUANT_FORMATS, quantSpec, type QuantSpec } from '@rusty/backend';
import { flag } from './args';
import { UsageError } from './errors';

export const quantFlags = {
  quantize: flag.choice(
    QUANT_FORMATS as unknown as readonly ['int8', 'int4', 'nf4'],
    "quantize the model's linear projections on the GPU as it loads (embeddings, norms and the LM head stay as stored): " +
      'nf4 (QLoRA: 4-bit NormalFloat, blocks of 64, double-quantized scales), int4 (blocks of --group-size, f16 scales), ' +
      'int8 (one scale per output row, or per --group-size block)',
  ),
  'group-size': flag.int('inputs per quantization scale with --quantize: 32, 64 or 128 (int8 also 0: one per row); default 64 (int8: 0)', {
    min: 0,
  }),
};

/** The loader's quantization spec from the flags (undefined without --quantize). */
export function quantSpecOf(o: { quantize?: string; groupSize?: number }): QuantSpec | undefined {
  if (!o.quantize) {
    if (o.groupSize !== undefined) throw new UsageError('--group-size needs --quantize');
    return undefined;
  }
  try {
    return quantSpec(o.quantize, o.groupSize, o.quantize === 'nf4', '--quantize');
  } catch (e) {
    throw new UsageError((e as Error).message.replace('--quantize: group size', '--group-size'));
  }
}
