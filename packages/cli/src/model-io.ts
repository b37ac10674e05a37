// Reading and writing HF model directories and PEFT adapters for the CLI: checks of paths, configs and weight
// headers before the GPU starts, around @rusty/loader's loadPretrained / loadLoraAdapter / saveLoraAdapter.
import { copyFile, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ConfigError, formatOf, ShapeError, type Context, type DType, type FloatDType, type QuantSpec } from '@rusty/backend';
import {
  modelConfigToJSON,
  parameterShapes,
  parseModelConfig,
  type CausalLM,
  type ModelConfig,
  type LoraConfig,
  type Module,
} from '@rusty/graph';
import {
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  loadLoraAdapter,
  loadPretrained,
  saveLoraAdapter,
  ByteTokenizer, numberToBf16Bits, numberToF16Bits, openCheckpoint, quantizationOf, readSafetensors, Tokenizer, writeSafetensors, type QuantizationMetadata, type TensorToWrite } from '@rusty/loader';
import { z } from 'zod';
import { InputError } from './errors';

export type SaveDType = FloatDType;

async function kindOf(p: string): Promise<'file' | 'dir' | 'none'> {
  try {
    return (await stat(p)).isDirectory() ? 'dir' : 'file';
  } catch {
    return 'none';
  }
}

async function exists(p: string): Promise<boolean> {
  return (await kindOf(p)) !== 'none';
}

/** Check that a path exists (and is a file or directory as wanted), with a message naming the flag. */
export async function requirePath(path: string, what: string, want?: 'file' | 'dir'): Promise<'file' | 'dir'> {
  const k = await kindOf(path);
  if (k === 'none') throw new InputError(`${what} ${path}: no such file or directory`);
  if (want && k !== want) throw new InputError(`${what} ${path}: is a ${k === 'dir' ? 'directory' : 'file'}, expected a ${want === 'dir' ? 'directory' : 'file'}`);
  return k;
}

/** Where a model's files are: `path` is a model directory or a `.safetensors` file with config.json beside it. */
export async function modelDirOf(path: string, what = '--model'): Promise<string> {
  const k = await requirePath(path, what);
  const dir = k === 'dir' ? path : dirname(path);
  if (k === 'file' && !/\.safetensors$|\.index\.json$/.test(path))
    throw new InputError(`${what} ${path}: expected a model directory or a .safetensors file`);
  if (!(await exists(join(dir, 'config.json'))))
    throw new InputError(`${what} ${path}: no config.json in ${dir} (an HF model directory needs config.json and model.safetensors)`);
  return dir;
}

/** Read and validate a model's config.json (no GPU needed): unsupported architectures fail here. */
export async function readModelConfig(path: string, what = '--model'): Promise<{ dir: string; config: ModelConfig }> {
  const dir = await modelDirOf(path, what);
  const file = join(dir, 'config.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new InputError(`${file}: cannot read: ${(e as Error).message}`);
  }
  return { dir, config: parseModelConfig(text, file) };
}

/** `nf4, blocks of 64, double-quantized scales` */
export function describeQuantMeta(q: Pick<QuantizationMetadata, 'format' | 'group_size' | 'double_quant'>): string {
  return `${q.format}, ${q.group_size ? `blocks of ${q.group_size}` : 'one scale per row'}${q.double_quant ? ', double-quantized scales' : ''}`;
}

/**
 * Check the checkpoint's tensor names and shapes against what the config implies, reading only the headers:
 * a corrupt file, a missing tensor or a shape mismatch fails before any GPU memory is used. A checkpoint saved
 * quantized (`saveQuantized`) has its projections' codes under their weight names: their `[out, in]` shapes are
 * checked from its quantization metadata. Returns that metadata (null for an ordinary checkpoint).
 */
export async function checkWeights(path: string, config: ModelConfig): Promise<QuantizationMetadata | null> {
  const ck = await openCheckpoint(path);
  try {
    const expected = parameterShapes(config);
    const quant = quantizationOf({ metadata: ck.metadata, path: ck.path ?? path });
    const missing: string[] = [];
    for (const [name, shape] of expected) {
      const info = ck.tensors.get(name);
      if (!info) {
        missing.push(name);
        continue;
      }
      const q = quant && name.endsWith('.weight') ? quant.modules[name.slice(0, -'.weight'.length)] : undefined;
      const stored = q ? q.shape : info.shape;
      if (q && (stored.length !== shape.length || stored.some((d, i) => d !== shape[i])))
        throw new ShapeError(`${ck.path ?? path}: quantized tensor '${name}' is [${stored.join(', ')}] in its quantization metadata, config.json implies [${shape.join(', ')}]`);
      if (stored.length !== shape.length || stored.some((d, i) => d !== shape[i]))
        throw new ShapeError(`${ck.path ?? path}: tensor '${name}' has shape [${info.shape.join(', ')}], config.json implies [${shape.join(', ')}]`);
    }
    if (missing.length)
      throw new ShapeError(
        `${ck.path ?? path}: missing ${missing.length} tensor(s) the model needs: ${missing.slice(0, 4).join(', ')}${missing.length > 4 ? ', ...' : ''}`,
      );
    return quant;
  } finally {
    await ck.close();
  }
}

/** Load a tokenizer.json (or the tokenizer of a model directory). */
export async function loadTokenizer(path: string, what = '--tokenizer'): Promise<Tokenizer> {
  const k = await requirePath(path, what);
  const file = k === 'dir' ? join(path, 'tokenizer.json') : path;
  if (k === 'dir' && !(await exists(file))) throw new InputError(`${what} ${path}: no tokenizer.json in the directory`);
  return Tokenizer.fromFile(file);
}

export interface LoadedModel {
  model: CausalLM;
  config: ModelConfig;
  tokenizer: Tokenizer;
  dir: string;
}

export interface LoadModelOptions {
  /** Weight storage: f32 (trainable), or f16/bf16 (frozen 16-bit weights). */
  dtype?: DType;
  requiresGrad?: boolean;
  gradientCheckpointing?: boolean;
  /** A tokenizer.json to use instead of the model directory's. */
  tokenizer?: string;
  /** Load without a tokenizer (token ids in and out): `tokenizer` is then null when the directory has none. */
  optionalTokenizer?: boolean;
  /** Quantize the linear projections on the GPU as they load (`--quantize`). */
  quantize?: QuantSpec;
}

/**
 * Load an HF model directory (or `.safetensors` file with config.json beside it) and its tokenizer. The config
 * and the weight headers are checked before the GPU is touched.
 */
export async function loadModel(ctx: Context, path: string, o: LoadModelOptions & { optionalTokenizer: true }): Promise<Omit<LoadedModel, 'tokenizer'> & { tokenizer: Tokenizer | null }>;
export async function loadModel(ctx: Context, path: string, o?: LoadModelOptions): Promise<LoadedModel>;
export async function loadModel(ctx: Context, path: string, o: LoadModelOptions = {}): Promise<Omit<LoadedModel, 'tokenizer'> & { tokenizer: Tokenizer | null }> {
  const q = o.quantize;
  const r = await loadPretrained(ctx, path, {
    dtype: o.dtype ?? 'f32',
    requiresGrad: o.requiresGrad,
    gradientCheckpointing: o.gradientCheckpointing,
    ...(q ? { quantize: q.format, groupSize: q.groupSize, doubleQuant: q.doubleQuant } : {}),
  });
  let tokenizer = r.tokenizer;
  try {
    if (o.tokenizer) tokenizer = await loadTokenizer(o.tokenizer);
    if (!tokenizer && !o.optionalTokenizer) throw new InputError(`--model ${path}: no tokenizer.json in ${r.dir}; give one with --tokenizer <tokenizer.json>`);
    if (tokenizer) checkVocab(tokenizer, r.config, o.tokenizer ?? join(r.dir, 'tokenizer.json'));
  } catch (e) {
    r.model.dispose();
    throw e;
  }
  if (o.gradientCheckpointing) r.model.gradientCheckpointing = true;
  return { model: r.model, config: r.config, tokenizer, dir: r.dir };
}

/** A tokenizer whose ids do not fit the model's embedding is refused. */
export function checkVocab(tok: Tokenizer, config: ModelConfig, where: string): void {
  if (tok.vocabSize > config.vocabSize)
    throw new ShapeError(`${where}: the tokenizer has ${tok.vocabSize} ids but the model's vocab_size is ${config.vocabSize} (a tokenizer for a different model?)`);
}

/** Files of an HF tokenizer that travel with the weights. */
const TOKENIZER_FILES = ['tokenizer_config.json', 'special_tokens_map.json', 'generation_config.json'];

/**
 * Write an HF model directory: config.json, model.safetensors (HF names, f32 unless `dtype` says otherwise;
 * LoRA A/B tensors are left out: merge them first) and tokenizer.json (+ tokenizer_config.json). Loadable by
 * `rusty` and by HF transformers' `AutoModelForCausalLM.from_pretrained`.
 */
export async function saveModelDir(
  model: CausalLM,
  tokenizer: Tokenizer,
  dir: string,
  o: { dtype?: SaveDType; copyFrom?: string; metadata?: Record<string, string> } = {},
): Promise<void> {
  const dtype = o.dtype ?? 'f32';
  await mkdir(dir, { recursive: true });
  const st = formatOf(dtype).safetensors as TensorToWrite['dtype'];
  const entries: [string, TensorToWrite][] = [];
  for (const [name, p] of model.namedParameters()) {
    if (/\.lora_[AB]\.weight$/.test(name)) continue;
    entries.push([
      name,
      {
        dtype: st,
        shape: [...p.shape],
        data: async () => {
          const f = (await p.toArray()) as Float32Array;
          if (dtype === 'f32') return f;
          const conv = dtype === 'f16' ? numberToF16Bits : numberToBf16Bits;
          const h = new Uint16Array(f.length);
          for (let i = 0; i < f.length; i++) h[i] = conv(f[i]!);
          return h;
        },
      },
    ]);
  }
  await writeSafetensors(join(dir, 'model.safetensors'), entries, { format: 'pt', ...o.metadata });
  const cfg = { ...modelConfigToJSON(model.config), torch_dtype: formatOf(dtype).torch };
  await writeJsonAtomic(join(dir, 'config.json'), cfg);
  await writeJsonAtomic(join(dir, 'tokenizer.json'), tokenizer.toJSON());
  let copied = false;
  if (o.copyFrom && o.copyFrom !== dir)
    for (const f of TOKENIZER_FILES)
      if (await exists(join(o.copyFrom, f))) {
        await copyFile(join(o.copyFrom, f), join(dir, f));
        if (f === 'tokenizer_config.json') copied = true;
      }
  if (!copied) {
    const name = (id: number | undefined) => (id === undefined ? null : tokenizer.idToToken(id) ?? null);
    await writeJsonAtomic(join(dir, 'tokenizer_config.json'), {
      tokenizer_class: 'PreTrainedTokenizerFast',
      bos_token: name(tokenizer.bosTokenId),
      eos_token: name(tokenizer.eosTokenId),
      pad_token: name(tokenizer.padTokenId),
      model_max_length: model.config.maxPositionEmbeddings,
      clean_up_tokenization_spaces: false,
    });
  }
}

export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  await writeFile(tmp, JSON.stringify(value, null, 2) + '\n');
  await rename(tmp, path);
}

/** A byte-level tokenizer for models trained from scratch: ids 0-255 are bytes, then <|bos|> <|eos|> <|pad|>. */
export function defaultTokenizer(): Tokenizer {
  return new ByteTokenizer();
}

// ---- PEFT adapters ------------------------------------------------------------------------------------------

export { ADAPTER_CONFIG, ADAPTER_WEIGHTS };

const adapterSchema = z
  .object({
    peft_type: z.string().optional(),
    r: z.number().int().positive(),
    lora_alpha: z.number().positive(),
    target_modules: z.union([z.array(z.string()).min(1), z.string()]),
    use_rslora: z.boolean().nullish(),
    use_dora: z.boolean().nullish(),
    bias: z.string().nullish(),
  })
  .passthrough();

/** Read a PEFT adapter_config.json (no GPU): a missing or malformed adapter fails here. */
export async function readAdapterConfig(dir: string, what = '--adapter'): Promise<LoraConfig & { baseModel: string | null }> {
  await requirePath(dir, what, 'dir');
  const p = join(dir, ADAPTER_CONFIG);
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(p, 'utf8'));
  } catch (e) {
    throw new ConfigError(`${what} ${dir}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? `no ${ADAPTER_CONFIG} (not a PEFT adapter directory)` : `${ADAPTER_CONFIG} is not valid JSON`}`);
  }
  const r = adapterSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ConfigError(`${p}: field '${i.path.join('.')}': ${i.message}`);
  }
  const c = r.data;
  if (c.peft_type && c.peft_type !== 'LORA') throw new ConfigError(`${p}: peft_type is '${c.peft_type}'; Rusty loads LoRA adapters`);
  if (c.use_dora) throw new ConfigError(`${p}: use_dora is true; Rusty loads plain LoRA adapters`);
  if (!(await exists(join(dir, ADAPTER_WEIGHTS)))) throw new InputError(`${what} ${dir}: no ${ADAPTER_WEIGHTS}`);
  const base = (raw as { base_model_name_or_path?: unknown }).base_model_name_or_path;
  return {
    r: c.r,
    alpha: c.lora_alpha,
    targetModules: typeof c.target_modules === 'string' ? new RegExp(c.target_modules) : c.target_modules,
    useRslora: !!c.use_rslora,
    baseModel: typeof base === 'string' ? base : null,
  };
}

/**
 * Check a PEFT adapter's tensors against the base model's config from the headers alone (no GPU): an adapter
 * trained for a different base model fails here, naming the tensor.
 */
export async function checkAdapterFits(dir: string, config: ModelConfig, modelPath: string): Promise<void> {
  const cfg = await readAdapterConfig(dir);
  const file = join(dir, ADAPTER_WEIGHTS);
  const st = await readSafetensors(file);
  try {
    const shapes = parameterShapes(config);
    const hint = `(adapter for a different base model than ${modelPath}?)`;
    for (const [name, info] of st.tensors) {
      const m = /^base_model\.model\.(.+)\.lora_([AB])(?:\.default)?\.weight$/.exec(name);
      if (!m) throw new ShapeError(`${file}: tensor '${name}' is not a LoRA weight (base_model.model.<module>.lora_A.weight)`);
      const base = shapes.get(`${m[1]}.weight`);
      if (!base) throw new ShapeError(`${file}: '${name}' adapts '${m[1]}', which the model does not have ${hint}`);
      const [out, inp] = base as [number, number];
      const want = m[2] === 'A' ? [cfg.r, inp] : [out, cfg.r];
      if (info.shape.length !== 2 || info.shape[0] !== want[0] || info.shape[1] !== want[1])
        throw new ShapeError(`${file}: '${name}' has shape [${info.shape.join(', ')}], the model needs [${want.join(', ')}] ${hint}`);
    }
  } finally {
    await st.close();
  }
}

/** Apply a PEFT LoRA adapter directory to a model (wraps the target Linears, loads A and B). */
export async function loadAdapter(model: Module, dir: string): Promise<void> {
  await readAdapterConfig(dir);
  await loadLoraAdapter(model, dir);
}

/** Write the model's LoRA weights as a PEFT adapter directory (adapter_config.json + adapter_model.safetensors). */
export async function saveAdapter(model: Module, dir: string, baseModel?: string): Promise<void> {
  await saveLoraAdapter(model, dir, { baseModel });
}
