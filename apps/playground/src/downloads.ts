// Downloads: files made in memory (an adapter, a merged or trained model directory) offered as links.
import { llamaConfigToJSON, mergeLora, unmergeLora, type LlamaConfig } from '@rusty/graph';
import { serializeSafetensors, type Tokenizer } from '@rusty/loader';
import type { Model } from './engine';

const fmt = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n));

/** Offer files as download links in `list` and start the downloads. */
export function offer(list: HTMLElement, files: Map<string, Uint8Array>, prefix: string): void {
  list.replaceChildren();
  for (const [name, bytes] of files) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>]));
    a.download = name;
    a.textContent = `${prefix}/${name} (${fmt(bytes.byteLength)}B)`;
    a.dataset.file = name;
    const li = document.createElement('li');
    li.append(a);
    list.append(li);
  }
  for (const a of list.querySelectorAll('a')) a.click();
}

/** An HF model directory of the model (LoRA merged into the weights when `merged`; unmerged afterwards). */
export async function modelFiles(s: { model: Model; config: LlamaConfig; tokenizer: Tokenizer | null }, merged: boolean): Promise<Map<string, Uint8Array>> {
  if (merged) mergeLora(s.model);
  try {
    const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
    const state = await allParameters(s.model);
    for (const [k, v] of state) if (!k.includes('lora_')) tensors.set(k, v);
    const files = new Map<string, Uint8Array>();
    files.set('config.json', new TextEncoder().encode(JSON.stringify(llamaConfigToJSON(s.config), null, 2) + '\n'));
    files.set('model.safetensors', await serializeSafetensors(tensors, { format: 'pt' }));
    if (s.tokenizer) files.set('tokenizer.json', new TextEncoder().encode(JSON.stringify(s.tokenizer.toJSON())));
    return files;
  } finally {
    if (merged) unmergeLora(s.model);
  }
}

async function allParameters(model: Model) {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of model.namedParameters()) out.set(name, { shape: [...t.shape], data: new Float32Array(await t.toArray()) });
  return out;
}
