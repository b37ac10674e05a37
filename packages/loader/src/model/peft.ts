import { ConfigError, download, ShapeError } from '@rusty/backend';
import { applyLora, loraModules, type LoraConfig, type Module } from '@rusty/graph';
import { z } from 'zod';
import type { FileTree } from '../io/source';
import { readSafetensors } from '../safetensors/read';
import { writeSafetensors } from '../safetensors/write';

const PREFIX = 'base_model.model.';
export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

const adapterSchema = z
  .object({
    peft_type: z.string().optional(),
    r: z.number().int().positive(),
    lora_alpha: z.number().positive(),
    lora_dropout: z.number().min(0).max(1).default(0),
    target_modules: z.union([z.array(z.string()).min(1), z.string()]),
    bias: z.string().default('none'),
    use_dora: z.boolean().nullish(),
    use_rslora: z.boolean().nullish(),
    fan_in_fan_out: z.boolean().nullish(),
    rank_pattern: z.record(z.string(), z.unknown()).nullish(),
    alpha_pattern: z.record(z.string(), z.unknown()).nullish(),
    modules_to_save: z.array(z.string()).nullish(),
    layers_to_transform: z.unknown().nullish(),
  })
  .passthrough();

/** An adapter directory: a path (Node) or a tree (files picked in a browser, OPFS, memory). */
export type AdapterDir = string | FileTree;

const treeOf = async (dir: AdapterDir): Promise<FileTree> => (typeof dir === 'string' ? (await import('../io/node')).nodeTree(dir) : dir);

/** Read and validate a PEFT `adapter_config.json` into Rusty's LoRA settings. */
export async function readAdapterConfig(dir: AdapterDir): Promise<LoraConfig> {
  const tree = await treeOf(dir);
  const p = tree.pathOf(ADAPTER_CONFIG);
  let raw: unknown;
  try {
    raw = JSON.parse(await tree.readText(ADAPTER_CONFIG));
  } catch (e) {
    const missing = (e as { code?: string }).code === 'ENOENT' || !(await tree.has(ADAPTER_CONFIG));
    throw new ConfigError(`${p}: ${missing ? 'not found' : `not valid JSON (${(e as Error).message})`}`);
  }
  const r = adapterSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ConfigError(`${p}: field '${i.path.join('.')}': ${i.message}`);
  }
  const c = r.data;
  const unsupported = (f: string, why: string) => new ConfigError(`${p}: field '${f}' ${why}; Rusty loads plain LoRA adapters`);
  if (c.peft_type && c.peft_type !== 'LORA') throw unsupported('peft_type', `is '${c.peft_type}'`);
  if (c.use_dora) throw unsupported('use_dora', 'is true (DoRA)');
  if (c.fan_in_fan_out) throw unsupported('fan_in_fan_out', 'is true');
  if (c.bias !== 'none') throw unsupported('bias', `is '${c.bias}'`);
  if (c.rank_pattern && Object.keys(c.rank_pattern).length) throw unsupported('rank_pattern', 'is set');
  if (c.alpha_pattern && Object.keys(c.alpha_pattern).length) throw unsupported('alpha_pattern', 'is set');
  if (c.modules_to_save?.length) throw unsupported('modules_to_save', 'is set');
  if (c.layers_to_transform !== null && c.layers_to_transform !== undefined) throw unsupported('layers_to_transform', 'is set');
  return {
    r: c.r,
    alpha: c.lora_alpha,
    dropout: 0,
    targetModules: typeof c.target_modules === 'string' ? new RegExp(c.target_modules) : c.target_modules,
    useRslora: !!c.use_rslora,
  };
}

/**
 * Apply a PEFT LoRA adapter directory (`adapter_config.json` + `adapter_model.safetensors`) to a model:
 * wraps the target Linears and loads A and B. Shapes must match the model (an adapter trained for another base
 * model fails here with the tensor named).
 */
export async function loadLoraAdapter(model: Module, dir: AdapterDir): Promise<LoraConfig> {
  const tree = await treeOf(dir);
  const cfg = await readAdapterConfig(tree);
  const file = tree.pathOf(ADAPTER_WEIGHTS);
  if (!(await tree.has(ADAPTER_WEIGHTS))) throw new ConfigError(`${file}: not found (safetensors adapters only; convert adapter_model.bin first)`);
  const st = await readSafetensors(await tree.open(ADAPTER_WEIGHTS));
  try {
    const mods = applyLora(model, cfg);
    const expected = new Set<string>();
    for (const [name, m] of mods) {
      for (const [which, t] of [
        ['lora_A', m.loraA],
        ['lora_B', m.loraB],
      ] as const) {
        const key = `${PREFIX}${name}.${which}.weight`;
        expected.add(key);
        const info = st.tensors.get(key) ?? st.tensors.get(`${PREFIX}${name}.${which}.default.weight`);
        if (!info) throw new ShapeError(`${file}: adapter has no '${key}' (was it trained for another model?)`);
        if (info.shape.length !== 2 || info.shape[0] !== t.shape[0] || info.shape[1] !== t.shape[1])
          throw new ShapeError(
            `${file}: '${key}' has shape [${info.shape.join(', ')}], this model needs [${t.shape.join(', ')}] (adapter for a different base model?)`,
          );
        const name2 = st.tensors.has(key) ? key : `${PREFIX}${name}.${which}.default.weight`;
        t.assign(await st.upload(model.ctx, name2, { dtype: 'f32' }));
      }
    }
    const extra = [...st.tensors.keys()].filter((k) => !expected.has(k) && !expected.has(k.replace('.default.weight', '.weight')));
    if (extra.length) throw new ShapeError(`${file}: tensors the model has no place for: ${extra.slice(0, 4).join(', ')}`);
    return cfg;
  } finally {
    await st.close();
  }
}

/**
 * Write the model's LoRA weights as a PEFT adapter directory (f32 tensors, names
 * `base_model.model.<module>.lora_A.weight`) that `PeftModel.from_pretrained` loads. Files are written to
 * temporary names and renamed (in a tree: through its sinks, committed when complete).
 * @param dir a directory path (Node, created if needed) or a writable tree (OPFS, memory)
 */
export async function saveLoraAdapter(model: Module, dir: AdapterDir, extra: { baseModel?: string } = {}): Promise<void> {
  const mods = loraModules(model);
  if (!mods.size) throw new ConfigError('saveLoraAdapter: the model has no LoRA modules (applyLora first)');
  const tree = await treeOf(dir);
  if (!tree.writeFile) throw new ConfigError(`saveLoraAdapter: ${tree.name} is read-only`);
  const first = mods.values().next().value!;
  const targets = [...new Set([...mods.keys()].map((k) => k.split('.').pop()!))];
  const tensors = new Map<string, { dtype: 'F32'; shape: number[]; data: Float32Array }>();
  for (const [name, m] of [...mods].sort(([a], [b]) => (a < b ? -1 : 1))) {
    for (const [which, t] of [
      ['lora_A', m.loraA],
      ['lora_B', m.loraB],
    ] as const)
      tensors.set(`${PREFIX}${name}.${which}.weight`, {
        dtype: 'F32',
        shape: [...t.shape],
        data: (await download(model.ctx, t.data)) as Float32Array,
      });
  }
  await writeSafetensors({ tree, file: ADAPTER_WEIGHTS }, tensors, { format: 'pt' });
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: extra.baseModel ?? null,
    r: first.r,
    lora_alpha: first.alpha,
    lora_dropout: 0,
    target_modules: targets,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    use_rslora: first.scaling !== first.alpha / first.r,
    use_dora: false,
    modules_to_save: null,
    rank_pattern: {},
    alpha_pattern: {},
    layers_to_transform: null,
    layers_pattern: null,
    revision: null,
  };
  await tree.writeFile(ADAPTER_CONFIG, JSON.stringify(config, null, 2) + '\n');
}
