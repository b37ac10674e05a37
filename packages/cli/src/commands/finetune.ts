import { stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fmtBytes, type Context, type QuantSpec } from '@rusty/backend';
import { applyLora, dequantizeLinears, loraTargets, mergeLora, parameterShapes, quantizedLinears, type CausalLM, type ModelConfig } from '@rusty/graph';
import type { Tokenizer } from '@rusty/loader';
import { flag, parseArgs, withDefault, type CommandSpec, type OptionsOf } from '../args';
import type { CorpusSource } from '../corpus';
import { EXIT_OK, InputError, UsageError } from '../errors';
import { checkWeights, loadModel, readModelConfig, requirePath, saveAdapter, saveModelDir } from '../model-io';
import { fmtCount } from '../progress';
import { noteSavedQuantized, quantFlags, quantSpecOf } from '../quant-flags';
import { checkOutTarget, prepareOutDir } from '../out-dir';
import {
  checkDataPaths,
  checkFits,
  checkWarmup,
  loadData,
  markExported,
  packFor,
  runTraining,
  saveRunOptions,
  summaryLines,
  type RunResult,
} from '../training';
import { dataFlags, loopFlags, noteSoftware, openContext, warmupOf } from './common';
import { reportInterrupted, resumedOptions } from './run-control';


const flags = {
  model: flag.str('the base model: an HF directory (config.json + model.safetensors or shards) or a .safetensors file beside its config.json', {
    short: 'm',
    value: '<dir|file>',
  }),
  data: flag.strs('training data: text files, directories, or JSONL ({"text"} or {"prompt","response"} lines; prompts are not learned)', { short: 'd' }),
  ...dataFlags,
  out: withDefault(flag.str('output directory of the PEFT adapter (adapter_config.json, adapter_model.safetensors), metrics, loss.svg', { short: 'o', value: '<dir>' }), 'rusty-lora'),
  tokenizer: flag.str("a tokenizer.json to use instead of the model directory's", { value: '<file>' }),
  r: withDefault(flag.int('LoRA rank', { min: 1 }), 8),
  alpha: withDefault(flag.num('LoRA alpha (the update is scaled by alpha / r)', { positive: true }), 16),
  targets: withDefault(flag.list('modules to adapt, or "all" (every linear projection of the architecture)', { value: '<names>' }), ['q_proj', 'k_proj', 'v_proj', 'o_proj']),
  'seq-len': withDefault(flag.int('tokens per training sequence', { min: 2 }), 256),
  pack: withDefault(flag.choice(['auto', 'yes', 'no'], 'concatenate documents into full windows (yes), or one padded window per document (no); auto: no for JSONL'), 'auto'),
  ...loopFlags({ steps: 100, lr: 2e-4, weightDecay: 0, batch: 4 }),
  'mixed-precision': withDefault(flag.choice(['no', 'f16', 'bf16'], "mixed precision as PyTorch AMP: matmuls and attention on f16 inputs with f32 accumulation (tensor cores where the GPU has them), norms, softmax, loss and LoRA weights in f32, dynamic loss scaling; frozen base weights stored in f16, or in bf16 (a bf16 checkpoint kept as is, rounded to f16 per product); a weight beyond f16's range is an error naming it"), 'no'),
  ...quantFlags,
  merge: flag.bool('also write the base model with the adapter merged into its weights, in <out>/merged'),
  'merge-dtype': flag.choice(['f32', 'f16', 'bf16'], 'storage dtype of the merged model (default f32; with --quantize, the dtype the base was stored in)'),
  config: flag.str('a JSON file of options (keys as these flags: "r", "lr", "targets", "batch-size", ...)', { value: '<file>', cliOnly: true }),
};

export const finetuneSpec: CommandSpec<typeof flags> = {
  name: 'finetune',
  summary: 'fine-tune a safetensors model (Llama, Mistral, Qwen2, Qwen3, Gemma 3) with LoRA',
  usage: 'rusty finetune --model <dir|file.safetensors> --data <file|dir|jsonl>... [options]',
  description: `Freezes the base model, adds LoRA adapters to the target projections and trains them. Writes a PEFT
adapter directory (loadable by rusty generate --adapter and by PEFT's PeftModel.from_pretrained) and, with
--merge, a full HF model with the update folded into the weights. Checkpoints go to <out>/checkpoints
(Ctrl-C saves one; --resume continues), metrics to <out>/metrics.jsonl, the loss curve to <out>/loss.svg.`,
  flags,
  configFlag: 'config',
  positionals: { name: '', min: 0, max: 0 },
  examples: [
    'rusty finetune --model ./SmolLM2-135M --data ./data.jsonl --steps 500 --lr 2e-4 --r 16 --alpha 32',
    'rusty finetune --model ./TinyLlama-1.1B --data ./chat.jsonl --mixed-precision bf16 --gradient-checkpointing \\',
    '    --batch-size 2 --gradient-accumulation 8 --seq-len 512 --merge',
    'rusty finetune --model rusty-model --data notes/ --include "**/*.md" --targets all --config lora.json',
    'rusty finetune --model ./SmolLM2-135M --data ./data.jsonl --out my-lora --resume',
  ],
};

type FinetuneOpts = OptionsOf<typeof flags>;

const RESUMABLE = ['steps', 'logEvery', 'saveEvery', 'evalEvery', 'resume', 'overwrite', 'out', 'config', 'merge', 'mergeDtype', 'matmulPrecision'];

export interface FinetuneOutcome {
  model: CausalLM;
  tokenizer: Tokenizer;
  run: RunResult;
  out: string;
  mergedDir: string | null;
  interrupted: boolean;
  trainable: number;
}

/** `nf4 (blocks of 64, double-quantized scales)` */
function describeSpec(s: QuantSpec): string {
  return `${s.format} (${s.groupSize ? `blocks of ${s.groupSize}` : 'one scale per row'}${s.doubleQuant ? ', double-quantized scales' : ''})`;
}

function resolveTargets(t: string[], config: ModelConfig): string[] {
  return t.length === 1 && (t[0] === 'all' || t[0] === 'all-linear') ? [...loraTargets(config)] : t;
}


/**
 * LoRA fine-tuning of a model (already loaded, or loaded from `o.model`) with resolved options; used by
 * `rusty demo` too.
 */
export async function finetuneModel(
  ctx: Context,
  o: FinetuneOpts,
  given?: { model: CausalLM; tokenizer: Tokenizer; baseName: string; corpus?: CorpusSource; title?: string },
): Promise<FinetuneOutcome> {
  const out = resolve(o.out);
  const mp = o.mixedPrecision === 'no' ? undefined : o.mixedPrecision;
  let model: CausalLM;
  let tokenizer: Tokenizer;
  let baseDir: string | null = null;
  if (given) ({ model, tokenizer } = given);
  else {
    const { config } = await readModelConfig(o.model!);
    checkFits(ctx, config, o.batchSize!, o.seqLen, mp ? 2 : 4);
    const loaded = await loadModel(ctx, o.model!, { dtype: mp ?? 'f32', requiresGrad: false, gradientCheckpointing: o.gradientCheckpointing, tokenizer: o.tokenizer, quantize: quantSpecOf(o) });
    ({ model, tokenizer } = loaded);
    baseDir = loaded.dir;
  }
  const config = model.config;
  if (!given) noteSoftware(ctx, 'finetune');
  if (o.seqLen > config.maxPositionEmbeddings) throw new UsageError(`finetune: --seq-len ${o.seqLen} exceeds the model's max_position_embeddings ${config.maxPositionEmbeddings}`);
  if (o.gradientCheckpointing) model.gradientCheckpointing = true;
  const targets = resolveTargets(o.targets, model.config);
  const quantized = [...quantizedLinears(model).values()];
  applyLora(model, { r: o.r, alpha: o.alpha, targetModules: targets, seed: o.seed });
  const trainable = model.trainableParameters().reduce((n, [, t]) => n + t.size, 0);
  // a quantized weight's parameter holds its packed codes: count its [out, in] elements
  const total = model.parameters().reduce((n, t) => n + t.size, 0) + quantized.reduce((n, q) => n + q.inFeatures * q.outFeatures - q.weight.size, 0);
  const corpus = given?.corpus ?? { name: o.data!.join(', '), paths: o.data!, include: o.include, exclude: o.exclude };
  const pack = await packFor(o.pack, corpus.paths);
  process.stderr.write(`finetune: data: ${corpus.name}${pack ? '' : ' (one window per document)'}\n`);
  const data = await loadData(corpus, { tokenizer, seqLen: o.seqLen, pack, valSplit: o.valSplit, seed: o.seed });
  process.stderr.write(`finetune: ${data.summary}\n`);
  process.stderr.write(
    `finetune: LoRA r=${o.r} alpha=${o.alpha} on ${targets.join(', ')}: ${fmtCount(trainable)} trainable of ${fmtCount(total)} parameters` +
      `${mp ? `, frozen weights in ${mp}` : ''}${o.gradientCheckpointing ? ', gradient checkpointing' : ''}\n`,
  );
  if (quantized.length)
    process.stderr.write(
      `finetune: QLoRA: ${quantized.length} base projections quantized to ${describeSpec(quantized[0]!.spec)} ` +
        `(${fmtBytes(quantized.reduce((n, q) => n + q.weightBytes, 0))} on the GPU)\n`,
  );
  // the base model of the demo's run is the directory it was saved to (so that --resume can load it)
  await saveRunOptions(out, 'finetune', { ...o, out, model: o.model ?? given?.baseName });
  const run = await runTraining({
    label: 'finetune',
    ctx,
    model,
    train: data.train,
    validation: data.validation,
    steps: o.steps!,
    batchSize: o.batchSize!,
    lr: o.lr!,
    warmup: warmupOf(o.warmup, o.steps!),
    schedule: o.lrSchedule,
    weightDecay: o.weightDecay,
    gradClip: o.gradClip,
    accumulation: o.gradientAccumulation,
    evalEvery: o.evalEvery,
    evalBatches: o.evalBatches,
    saveEvery: o.saveEvery,
    outDir: out,
    mixedPrecision: mp,
    resume: !!o.resume,
    seed: o.seed,
    logEvery: o.logEvery,
    title: given?.title ?? `rusty finetune: LoRA r=${o.r} on ${baseDir ?? given?.baseName ?? 'the model'}`,
  });
  const interrupted = run.fit.reason === 'interrupted';
  let mergedDir: string | null = null;
  if (!interrupted) {
    await saveAdapter(model, out, baseDir ?? given?.baseName);
    if (o.merge) {
      mergedDir = join(out, 'merged');
      let mergeDtype = o.mergeDtype ?? 'f32';
      if (quantized.length) {
        // merging needs the dense weights: dequantize the base back to the dtype it was loaded from, then add
        const source = quantized[0]!.sourceDtype as 'f32' | 'f16' | 'bf16';
        mergeDtype = o.mergeDtype ?? source;
        dequantizeLinears(model);
        process.stderr.write(
          `finetune: --merge: dequantized the ${quantized[0]!.spec.format} base back to ${source} (its stored dtype), added the LoRA update, ` +
            `writing ${mergeDtype} weights (the quantization error of the base stays in them)\n`,
        );
      }
      mergeLora(model);
      await saveModelDir(model, tokenizer, mergedDir, { dtype: mergeDtype, copyFrom: baseDir ?? undefined });
    }
    await markExported(out, run.fit.step);
  }
  return { model, tokenizer, run, out, mergedDir, interrupted, trainable };
}

export async function finetuneCommand(argv: string[]): Promise<number> {
  const parsed = parseArgs(finetuneSpec, argv);
  let o = parsed.opts;
  const out = resolve(o.out);
  await checkOutTarget(out);
  if (o.resume) o = (await resumedOptions('finetune', out, o as Record<string, unknown>, parsed.onCommandLine, RESUMABLE)) as FinetuneOpts;
  if (!o.model) throw new UsageError('finetune: --model <dir|file.safetensors> is required (see rusty finetune --help)');
  if (!o.data?.length) throw new UsageError('finetune: --data <file|dir|jsonl> is required (see rusty finetune --help)');
  // everything that can be checked without the GPU first: paths, config, weight headers, tokenizer
  const { dir, config } = await readModelConfig(o.model);
  noteSavedQuantized('finetune', o.model, await checkWeights(o.model, config), quantSpecOf(o));
  const linears = new Set([...parameterShapes(config).keys()].filter((k) => k.endsWith('_proj.weight')).map((k) => k.split('.').at(-2)!));
  const unknown = resolveTargets(o.targets, config).filter((t) => !linears.has(t.split('.').pop()!));
  if (unknown.length) throw new UsageError(`finetune: --targets ${unknown.join(',')}: not a projection of this model (it has ${[...linears].join(', ')}, or "all")`);
  if (o.tokenizer) await requirePath(o.tokenizer, '--tokenizer', 'file');
  else
    try {
      await stat(join(dir, 'tokenizer.json'));
    } catch {
      throw new InputError(`--model ${o.model}: no tokenizer.json in ${dir}; give one with --tokenizer <tokenizer.json>`);
    }
  await checkDataPaths(o.data);
  checkWarmup(o.warmup, o.steps!);
  const lock = await prepareOutDir(out, { resume: !!o.resume, overwrite: !!o.overwrite, command: 'rusty finetune' });
  try {
    const ctx = await openContext(o.matmulPrecision);
    try {
      const r = await finetuneModel(ctx, o);
      if (r.interrupted) return reportInterrupted('finetune', r.run, o.out);
      const lines = summaryLines('finetune', r.run, [
        `  adapter     ${r.out} (adapter_config.json, adapter_model.safetensors; ${fmtCount(r.trainable)} parameters)`,
        ...(r.mergedDir ? [`  merged      ${r.mergedDir} (config.json, model.safetensors, tokenizer.json)`] : []),
      ]);
      lines.push(`  next        rusty generate --model ${o.model} --adapter ${o.out}${o.quantize ? ` --quantize ${o.quantize}` : ''} --prompt "..."`);
      process.stdout.write(lines.join('\n') + '\n');
      r.model.dispose();
      return EXIT_OK;
    } finally {
      ctx.destroy();
    }
  } finally {
    lock.release();
  }
}
