import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fmtBytes } from '@rusty/backend';
import { architectureOf, parseModelConfig, type ModelConfig } from '@rusty/graph';
import { formatInspection, inspectSafetensors } from '@rusty/loader';
import { flag, parseArgs, type CommandSpec } from '../args';
import { EXIT_OK } from '../errors';
import { requirePath } from '../model-io';

const flags = {
  json: flag.bool('print the tensors and totals as JSON'),
  filter: flag.str('only tensors whose name contains this text (or matches this glob, with * and ?)', { short: 'f', value: '<text>' }),
};

export const inspectSpec: CommandSpec<typeof flags> = {
  name: 'inspect',
  summary: 'list the tensors of a safetensors file or model directory',
  usage: 'rusty inspect <file.safetensors|dir> [--filter <text>] [--json]',
  description: `Reads only the headers (no tensor data): name, dtype, shape, parameters and bytes of every tensor, the totals
per dtype, the file's metadata, and for a model directory the architecture from config.json (or the LoRA settings
of a PEFT adapter directory). Sharded checkpoints (model.safetensors.index.json) are read through their index.`,
  flags,
  positionals: { name: 'file or directory', min: 1, max: 1 },
  examples: ['rusty inspect rusty-model', 'rusty inspect ./SmolLM2-135M/model.safetensors --filter "layers.0.*"', 'rusty inspect rusty-lora --json'],
};

/** `text` as a substring, or as a glob (`*`, `?`) over the whole name when it has wildcards. */
export function matchGlobLike(pattern: string, name: string): boolean {
  if (!/[*?]/.test(pattern)) return name.includes(pattern);
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
  return re.test(name);
}

async function readJson(path: string): Promise<Record<string, unknown> | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** What sets an architecture's model apart, for the architecture line. */
function features(c: ModelConfig): string {
  const f: string[] = [];
  if (c.tieWordEmbeddings) f.push('tied embeddings');
  const sliding = c.layerTypes.filter((t) => t === 'sliding_attention').length;
  if (sliding && c.slidingWindow !== null)
    f.push(`sliding window ${c.slidingWindow} on ${sliding === c.numHiddenLayers ? 'every layer' : `${sliding} of ${c.numHiddenLayers} layers`}`);
  if (c.qkvBias) f.push(c.oBias ? 'attention bias' : 'q/k/v bias');
  if (c.qkNorm) f.push('q/k norm');
  if (c.hiddenAct !== 'silu') f.push(`${c.hiddenAct} MLP`);
  if (c.attnSoftcap !== null || c.finalSoftcap !== null) f.push('logit soft-capping');
  return f.length ? `, ${f.join(', ')}` : '';
}

export async function inspectCommand(argv: string[]): Promise<number> {
  const { opts: o, positionals } = parseArgs(inspectSpec, argv);
  const path = positionals[0]!;
  await requirePath(path, 'inspect:');
  const ins = await inspectSafetensors(path);
  const isDir = (await stat(path)).isDirectory();
  const config = isDir ? await readJson(join(path, 'config.json')) : null;
  const adapter = isDir ? await readJson(join(path, 'adapter_config.json')) : null;
  if (o.filter) ins.tensors = ins.tensors.filter((t) => matchGlobLike(o.filter!, t.name));
  if (o.json) {
    process.stdout.write(JSON.stringify({ ...ins, config, adapter }, null, 2) + '\n');
    return EXIT_OK;
  }
  const head: string[] = [`${ins.path}: ${ins.files.length === 1 ? ins.files[0] : `${ins.files.length} shards`}`];
  if (config) {
    try {
      const c = parseModelConfig(config, join(path, 'config.json'));
      head.push(
        `architecture  ${architectureOf(c).className} (${c.modelType}): hidden ${c.hiddenSize}, ` +
          `${c.numHiddenLayers} layers, ${c.numAttentionHeads} heads (${c.numKeyValueHeads} kv) of ${c.headDim}, intermediate ${c.intermediateSize}, vocab ${c.vocabSize}, ` +
          `context ${c.maxPositionEmbeddings}${features(c)}`,
      );
    } catch (e) {
      head.push(`architecture  not loadable by Rusty: ${(e as Error).message}`);
    }
  }
  if (adapter)
    head.push(
      `LoRA adapter  r=${String(adapter.r)}, alpha=${String(adapter.lora_alpha)}, targets ${JSON.stringify(adapter.target_modules)}` +
        (adapter.base_model_name_or_path ? `, base ${String(adapter.base_model_name_or_path)}` : ''),
    );
  const meta = Object.entries(ins.metadata);
  if (meta.length) head.push(`metadata      ${meta.map(([k, v]) => `${k}=${v.length > 60 ? v.slice(0, 57) + '...' : v}`).join(', ')}`);
  process.stdout.write(head.join('\n') + '\n\n');
  process.stdout.write(formatInspection(ins) + '\n');
  if (o.filter) {
    const n = ins.tensors.reduce((s, t) => s + t.parameters, 0);
    const b = ins.tensors.reduce((s, t) => s + t.bytes, 0);
    process.stdout.write(`(filter '${o.filter}': ${ins.tensors.length} tensors, ${n.toLocaleString('en-US')} parameters, ${fmtBytes(b)})\n`);
  }
  return EXIT_OK;
}
