// The golden fixtures of ../shared/fixtures (beside the repository) for the loader's tests: where they are, which
// model fixtures there are, and their inputs and expected tensors.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readSafetensors } from '../safetensors/read';

export const FIX = fileURLToPath(new URL('../../../../../shared/fixtures/', import.meta.url));

/** Every model fixture (one per architecture, Llama also in f16 and bf16 storage). */
export const FIXTURES = ['llama-tiny', 'llama-tiny-f16', 'llama-tiny-bf16', 'mistral-tiny', 'qwen2-tiny', 'qwen3-tiny', 'gemma3-tiny'];

/** A fixture's inputs.json: ids and labels flattened, with the batch and sequence sizes. */
export async function fixtureInputs(dir: string) {
  const j = JSON.parse(await readFile(join(FIX, dir, 'inputs.json'), 'utf8'));
  const ids = (j.input_ids as number[][]).flat();
  const labels = (j.labels as number[][]).flat();
  return { ids, labels, b: j.input_ids.length as number, t: j.input_ids[0].length as number };
}

/** Every tensor of a safetensors file, as f32. */
export async function fixtureTensors(file: string): Promise<Map<string, Float32Array>> {
  const st = await readSafetensors(file);
  const out = new Map<string, Float32Array>();
  for (const name of st.tensors.keys()) out.set(name, await st.readF32(name));
  await st.close();
  return out;
}
