import { readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ConfigError, ShapeError, type Context, type DType } from '@rusty/backend';
import { CausalLM, parseModelConfig, type ModelConfig } from '@rusty/graph';
import { openCheckpoint } from '../safetensors/checkpoint';
import { Tokenizer } from '../tokenizer/tokenizer';

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
  ropeDtype?: 'f32' | 'f16' | 'bf16';
}

export interface Pretrained {
  model: CausalLM;
  config: ModelConfig;
  /** When the directory has `tokenizer.json`. */
  tokenizer: Tokenizer | null;
  /** The directory the files came from. */
  dir: string;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Load an HF checkpoint of any supported architecture (Llama, Mistral, Qwen2, Qwen3, Gemma 3; picked from
 * `config.json` by the registry of @rusty/graph): `config.json` plus `model.safetensors` (or sharded through
 * `model.safetensors.index.json`), from a directory or a `.safetensors` file with `config.json` beside it, and
 * the tokenizer when `tokenizer.json` is there. Every model parameter must be in the checkpoint with its shape.
 */
export async function loadPretrained(ctx: Context, path: string, opts: LoadPretrainedOptions = {}): Promise<Pretrained> {
  let st;
  try {
    st = await stat(path);
  } catch {
    throw new ConfigError(`${path}: no such file or directory`);
  }
  const dir = st.isDirectory() ? path : dirname(path);
  const configPath = join(dir, 'config.json');
  if (!(await exists(configPath))) throw new ConfigError(`${dir}: no config.json (an HF model directory needs one)`);
  const config = parseModelConfig(await readFile(configPath, 'utf8'), configPath);
  const ckpt = await openCheckpoint(path);
  try {
    let dtype: DType = 'f32';
    if (opts.dtype && opts.dtype !== 'auto') dtype = opts.dtype;
    // from_pretrained computes inv_freq in f32 whatever the checkpoint's dtype (transformers 5.17)
    const ropeDtype = opts.ropeDtype ?? 'f32';
    const model = new CausalLM(ctx, config, {
      empty: true,
      dtype,
      ropeDtype,
      gradientCheckpointing: opts.gradientCheckpointing,
    });
    const missing: string[] = [];
    for (const [name, p] of model.namedParameters()) {
      const info = ckpt.tensors.get(name);
      if (!info) {
        missing.push(name);
        continue;
      }
      if (info.shape.length !== p.shape.length || info.shape.some((d, i) => d !== p.shape[i]))
        throw new ShapeError(
          `${ckpt.path}: tensor '${name}' has shape [${info.shape.join(', ')}], config.json implies [${p.shape.join(', ')}]`,
        );
      const want: DType =
        opts.dtype === 'auto' ? (info.dtype === 'F16' ? 'f16' : info.dtype === 'BF16' ? 'bf16' : 'f32') : dtype;
      p.assign(await ckpt.upload(ctx, name, { dtype: want }));
      p.requiresGrad = opts.requiresGrad ?? p.dtype === 'f32';
    }
    if (missing.length) {
      model.dispose();
      throw new ShapeError(
        `${ckpt.path}: missing ${missing.length} tensor(s) the model needs: ${missing.slice(0, 4).join(', ')}${missing.length > 4 ? ', ...' : ''}`,
      );
    }
    const tokPath = join(dir, 'tokenizer.json');
    const tokenizer = (await exists(tokPath)) ? await Tokenizer.fromFile(tokPath) : null;
    return { model, config, tokenizer, dir };
  } finally {
    await ckpt.close();
  }
}
