import { z } from 'zod';
import { SafetensorsError } from '../errors';
import { dirOf, joinName, type FileTree } from '../io/source';
import type { TensorInfo } from './header';
import { readSafetensors, TensorReaderBase, type OpenTensor, type SafetensorsFile, type SafetensorsReader } from './read';

/** The index file of a sharded Hugging Face checkpoint. */
export const INDEX_FILE = 'model.safetensors.index.json';
/** The single-file checkpoint name. */
export const SINGLE_FILE = 'model.safetensors';

const indexSchema = z.object({
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
  weight_map: z.record(z.string(), z.string()),
});

/** Several safetensors shards seen as one file: the tensors of `weight_map`, each read from its shard. */
export class ShardedCheckpoint extends TensorReaderBase {
  private open = true;

  /** @internal use `openCheckpoint` */
  constructor(
    /** The index file. */
    readonly path: string,
    /** The shards, in the order of first appearance in the index. */
    readonly shards: readonly SafetensorsFile[],
    readonly metadata: Readonly<Record<string, string>>,
    readonly tensors: ReadonlyMap<string, TensorInfo>,
    private readonly shardOf: ReadonlyMap<string, SafetensorsFile>,
  ) {
    super();
  }

  locate(name: string): OpenTensor {
    if (!this.open) throw new SafetensorsError(`${this.path}: the checkpoint was closed`);
    const shard = this.shardOf.get(name);
    if (!shard) throw this.missing(name);
    return shard.locate(name);
  }

  async close(): Promise<void> {
    this.open = false;
    await Promise.all(this.shards.map((s) => s.close()));
  }
}

/** A path as a tree (its directory) and a file name in it, or the tree itself. */
async function treeOf(p: string): Promise<{ tree: FileTree; file: string; kind: 'file' | 'dir' | 'none' }> {
  const { nodeTree, pathKind, basename, dirname } = await import('../io/node');
  const kind = await pathKind(p);
  return kind === 'dir' ? { tree: nodeTree(p), file: '', kind } : { tree: nodeTree(dirname(p)), file: basename(p), kind };
}

/**
 * Open a sharded checkpoint through its index (`model.safetensors.index.json`: `weight_map` tensor -> shard).
 * Every shard is opened and validated; each mapped tensor must exist in its shard.
 * @param index a path (Node), or a tree and the index file's name in it
 * @throws SafetensorsError naming a missing shard, a tensor absent from its shard, or a malformed index
 */
export async function openShardedCheckpoint(index: string | { tree: FileTree; file: string }): Promise<ShardedCheckpoint> {
  const { tree, file } = typeof index === 'string' ? await treeOf(index) : index;
  const indexPath = typeof index === 'string' ? index : tree.pathOf(file);
  let text: string;
  try {
    text = await tree.readText(file);
  } catch (e) {
    throw new SafetensorsError(`${indexPath}: cannot read the shard index: ${(e as Error).message}`, { cause: e });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(`${indexPath}: the shard index is not valid JSON: ${(e as Error).message}`);
  }
  const parsed = indexSchema.safeParse(json);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new SafetensorsError(`${indexPath}: invalid shard index at '${i.path.join('.')}': ${i.message} (expected {"weight_map": {tensor: shard file}})`);
  }
  const byName = new Map<string, string>();
  for (const shard of new Set(Object.values(parsed.data.weight_map))) {
    const name = /^([a-zA-Z]:)?[\\/]/.test(shard) ? null : joinName(dirOf(file), shard);
    if (name === null || !name) throw new SafetensorsError(`${indexPath}: shard '${shard}' is outside the checkpoint directory`);
    byName.set(shard, name);
  }
  const shards: SafetensorsFile[] = [];
  const opened = new Map<string, SafetensorsFile>();
  try {
    for (const [shard, name] of byName) {
      if (!(await tree.has(name)))
        throw new SafetensorsError(`${indexPath}: shard '${shard}' listed in the weight_map is missing (${tree.pathOf(name)})`);
      const f = await readSafetensors(await openOrThrow(tree, name));
      shards.push(f);
      opened.set(shard, f);
    }
    const tensors = new Map<string, TensorInfo>();
    const shardOf = new Map<string, SafetensorsFile>();
    for (const [name, shard] of Object.entries(parsed.data.weight_map)) {
      const f = opened.get(shard)!;
      const info = f.tensors.get(name);
      if (!info) throw new SafetensorsError(`${indexPath}: tensor '${name}' is mapped to shard '${shard}' but that shard does not contain it`);
      tensors.set(name, info);
      shardOf.set(name, f);
    }
    const metadata: Record<string, string> = { ...(shards[0]?.metadata ?? {}) };
    for (const [k, v] of Object.entries(parsed.data.metadata ?? {})) metadata[k] = typeof v === 'string' ? v : JSON.stringify(v);
    return new ShardedCheckpoint(indexPath, shards, metadata, tensors, shardOf);
  } catch (e) {
    await Promise.all(shards.map((s) => s.close().catch(() => undefined)));
    throw e;
  }
}

async function openOrThrow(tree: FileTree, name: string) {
  try {
    return await tree.open(name);
  } catch (e) {
    throw new SafetensorsError(`${tree.pathOf(name)}: cannot open: ${(e as { code?: string }).code === 'ENOENT' ? 'no such file' : (e as Error).message}`, { cause: e });
  }
}

/**
 * Open the weights of a Hugging Face checkpoint directory: `model.safetensors.index.json` (sharded) if present,
 * else `model.safetensors`, else the directory's only `*.safetensors` file.
 * @param dir a directory path (Node) or a tree (files picked in a browser, OPFS, memory)
 * @throws SafetensorsError when the directory holds no (or several ambiguous) safetensors files
 */
export async function readSafetensorsDir(dir: string | FileTree): Promise<SafetensorsReader> {
  const tree = typeof dir === 'string' ? (await import('../io/node')).nodeTree(dir) : dir;
  if (await tree.has(INDEX_FILE)) return openShardedCheckpoint({ tree, file: INDEX_FILE });
  if (await tree.has(SINGLE_FILE)) return readSafetensors(await openOrThrow(tree, SINGLE_FILE));
  let names: string[];
  try {
    names = (await tree.list()).filter((n) => !n.includes('/'));
  } catch (e) {
    throw new SafetensorsError(`${tree.name}: cannot list the checkpoint directory: ${(e as Error).message}`, { cause: e });
  }
  const indexes = names.filter((n) => n.endsWith('.safetensors.index.json'));
  if (indexes.length === 1) return openShardedCheckpoint({ tree, file: indexes[0]! });
  const files = names.filter((n) => n.endsWith('.safetensors'));
  if (files.length === 1 && indexes.length === 0) return readSafetensors(await openOrThrow(tree, files[0]!));
  throw new SafetensorsError(
    `${tree.name}: no ${SINGLE_FILE} or ${INDEX_FILE} in the directory` +
      (files.length + indexes.length ? ` (found ${[...indexes, ...files].join(', ')}; open one of them directly)` : ''),
  );
}

/**
 * Open a checkpoint given a directory (see `readSafetensorsDir`), a shard index (`*.index.json`) or a single
 * `.safetensors` file; all give the same reader interface. A tree (browser files, OPFS) is read as a directory.
 */
export async function openCheckpoint(pathOrDir: string | FileTree): Promise<SafetensorsReader> {
  if (typeof pathOrDir !== 'string') return readSafetensorsDir(pathOrDir);
  const { tree, file, kind } = await treeOf(pathOrDir);
  if (kind === 'none') throw new SafetensorsError(`${pathOrDir}: no such file or directory`);
  if (kind === 'dir') return readSafetensorsDir(tree);
  if (file.endsWith('.index.json')) return openShardedCheckpoint({ tree, file });
  return readSafetensors(pathOrDir);
}
