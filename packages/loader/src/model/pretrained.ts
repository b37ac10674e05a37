import { ConfigError, formatFromSafetensors, isFloat, quantSpec, ShapeError, type Context, type DType, type FloatDType, type QuantFormat } from '@rusty/backend';
import { CausalLM, parseModelConfig, type ModelConfig } from '@rusty/graph';
import type { FileTree } from '../io/source';
import { openCheckpoint } from '../safetensors/checkpoint';
import { Tokenizer } from '../tokenizer/tokenizer';
import { quantizationOf, quantizeAtLoad } from './quantize';

export interface LoadPretrainedOptions {
  /** Weight storage on the GPU: `f32` (default, trainable), `f16`/`bf16` (kept 16-bit, frozen base weights),
   *  or `auto` (the checkpoint's own float dtype). */
  dtype?: DType | 'auto';
  /** Parameters require grad (default true when the dtype is f32). */
  requiresGrad?: boolean;
  gradientCheckpointing?: boolean;
  /**
   * Precision of the rotary inverse frequencies. `f32` (default) is what `from_pretrained` computes whatever
   * the checkpoint's dtype; `f16`/`bf16` round them the way `model.to(float16)` on a built model does.
   */
  ropeDtype?: FloatDType;
  /** Quantize the linear projections (not the embeddings, norms or LM head) on the GPU as they stream in:
   *  `int8` | `int4` | `nf4` (layouts in @rusty/backend's quantized formats). A checkpoint saved quantized
   *  (`saveQuantized`) loads as stored without it. */
  quantize?: QuantFormat;
  /** Inputs per quantization scale: 32, 64 or 128 (int8 also 0: one per output row); default per format. */
  groupSize?: number;
  /** NF4: double-quantize the scales (default true, as QLoRA). */
  doubleQuant?: boolean;
}

export interface Pretrained {
  model: CausalLM;
  config: ModelConfig;
  /** When the directory has `tokenizer.json`. */
  tokenizer: Tokenizer | null;
  /** The directory the files came from. */
  dir: string;
}

/** The model directory as a tree (Node: the directory of `path`). */
async function modelTree(path: string | FileTree): Promise<FileTree> {
  if (typeof path !== 'string') return path;
  const node = await import('../io/node');
  const kind = await node.pathKind(path);
  if (kind === 'none') throw new ConfigError(`${path}: no such file or directory`);
  return node.nodeTree(kind === 'dir' ? path : node.dirname(path));
}

/** A tree's tokenizer.json, with the special-token names of a tokenizer_config.json beside it. */
async function treeTokenizer(tree: FileTree): Promise<Tokenizer> {
  const names: Record<string, string> = {};
  if (await tree.has('tokenizer_config.json')) {
    const cfg = JSON.parse(await tree.readText('tokenizer_config.json')) as Record<string, unknown>;
    for (const role of ['bos', 'eos', 'pad', 'unk']) {
      const v = cfg[`${role}_token`] as string | { content?: unknown } | undefined;
      const name = typeof v === 'string' ? v : typeof v?.content === 'string' ? v.content : undefined;
      if (name !== undefined) names[role] = name;
    }
  }
  return Tokenizer.fromJSON(await tree.readText('tokenizer.json'), { source: tree.pathOf('tokenizer.json'), specialTokens: names });
}

/**
 * Load an HF checkpoint of any supported architecture (Llama, Mistral, Qwen2, Qwen3, Gemma 3; picked from
 * `config.json` by the registry of @rusty/graph): `config.json` plus `model.safetensors` (or sharded through
 * `model.safetensors.index.json`), from a directory or a `.safetensors` file with `config.json` beside it, and
 * the tokenizer when `tokenizer.json` is there. Every model parameter must be in the checkpoint with its shape.
 * `path` may also be a tree of `@rusty/loader`'s io (files picked in a browser, OPFS).
 */
export async function loadPretrained(ctx: Context, path: string | FileTree, opts: LoadPretrainedOptions = {}): Promise<Pretrained> {
  const tree = await modelTree(path);
  const dir = tree.name;
  const configPath = tree.pathOf('config.json');
  if (!(await tree.has('config.json'))) throw new ConfigError(`${dir}: no config.json (an HF model directory needs one)`);
  const config = parseModelConfig(await tree.readText('config.json'), configPath);
  const ckpt = await openCheckpoint(path);
  try {
    let dtype: DType = 'f32';
    if (opts.dtype && opts.dtype !== 'auto') dtype = opts.dtype;
    // from_pretrained computes inv_freq in f32 whatever the checkpoint's dtype (transformers 5.17)
    const ropeDtype = opts.ropeDtype ?? 'f32';
    const q = opts.quantize ? quantSpec(opts.quantize, opts.groupSize, opts.doubleQuant ?? opts.quantize === 'nf4', 'loadPretrained') : undefined;
    const model = new CausalLM(ctx, config, {
      // quantized, the projections' weights are replaced, never written: 4-byte placeholders for every weight, so
      // the GPU never holds a copy of the model's size while the shards stream in
      empty: q || quantizationOf(ckpt) ? 'placeholder' : true,
      dtype,
      ropeDtype,
      gradientCheckpointing: opts.gradientCheckpointing,
    });
    const quantized = await quantizeAtLoad(ctx, model, ckpt, { spec: q });
    const missing: string[] = [];
    for (const [name, p] of model.namedParameters()) {
      if (quantized?.has(name)) continue;
      const info = ckpt.tensors.get(name);
      if (!info) {
        missing.push(name);
        continue;
      }
      if (info.shape.length !== p.shape.length || info.shape.some((d, i) => d !== p.shape[i]))
        throw new ShapeError(
          `${ckpt.path}: tensor '${name}' has shape [${info.shape.join(', ')}], config.json implies [${p.shape.join(', ')}]`,
        );
      const stored = formatFromSafetensors(info.dtype);
      const want: DType = opts.dtype === 'auto' ? (stored && isFloat(stored) ? stored : 'f32') : dtype;
      p.assign(await ckpt.upload(ctx, name, { dtype: want }));
      p.requiresGrad = opts.requiresGrad ?? p.dtype === 'f32';
    }
    if (missing.length) {
      model.dispose();
      throw new ShapeError(
        `${ckpt.path}: missing ${missing.length} tensor(s) the model needs: ${missing.slice(0, 4).join(', ')}${missing.length > 4 ? ', ...' : ''}`,
      );
    }
    const tokenizer = !(await tree.has('tokenizer.json')) ? null : typeof path === 'string' ? await Tokenizer.fromFile(tree.pathOf('tokenizer.json')) : await treeTokenizer(tree);
    return { model, config, tokenizer, dir };
  } finally {
    await ckpt.close();
  }
}
