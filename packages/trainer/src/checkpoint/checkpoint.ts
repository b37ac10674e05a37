import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import { upload } from '@rusty/backend';
import type { Optimizer, OptimizerState, Tensor } from '@rusty/autograd';
import { readSafetensors, writeSafetensors, type TensorToWrite } from '@rusty/loader';
import type { DataLoader, DataLoaderState } from '../data/dataloader';
import { CheckpointError } from '../errors';
import type { GradScaler, GradScalerState } from '../grad-scaler';
import { removeDir, syncDir, writeFileAtomic, writeFileSynced } from './fs-atomic';
import { processAlive } from './run-lock';

/** The file in a checkpoint root naming the newest complete checkpoint directory. */
export const LATEST_FILE = 'latest';
/** Non-tensor state of a checkpoint (msgpack), written last inside the checkpoint directory. */
export const STATE_FILE = 'trainer_state.msgpack';
/** Trainable weights (f32, by parameter name) in a checkpoint directory. */
export const WEIGHTS_FILE = 'model.safetensors';
/** Optimizer moments (`state.<k>.<slot>`) and GPU step counters (`step_state.<group>`). */
export const OPTIMIZER_FILE = 'optimizer.safetensors';
const FORMAT = 'rusty-checkpoint';
const VERSION = 1;
const DIR_RE = /^checkpoint-(\d+)$/;

/** Named tensors: a Map or `[name, tensor]` pairs, or a module (its `trainableParameters()`). */
export type NamedTensors = Iterable<readonly [string, Tensor]> | { trainableParameters(): [string, Tensor][] };

/** Something with PyTorch-style `stateDict()` / `loadStateDict()` (LR schedulers). */
export interface Stateful<S = unknown> {
  stateDict(): S;
  loadStateDict(s: S): void;
}

/** What `saveCheckpoint` stores. Everything except `step` is optional. */
export interface CheckpointContents {
  step: number;
  /** Trainable weights (stored f32 by name in `model.safetensors`). */
  params?: NamedTensors;
  /** Moments and step counters (`optimizer.stateDict()`), in `optimizer.safetensors`. */
  optimizer?: Optimizer;
  scheduler?: Stateful;
  scaler?: GradScaler;
  dataLoader?: DataLoader;
  /** Named RNG states (u32) of the training run. */
  rng?: Record<string, number>;
  /** Any other state msgpack can encode (counters, best metric, ...). */
  extra?: Record<string, unknown>;
}

/**
 * Phases of a save, in order: the tensor files are in the temporary directory; the state file too (the
 * directory is complete); it is renamed to `checkpoint-<step>`; `latest` names it (the commit point).
 */
export type CheckpointPhase = 'tensors-written' | 'files-written' | 'renamed' | 'committed';

export interface SaveCheckpointOptions {
  /** Keep only the newest `keepLast` checkpoints (the one `latest` names is never removed). Default: keep all. */
  keepLast?: number;
  /** Called after each phase; a returned promise is awaited. */
  onPhase?: (phase: CheckpointPhase, dir: string) => void | Promise<void>;
}

/** @internal How the weights of a checkpoint are written and read (plain safetensors, or a PEFT adapter). */
export interface WeightsFormat {
  kind: string;
  write(dir: string): Promise<void>;
}

interface StateFile {
  format: string;
  version: number;
  step: number;
  weights: string;
  paramNames: string[];
  optimizer: { kind: string; steps: number; groups: OptimizerState['groups']; slots: (string[] | null)[]; stepStates: number } | null;
  scheduler: unknown;
  scaler: GradScalerState | null;
  dataLoader: DataLoaderState | null;
  rng: Record<string, number> | null;
  extra: Record<string, unknown> | null;
  /** Byte sizes of the other files of the directory (checked on load). */
  files: Record<string, number>;
  savedAt: string;
}

function namedOf(src: NamedTensors): [string, Tensor][] {
  if (typeof (src as { trainableParameters?: unknown }).trainableParameters === 'function')
    return (src as { trainableParameters(): [string, Tensor][] }).trainableParameters();
  return [...(src as Iterable<readonly [string, Tensor]>)].map(([n, t]) => [n, t]);
}

/** The directory name of the checkpoint of `step`. */
export function checkpointDirName(step: number): string {
  return `checkpoint-${step}`;
}

/** Checkpoint directories under `root` (complete or not), oldest first. */
export async function listCheckpoints(root: string): Promise<{ step: number; path: string }[]> {
  let names: string[];
  try {
    names = await readdir(root);
  } catch {
    return [];
  }
  return names
    .map((n) => [n, DIR_RE.exec(n)] as const)
    .filter(([, m]) => m)
    .map(([n, m]) => ({ step: Number(m![1]), path: join(root, n) }))
    .sort((a, b) => a.step - b.step);
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

/** Read and check a checkpoint directory's state file and file sizes; null if it is not a complete checkpoint. */
async function readState(dir: string): Promise<StateFile | null> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, STATE_FILE));
  } catch {
    return null;
  }
  let s: StateFile;
  try {
    s = decode(bytes) as StateFile;
  } catch {
    return null;
  }
  if (s?.format !== FORMAT) return null;
  for (const [f, size] of Object.entries(s.files ?? {})) {
    try {
      if ((await stat(join(dir, f))).size !== size) return null;
    } catch {
      return null;
    }
  }
  return s;
}

/**
 * The newest complete checkpoint under `root`: the one `latest` names, or (when `latest` is missing or names a
 * directory that is not complete) the complete `checkpoint-<step>` with the highest step. Null when there is none.
 */
export async function findLatestCheckpoint(root: string): Promise<string | null> {
  try {
    const name = (await readFile(join(root, LATEST_FILE), 'utf8')).trim();
    if (DIR_RE.test(name) && (await readState(join(root, name)))) return join(root, name);
  } catch {
    // no pointer: fall back to scanning
  }
  const all = await listCheckpoints(root);
  for (let i = all.length - 1; i >= 0; i--) if (await readState(all[i]!.path)) return all[i]!.path;
  return null;
}

/** Temporary directories of saves: `.tmp-checkpoint-<step>-<pid>-<hex>` and `.old-checkpoint-<step>-<pid>-<hex>`. */
const TEMP_RE = /^\.(?:tmp|old)-checkpoint-\d+-(?:(\d+)-)?[0-9a-f]+$/;

/** A temporary directory of a save that crashed: this process's own, a dead process's, or one without a pid. */
function isLeftover(name: string): boolean {
  const m = TEMP_RE.exec(name);
  if (!m) return false;
  const pid = m[1] === undefined ? NaN : Number(m[1]);
  return !Number.isFinite(pid) || pid === process.pid || !processAlive(pid);
}

/** @internal Save with a given weights format (`saveCheckpoint` and `saveLoraCheckpoint`). */
export async function writeCheckpoint(
  root: string,
  c: Omit<CheckpointContents, 'params'>,
  weights: WeightsFormat | null,
  paramNames: string[],
  opts: SaveCheckpointOptions,
): Promise<string> {
  if (!Number.isInteger(c.step) || c.step < 0) throw new CheckpointError(`checkpoint step must be a non-negative integer, got ${c.step}`);
  if (opts.keepLast !== undefined && (!Number.isInteger(opts.keepLast) || opts.keepLast < 1))
    throw new CheckpointError(`keepLast must be a positive integer, got ${opts.keepLast}`);
  const name = checkpointDirName(c.step);
  const final = join(root, name);
  try {
    await mkdir(root, { recursive: true });
    // leftovers of saves that crashed: only those of this process or of a process that is gone (another live
    // run's save in progress is left alone)
    for (const n of await readdir(root)) if (isLeftover(n)) await removeDir(join(root, n));
  } catch (e) {
    throw new CheckpointError(`cannot create the checkpoint directory ${root}: ${(e as Error).message}`, { cause: e });
  }
  const tmp = join(root, `.tmp-${name}-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await mkdir(tmp);
    // read everything back from the GPU first (a consistent snapshot), then write
    const opt = c.optimizer ? await c.optimizer.stateDict() : null;
    const scaler = c.scaler ? await c.scaler.stateDict() : null;
    if (weights) await weights.write(tmp);
    let optimizer: StateFile['optimizer'] = null;
    if (opt) {
      const tensors: [string, TensorToWrite][] = [];
      const slots: (string[] | null)[] = opt.state.map((s, k) => {
        if (!s) return null;
        for (const [slot, arr] of Object.entries(s)) tensors.push([`state.${k}.${slot}`, { dtype: 'F32', shape: [arr.length], data: arr }]);
        return Object.keys(s);
      });
      opt.stepStates.forEach((w, g) => tensors.push([`step_state.${g}`, { dtype: 'U32', shape: [w.length], data: w }]));
      await writeSafetensors(join(tmp, OPTIMIZER_FILE), tensors, { format: 'rusty-optimizer', kind: opt.kind });
      optimizer = { kind: opt.kind, steps: opt.steps, groups: opt.groups, slots, stepStates: opt.stepStates.length };
    }
    await opts.onPhase?.('tensors-written', tmp);
    const files: Record<string, number> = {};
    for (const f of await readdir(tmp)) if (!f.startsWith('.')) files[f] = (await stat(join(tmp, f))).size;
    const state: StateFile = {
      format: FORMAT,
      version: VERSION,
      step: c.step,
      weights: weights?.kind ?? 'none',
      paramNames,
      optimizer,
      scheduler: c.scheduler ? c.scheduler.stateDict() : null,
      scaler,
      dataLoader: c.dataLoader ? c.dataLoader.state() : null,
      rng: c.rng ?? null,
      extra: c.extra ?? null,
      files,
      savedAt: new Date().toISOString(),
    };
    await writeFileSynced(join(tmp, STATE_FILE), encode(state, { ignoreUndefined: true }));
    await syncDir(tmp);
    await opts.onPhase?.('files-written', tmp);
    let old: string | null = null;
    if (await exists(final)) {
      old = join(root, `.old-${name}-${process.pid}-${randomBytes(4).toString('hex')}`);
      await rename(final, old);
    }
    await rename(tmp, final);
    await syncDir(root);
    await opts.onPhase?.('renamed', final);
    await writeFileAtomic(join(root, LATEST_FILE), name + '\n');
    await opts.onPhase?.('committed', final);
    if (old) await removeDir(old);
  } catch (e) {
    await removeDir(tmp).catch(() => undefined);
    if (e instanceof CheckpointError) throw e;
    throw new CheckpointError(`saving checkpoint ${final} failed: ${(e as Error).message}`, { cause: e });
  }
  if (opts.keepLast) {
    const all = await listCheckpoints(root);
    const doomed = all.slice(0, Math.max(0, all.length - opts.keepLast)).filter((x) => x.path !== final);
    for (const d of doomed) await removeDir(d.path);
  }
  return final;
}

/**
 * Save a training checkpoint under `root`: trainable weights (safetensors), optimizer moments and counters
 * (safetensors), and the scheduler, scaler, step, data-loader position and RNG states (msgpack). Everything is
 * written and fsync'd into a temporary directory that is then renamed to `checkpoint-<step>`; only then does
 * the `latest` pointer switch to it (temp file + rename + fsync). A crash at any moment leaves the previous
 * checkpoint loadable. With `keepLast`, older checkpoints are removed after the switch.
 * @returns the checkpoint directory
 */
export async function saveCheckpoint(root: string, contents: CheckpointContents, opts: SaveCheckpointOptions = {}): Promise<string> {
  const params = contents.params ? namedOf(contents.params) : [];
  const seen = new Set<string>();
  for (const [n] of params) {
    if (seen.has(n)) throw new CheckpointError(`parameter name '${n}' appears twice in the checkpoint`);
    seen.add(n);
  }
  const weights: WeightsFormat | null = params.length
    ? {
        kind: 'safetensors',
        async write(dir) {
          // download sequentially, as the writer reaches each tensor (bounded host memory)
          const entries: [string, TensorToWrite][] = params.map(([n, t]) => [
            n,
            { dtype: 'F32', shape: [...t.shape], data: async () => (await t.toArray()) as Float32Array },
          ]);
          await writeSafetensors(join(dir, WEIGHTS_FILE), entries, { format: 'pt', step: String(contents.step) });
        },
      }
    : null;
  return writeCheckpoint(root, contents, weights, params.map(([n]) => n), opts);
}

/** Where `restore` puts a checkpoint's state. Give what the run has; what is absent is left alone. */
export interface RestoreTargets {
  params?: NamedTensors;
  optimizer?: Optimizer;
  scheduler?: Stateful;
  scaler?: GradScaler;
  dataLoader?: DataLoader;
}

/** A checkpoint read back into host memory. */
export interface LoadedCheckpoint {
  /** The checkpoint directory. */
  path: string;
  step: number;
  /** Trainable weights by name (empty for LoRA checkpoints: see `loadLoraCheckpoint`). */
  params: Map<string, { shape: number[]; data: Float32Array }>;
  optimizer: OptimizerState | null;
  scheduler: unknown;
  scaler: GradScalerState | null;
  dataLoader: DataLoaderState | null;
  rng: Record<string, number> | null;
  extra: Record<string, unknown> | null;
  /** Copy the state into a run's objects (weights bit-exact). */
  restore(targets: RestoreTargets): void;
}

/** Write host weights into tensors by name (f32 storage written in place). */
export function restoreParams(target: NamedTensors, params: Map<string, { shape: number[]; data: Float32Array }>, where: string): void {
  const own = namedOf(target);
  const missing = own.filter(([n]) => !params.has(n)).map(([n]) => n);
  if (missing.length)
    throw new CheckpointError(
      `${where} has no weights for ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ` and ${missing.length - 5} more` : ''} ` +
        `(it holds ${[...params.keys()].slice(0, 3).join(', ')}${params.size > 3 ? ', ...' : ''}): a different model or trainable set?`,
    );
  for (const [n, p] of own) {
    const w = params.get(n)!;
    if (w.shape.length !== p.shape.length || w.shape.some((d, i) => d !== p.shape[i]))
      throw new CheckpointError(`${where}: '${n}' has shape [${w.shape.join(', ')}], the model's is [${p.shape.join(', ')}]`);
    if (p.dtype === 'f32') p.ctx.write(p.data.buffer, w.data);
    else p.assign(upload(p.ctx, w.data, p.shape, p.dtype));
  }
}

/** @internal Read a checkpoint directory or root (see `loadCheckpoint`). */
export async function readCheckpoint(path: string): Promise<{ dir: string; state: StateFile }> {
  let dir: string | null = path;
  let state = await readState(path);
  if (!state) {
    dir = await findLatestCheckpoint(path);
    state = dir ? await readState(dir) : null;
  }
  if (!dir || !state) {
    const here = await listCheckpoints(path);
    throw new CheckpointError(
      here.length
        ? `${path}: none of its checkpoints (${here.map((h) => h.step).join(', ')}) is complete`
        : `${path} is not a checkpoint directory and holds no checkpoint-<step> directory`,
    );
  }
  if (state.version > VERSION) throw new CheckpointError(`${dir}: checkpoint format version ${state.version} is newer than this Rusty reads (${VERSION})`);
  return { dir, state };
}

/**
 * Load a checkpoint: `path` is a checkpoint directory, or a root holding `checkpoint-<step>` directories (then
 * the newest complete one: see `findLatestCheckpoint`). Returns the state in host memory; `restore(...)` puts it
 * into the model, optimizer, scheduler, scaler and data loader.
 * @throws CheckpointError when there is no complete checkpoint or a file is damaged
 */
export async function loadCheckpoint(path: string): Promise<LoadedCheckpoint> {
  const { dir, state } = await readCheckpoint(path);
  const params = new Map<string, { shape: number[]; data: Float32Array }>();
  try {
    if (state.weights === 'safetensors') {
      const st = await readSafetensors(join(dir, WEIGHTS_FILE));
      try {
        for (const [n, info] of st.tensors) params.set(n, { shape: [...info.shape], data: await st.readF32(n) });
      } finally {
        await st.close();
      }
    }
  } catch (e) {
    throw new CheckpointError(`${dir}: cannot read ${WEIGHTS_FILE}: ${(e as Error).message}`, { cause: e });
  }
  let optimizer: OptimizerState | null = null;
  if (state.optimizer) {
    const o = state.optimizer;
    try {
      const st = await readSafetensors(join(dir, OPTIMIZER_FILE));
      try {
        const per: OptimizerState['state'] = [];
        for (let k = 0; k < o.slots.length; k++) {
          const slots = o.slots[k];
          if (!slots) {
            per.push(null);
            continue;
          }
          const rec: Record<string, Float32Array> = {};
          for (const s of slots) rec[s] = (await st.read(`state.${k}.${s}`)) as Float32Array;
          per.push(rec);
        }
        const stepStates: Uint32Array[] = [];
        for (let g = 0; g < o.stepStates; g++) stepStates.push((await st.read(`step_state.${g}`)) as Uint32Array);
        optimizer = { kind: o.kind, steps: o.steps, groups: o.groups, state: per, stepStates };
      } finally {
        await st.close();
      }
    } catch (e) {
      throw new CheckpointError(`${dir}: cannot read ${OPTIMIZER_FILE}: ${(e as Error).message}`, { cause: e });
    }
  }
  const loaded: LoadedCheckpoint = {
    path: dir,
    step: state.step,
    params,
    optimizer,
    scheduler: state.scheduler,
    scaler: state.scaler,
    dataLoader: state.dataLoader,
    rng: state.rng,
    extra: state.extra,
    restore(t) {
      if (t.params && state.weights === 'safetensors') restoreParams(t.params, params, dir);
      if (t.optimizer) {
        if (!optimizer) throw new CheckpointError(`${dir} holds no optimizer state`);
        try {
          t.optimizer.loadStateDict(optimizer);
        } catch (e) {
          throw new CheckpointError(`${dir}: optimizer state does not fit: ${(e as Error).message}`, { cause: e });
        }
      }
      if (t.scheduler && state.scheduler !== null) t.scheduler.loadStateDict(state.scheduler);
      if (t.scaler && state.scaler) t.scaler.loadStateDict(state.scaler);
      if (t.dataLoader && state.dataLoader) t.dataLoader.setState(state.dataLoader);
    },
  };
  return loaded;
}
