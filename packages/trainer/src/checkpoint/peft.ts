// Loading a PEFT adapter into LoRA modules a model already has. `@rusty/loader`'s `loadLoraAdapter` applies
// LoRA to a base model (it wraps the target Linears); a run being resumed has its LoRA modules already, and its
// optimizer holds their tensors, so the values are written in place here instead.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loraModules, type Module } from '@rusty/graph';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readSafetensors } from '@rusty/loader';
import { CheckpointError } from '../errors';

const PREFIX = 'base_model.model.';

/** Load the LoRA weights of a PEFT adapter into the LoRA modules `model` already has (values written in place). */
export async function loadAdapterInPlace(model: Module, dir: string): Promise<void> {
  const mods = loraModules(model);
  const cfg = JSON.parse(await readFile(join(dir, ADAPTER_CONFIG), 'utf8')) as { r?: number; lora_alpha?: number };
  const st = await readSafetensors(join(dir, ADAPTER_WEIGHTS));
  try {
    for (const [name, m] of mods) {
      if (cfg.r !== undefined && cfg.r !== m.r) throw new CheckpointError(`${dir}: adapter rank ${cfg.r}, the model's LoRA rank is ${m.r}`);
      for (const [suffix, t] of [['lora_A.weight', m.loraA], ['lora_B.weight', m.loraB]] as const) {
        const key = `${PREFIX}${name}.${suffix}`;
        const alt = `${PREFIX}${name}.${suffix.replace('.weight', '.default.weight')}`;
        const name2 = st.tensors.has(key) ? key : alt;
        const info = st.tensors.get(name2);
        if (!info) throw new CheckpointError(`${dir}: the adapter has no tensor '${key}'`);
        if (info.shape.length !== t.shape.length || info.shape.some((d, i) => d !== t.shape[i]))
          throw new CheckpointError(`${dir}: '${key}' has shape [${info.shape.join(', ')}], the model's is [${t.shape.join(', ')}]`);
        t.ctx.write(t.data.buffer, await st.readF32(name2));
      }
    }
  } finally {
    await st.close();
  }
}
