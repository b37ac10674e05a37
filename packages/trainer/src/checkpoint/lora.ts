import { join } from 'node:path';
import { loadLoraAdapter, saveLoraAdapter } from '@rusty/loader';
import { loraModules, type Module } from '@rusty/graph';
import { CheckpointError } from '../errors';
import { loadCheckpoint, writeCheckpoint, type CheckpointContents, type LoadedCheckpoint, type RestoreTargets, type SaveCheckpointOptions } from './checkpoint';
import { syncTree } from './fs-atomic';
import { loadAdapterInPlace } from './peft';

/** The sub-directory of a LoRA checkpoint holding the PEFT adapter (`adapter_config.json` + `adapter_model.safetensors`). */
export const ADAPTER_DIR = 'adapter';

/** What `saveLoraCheckpoint` stores: the LoRA model's adapter instead of plain weights, plus the training state. */
export interface LoraCheckpointContents extends Omit<CheckpointContents, 'params'> {
  /** The model with LoRA applied (`applyLora`). */
  model: Module;
}

/**
 * `saveCheckpoint` for LoRA fine-tuning: the trainable weights are written as a PEFT adapter by `@rusty/loader`'s
 * `saveLoraAdapter` (in `checkpoint-<step>/adapter/`, loadable by PEFT's `PeftModel.from_pretrained` and by
 * `loadLoraAdapter`), next to the optimizer, scheduler, scaler, data-loader and RNG state. Same atomic switch
 * and `keepLast` pruning as `saveCheckpoint`.
 */
export async function saveLoraCheckpoint(root: string, contents: LoraCheckpointContents, opts: SaveCheckpointOptions = {}): Promise<string> {
  const mods = loraModules(contents.model);
  if (!mods.size) throw new CheckpointError('saveLoraCheckpoint: the model has no LoRA modules (call applyLora first)');
  const names = contents.model.trainableParameters().map(([n]) => n);
  return writeCheckpoint(
    root,
    contents,
    {
      kind: 'peft',
      async write(dir) {
        await saveLoraAdapter(contents.model, join(dir, ADAPTER_DIR));
        await syncTree(join(dir, ADAPTER_DIR));
      },
    },
    names,
    opts,
  );
}

/** A LoRA checkpoint read back: `restore` also loads the adapter into `model`. */
export interface LoadedLoraCheckpoint extends Omit<LoadedCheckpoint, 'restore'> {
  /** The PEFT adapter directory. */
  adapterDir: string;
  restore(targets: Omit<RestoreTargets, 'params'> & { model?: Module }): Promise<void>;
}

/**
 * Load a checkpoint written by `saveLoraCheckpoint` (a checkpoint directory, or a root: the newest complete
 * one). `await ckpt.restore({ model, optimizer, ... })` loads the adapter weights (bit-exact) and the state.
 */
export async function loadLoraCheckpoint(path: string): Promise<LoadedLoraCheckpoint> {
  const ck = await loadCheckpoint(path);
  const adapterDir = join(ck.path, ADAPTER_DIR);
  return {
    ...ck,
    adapterDir,
    async restore(t) {
      if (t.model) {
        try {
          // a model that has its LoRA modules (a run being resumed: the optimizer holds their tensors) gets the
          // values written in place; a plain base model gets the adapter applied by the loader
          if (loraModules(t.model).size) await loadAdapterInPlace(t.model, adapterDir);
          else await loadLoraAdapter(t.model, adapterDir);
        } catch (e) {
          throw new CheckpointError(`${adapterDir}: loading the LoRA adapter failed: ${(e as Error).message}`, { cause: e });
        }
      }
      ck.restore({ optimizer: t.optimizer, scheduler: t.scheduler, scaler: t.scaler, dataLoader: t.dataLoader });
    },
  };
}
