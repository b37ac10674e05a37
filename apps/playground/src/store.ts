// Checkpoints in the browser's origin-private file system (OPFS), so a reload resumes a run. Each checkpoint is
// a folder `step-N/` written completely (trainable weights and AdamW moments as safetensors, through
// @rusty/loader's OPFS tree) before `run.json` names it; the previous folder is removed afterwards. The training
// data is kept beside it, so a resumed run sees the same windows.
import type { OptimizerState } from '@rusty/autograd';
import { opfsRemove, opfsTree, readSafetensors, writeSafetensors, type FileTree } from '@rusty/loader';
import type { LoopOptions } from './engine';
import type { FinetuneOptions } from './options';

const ROOT = 'rusty-playground';

/** What `run.json` records. */
export interface SavedRun {
  kind: 'pretrain' | 'finetune';
  /** Completed optimizer steps. */
  step: number;
  loop: LoopOptions;
  lora?: Pick<FinetuneOptions, 'r' | 'alpha' | 'targets' | 'seqLen' | 'pack'>;
  seqLen: number;
  /** The base model of a fine-tune: its name and its files' names and sizes (to check the same one is picked). */
  base?: { name: string; files: [string, number][] };
  dataName: string;
  losses: [number, number][];
  folder: string;
  optimizer: Omit<OptimizerState, 'state' | 'stepStates'> & { slots: string[]; present: boolean[] };
  savedAt: string;
}

async function root(): Promise<FileSystemDirectoryHandle | null> {
  try {
    return await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT, { create: true });
  } catch {
    return null;
  }
}

/** Whether this browser keeps checkpoints (OPFS). */
export async function storageAvailable(): Promise<boolean> {
  return (await root()) !== null;
}

async function tree(): Promise<FileTree> {
  const r = await root();
  if (!r) throw new Error('this browser has no origin-private file system: checkpoints cannot be kept');
  return opfsTree(r, ROOT);
}

/** Save a checkpoint: trainable weights, optimizer moments, data; `run.json` last. */
export async function saveRun(
  run: Omit<SavedRun, 'folder' | 'optimizer' | 'savedAt'>,
  weights: Map<string, { shape: number[]; data: Float32Array }>,
  opt: OptimizerState,
  data: string,
): Promise<void> {
  const t = await tree();
  const r = (await root())!;
  const folder = `step-${run.step}`;
  await writeSafetensors({ tree: t, file: `${folder}/weights.safetensors` }, weights);
  const slots = [...new Set(opt.state.flatMap((s) => (s ? Object.keys(s) : [])))];
  const moments = new Map<string, { shape: number[]; data: Float32Array | Uint32Array; dtype?: 'U32' }>();
  opt.state.forEach((s, i) => {
    if (s) for (const k of slots) moments.set(`state.${i}.${k}`, { shape: [s[k]!.length], data: s[k]! });
  });
  opt.stepStates.forEach((w, i) => moments.set(`step_state.${i}`, { shape: [w.length], data: w, dtype: 'U32' }));
  await writeSafetensors({ tree: t, file: `${folder}/optimizer.safetensors` }, moments);
  if (!(await t.has('data.txt')) || (await loadData()) !== data) await t.writeFile!('data.txt', data);
  const previous = await loadRun();
  const saved: SavedRun = {
    ...run,
    folder,
    optimizer: { kind: opt.kind, steps: opt.steps, groups: opt.groups, slots, present: opt.state.map((s) => s !== null) },
    savedAt: new Date().toISOString(),
  };
  await t.writeFile!('run.json', JSON.stringify(saved));
  if (previous && previous.folder !== folder) await opfsRemove(r, previous.folder);
}

/** The saved run, or null. */
export async function loadRun(): Promise<SavedRun | null> {
  try {
    const t = await tree();
    if (!(await t.has('run.json'))) return null;
    return JSON.parse(await t.readText('run.json')) as SavedRun;
  } catch {
    return null;
  }
}

export async function loadData(): Promise<string> {
  return (await tree()).readText('data.txt');
}

/** The weights and optimizer state of the saved run. */
export async function loadCheckpoint(run: SavedRun): Promise<{ weights: Map<string, Float32Array>; optimizer: OptimizerState }> {
  const t = await tree();
  const w = await readSafetensors(await t.open(`${run.folder}/weights.safetensors`));
  const weights = new Map<string, Float32Array>();
  for (const name of w.tensors.keys()) weights.set(name, await w.readF32(name));
  await w.close();
  const o = await readSafetensors(await t.open(`${run.folder}/optimizer.safetensors`));
  const state: OptimizerState['state'] = [];
  for (let i = 0; i < run.optimizer.present.length; i++) {
    if (!run.optimizer.present[i]) {
      state.push(null);
      continue;
    }
    const s: Record<string, Float32Array> = {};
    for (const k of run.optimizer.slots) s[k] = await o.readF32(`state.${i}.${k}`);
    state.push(s);
  }
  const stepStates: Uint32Array[] = [];
  for (let i = 0; o.tensors.has(`step_state.${i}`); i++) stepStates.push((await o.read(`step_state.${i}`)) as Uint32Array);
  await o.close();
  const { slots: _s, present: _p, ...rest } = run.optimizer;
  return { weights, optimizer: { ...rest, state, stepStates } };
}

/** Forget the saved run. */
export async function clearRun(): Promise<void> {
  const r = await root();
  if (!r) return;
  for await (const name of (r as unknown as { keys(): AsyncIterable<string> }).keys()) await opfsRemove(r, name);
}
