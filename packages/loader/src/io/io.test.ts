// The source/sink interface: the browser-side trees (picked files, memory) read and write exactly what the Node
// paths do, so a page and the CLI exchange adapters and checkpoints byte for byte.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createContext, type Context } from '@rusty/backend';
import { LlamaForCausalLM, applyLora, loraModules, parseLlamaConfig } from '@rusty/graph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLoraAdapter, saveLoraAdapter } from '../model/peft';
import { loadPretrained } from '../model/pretrained';
import { openCheckpoint } from '../safetensors/checkpoint';
import { readSafetensors } from '../safetensors/read';
import { serializeSafetensors, writeSafetensors } from '../safetensors/write';
import { FIXTURES, tempDir } from '../testing/fixtures';
import { blobTree, memoryTree, pickedFilesTree } from './blob';
import { joinName } from './source';

let ctx: Context;
const tmp = tempDir('rusty-io-');
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => {
  ctx.destroy();
  tmp.cleanup();
});

const tensors = () =>
  new Map([
    ['b', { shape: [2, 3], data: Float32Array.from([1, 2, 3, 4, 5, 6]) }],
    ['a', { shape: [4], data: Int32Array.from([7, -8, 9, 10]) }],
    ['é', { dtype: 'F16' as const, shape: [2], data: Uint16Array.from([0x3c00, 0xc000]) }],
  ]);

describe('source/sink interface', () => {
  it('serializeSafetensors gives the bytes writeSafetensors writes to a path', async () => {
    const path = join(tmp.dir, 'x.safetensors');
    await writeSafetensors(path, tensors(), { format: 'pt' });
    const mem = await serializeSafetensors(tensors(), { format: 'pt' });
    expect(Buffer.from(mem).equals(await readFile(path))).toBe(true);
  });

  it('readSafetensors reads a Blob (a browser File) like the file', async () => {
    const bytes = await serializeSafetensors(tensors());
    const st = await readSafetensors(new Blob([bytes as Uint8Array<ArrayBuffer>]));
    expect([...st.tensors.keys()]).toEqual(['b', 'a', 'é']);
    expect([...(await st.read('a'))]).toEqual([7, -8, 9, 10]);
    expect([...(await st.readF32('é'))]).toEqual([1, -2]);
    await st.close();
    const truncated = new Blob([bytes.subarray(0, bytes.byteLength - 4) as Uint8Array<ArrayBuffer>]);
    await expect(readSafetensors(truncated)).rejects.toThrow(/SafetensorsError|data|bytes|size/);
  });

  it('a model directory picked in a browser (folder picker names) opens like the directory', async () => {
    const dir = join(FIXTURES, 'llama-tiny');
    const files = await Promise.all(
      (await readdir(dir)).filter((n) => !n.includes('lora')).map(async (n) => {
        const f = new File([await readFile(join(dir, n))], n);
        Object.defineProperty(f, 'webkitRelativePath', { value: `llama-tiny/${n}` });
        return f;
      }),
    );
    const tree = pickedFilesTree(files);
    expect(tree.name).toBe('llama-tiny');
    const a = await openCheckpoint(tree);
    const b = await openCheckpoint(dir);
    expect([...a.tensors.keys()]).toEqual([...b.tensors.keys()]);
    const name = 'model.layers.1.mlp.down_proj.weight';
    expect(await a.readF32(name)).toEqual(await b.readF32(name));
    await a.close();
    await b.close();
  });

  it('loadPretrained reads a tree of picked files (config, weights, tokenizer) like the directory', async () => {
    const dir = join(FIXTURES, 'llama-tiny');
    const tok = await readFile(join(FIXTURES, 'tokenizers', 'bytelevel.tokenizer.json'));
    const files = [new File([await readFile(join(dir, 'config.json'))], 'config.json'), new File([await readFile(join(dir, 'model.safetensors'))], 'model.safetensors'), new File([tok], 'tokenizer.json')];
    const a = await loadPretrained(ctx, pickedFilesTree(files));
    const b = await loadPretrained(ctx, dir);
    expect(a.config).toEqual(b.config);
    expect(a.tokenizer?.encode('hello world')).toEqual((await import('../tokenizer/tokenizer')).Tokenizer.fromJSON(tok.toString()).encode('hello world'));
    expect(b.tokenizer).toBeNull();
    const pa = [...a.model.namedParameters()];
    const pb = new Map(b.model.namedParameters());
    for (const [name, t] of pa) expect(await t.toArray(), name).toEqual(await pb.get(name)!.toArray());
    await expect(loadPretrained(ctx, pickedFilesTree(files.slice(1)))).rejects.toThrow(/picked files: no config.json/);
    a.model.dispose();
    b.model.dispose();
  });

  it('sharded checkpoints open from a tree; shards may not leave it', async () => {
    const shard = await serializeSafetensors(tensors());
    const index = JSON.stringify({ weight_map: { a: 'sub/one.safetensors', b: 'sub/one.safetensors', é: 'sub/one.safetensors' } });
    const tree = blobTree(new Map([['model.safetensors.index.json', new Blob([index])], ['sub/one.safetensors', new Blob([shard as Uint8Array<ArrayBuffer>])]]), 'picked');
    const ck = await openCheckpoint(tree);
    expect([...(await ck.read('a'))]).toEqual([7, -8, 9, 10]);
    await ck.close();
    const bad = JSON.stringify({ weight_map: { a: '../one.safetensors' } });
    const escape = blobTree(new Map([['model.safetensors.index.json', new Blob([bad])]]), 'picked');
    await expect(openCheckpoint(escape)).rejects.toThrow(/outside the checkpoint directory/);
    expect(joinName('a', '../b')).toBe('b');
    expect(joinName('', '../b')).toBeNull();
  });

  it('a LoRA adapter saved to memory is byte-identical to the one saved to a directory, and loads back', async () => {
    const config = parseLlamaConfig(await readFile(join(FIXTURES, 'llama-tiny', 'config.json'), 'utf8'), 'config.json');
    const model = new LlamaForCausalLM(ctx, config, { seed: 1 });
    applyLora(model, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'], seed: 3 });
    const out = join(tmp.dir, 'adapter');
    await saveLoraAdapter(model, out, { baseModel: 'base' });
    const mem = memoryTree('adapter');
    await saveLoraAdapter(model, mem, { baseModel: 'base' });
    expect([...mem.files.keys()].sort()).toEqual((await readdir(out)).sort());
    for (const [name, bytes] of mem.files) expect(Buffer.from(bytes).equals(await readFile(join(out, name))), name).toBe(true);
    const other = new LlamaForCausalLM(ctx, config, { seed: 1 });
    const cfg = await loadLoraAdapter(other, mem);
    expect(cfg.r).toBe(2);
    expect(loraModules(other).size).toBe(loraModules(model).size);
    model.dispose();
    other.dispose();
  });
});
