// Writes a model's logits for an inputs.json ({"input_ids": [[...], ...]}) as JSON {"shape", "logits"}, for
// comparisons with HF transformers on another machine (packages/cli/src/bench/merged-hf-check.sh).
//   node dump-logits.js <model dir> <inputs.json> <out.json>
import { readFile, writeFile } from 'node:fs/promises';
import { createContext } from '@rusty/backend';
import { noGrad, Tensor } from '@rusty/autograd';
import { loadPretrained } from '../model/pretrained';

const [dir, inputsPath, outPath] = process.argv.slice(2);
if (!dir || !inputsPath || !outPath) throw new Error('usage: dump-logits <model dir> <inputs.json> <out.json>');
const ctx = await createContext();
const { model } = await loadPretrained(ctx, dir);
const ids = JSON.parse(await readFile(inputsPath, 'utf8')).input_ids as number[][];
const shape = [ids.length, ids[0]!.length];
const logits = await noGrad(() => model.forward(Tensor.fromArray(ctx, ids.flat(), shape, { dtype: 'i32' }))).toArray();
await writeFile(outPath, JSON.stringify({ shape: [...shape, model.config.vocabSize], logits: Array.from(logits) }));
ctx.destroy();
