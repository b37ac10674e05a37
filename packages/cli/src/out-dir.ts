// The output directory of a run (`--out`): refused when it is a file, or when it holds a model, an adapter or
// another run's files and neither --overwrite nor --resume was given; locked for the run's lifetime.
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireRunLock, checkRunLock, RUN_LOCK_FILE, type RunLock } from '@rusty/trainer';
import { UsageError } from './errors';

/** Names a run writes into its output directory (and that mark a directory as holding a model or adapter). */
const RUN_OUTPUTS = new Set([
  'config.json',
  'model.safetensors',
  'model.safetensors.index.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'generation_config.json',
  'adapter_config.json',
  'adapter_model.safetensors',
  'metrics.jsonl',
  'loss.svg',
  'checkpoints',
  'merged',
]);

const isRunOutput = (name: string): boolean => RUN_OUTPUTS.has(name) || /\.safetensors$/.test(name);

/** `--out` must be a directory or not exist yet: a file fails at once (before any data is read). */
export async function checkOutTarget(out: string, flag = '--out'): Promise<void> {
  let isDir: boolean;
  try {
    isDir = (await stat(out)).isDirectory();
  } catch {
    return;
  }
  if (!isDir) throw new UsageError(`${flag} ${out} is an existing file, not a directory; choose another ${flag}`);
}

/** The run outputs (model, adapter, checkpoints, metrics, ...) `dir` holds, sorted. */
export async function runOutputsIn(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).filter(isRunOutput).sort();
  } catch {
    return [];
  }
}

/**
 * Make `out` ready for a run and lock it until `release()`: a directory that another live run holds is refused
 * (naming its pid); without `resume`, one that holds a model, an adapter or another run's files is refused
 * unless `overwrite` is set, and then those files are removed. Nothing is written before the checks pass.
 */
export async function prepareOutDir(out: string, o: { resume: boolean; overwrite: boolean; command: string }): Promise<RunLock> {
  await checkOutTarget(out);
  checkRunLock(out);
  const found = o.resume ? [] : await runOutputsIn(out);
  if (found.length && !o.overwrite) {
    const shown = found.slice(0, 4).join(', ') + (found.length > 4 ? ', ...' : '');
    throw new UsageError(
      `--out ${out} already holds ${shown} (a model, an adapter or another run's files): ` +
        `pass --overwrite to replace them${found.includes('checkpoints') ? ', or --resume to continue its run' : ''}, or choose another --out`,
    );
  }
  const lock = await acquireRunLock(out, o.command);
  try {
    for (const n of found) await rm(join(out, n), { recursive: true, force: true });
  } catch (e) {
    lock.release();
    throw e;
  }
  return lock;
}

export { RUN_LOCK_FILE };
