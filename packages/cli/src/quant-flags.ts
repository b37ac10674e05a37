// The --quantize / --group-size flags of finetune and generate, and what they become for the loader.
import { QUANT_FORMATS, quantSpec, type QuantSpec } from '@rusty/backend';
import type { QuantizationMetadata } from '@rusty/loader';
import { flag } from './args';
import { UsageError } from './errors';
import { describeQuantMeta } from './model-io';

export const quantFlags = {
  quantize: flag.choice(
    QUANT_FORMATS as unknown as readonly ['int8', 'int4', 'nf4'],
    "quantize the model's linear projections on the GPU as it loads (embeddings, norms and the LM head stay as stored; " +
      'a model saved quantized loads as stored without it): ' +
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

/**
 * A model saved quantized (`saveQuantized`) loads as stored: one line saying so (on stderr), and a `--quantize`
 * that asks for another format or group size is refused before the GPU starts (the codes cannot be re-quantized).
 */
export function noteSavedQuantized(cmd: string, model: string, saved: QuantizationMetadata | null, asked: QuantSpec | undefined): void {
  if (!saved) return;
  const n = Object.keys(saved.modules).length;
  if (asked && (asked.format !== saved.format || asked.groupSize !== saved.group_size))
    throw new UsageError(
      `${cmd}: --quantize ${asked.format}${asked.groupSize !== saved.group_size ? ` --group-size ${asked.groupSize}` : ''}: --model ${model} is saved quantized ` +
        `(${describeQuantMeta(saved)}) and loads as stored; leave out --quantize`,
    );
  process.stderr.write(`${cmd}: --model ${model} is saved quantized (${describeQuantMeta(saved)}): its ${n} projections load as stored\n`);
}
