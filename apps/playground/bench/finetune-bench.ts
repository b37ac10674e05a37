// Benchmark: tokens/s of the same small LoRA fine-tune in the page (headless Chromium, WebGPU on SwiftShader where
// there is no GPU) and in Node (`rusty finetune`, Dawn on the machine's Vulkan adapter: lavapipe on CPU machines).
// The model is the llama-tiny fixture with a 256-byte tokenizer; the data the playground's bundled corpus. Both
// rates leave out the first step (kernel compilation). Prints JSON.
//   pnpm --filter @rusty/playground bench [steps]
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ByteTokenizer } from '@rusty/loader';
import type { ElementHandle } from 'puppeteer-core';
import { APP, CLI, FIXTURES, openPlayground, REPO, setValue } from '../test/harness';

const steps = Number(process.argv[2] ?? 30);
const options = { steps: String(steps), seqLen: '64', batchSize: '4' };

const pgd = await openPlayground();
try {
  const model = join(pgd.tmp, 'llama-tiny');
  await mkdir(model);
  for (const f of ['config.json', 'model.safetensors']) await copyFile(join(FIXTURES, 'llama-tiny', f), join(model, f));
  await writeFile(join(model, 'tokenizer.json'), JSON.stringify(new ByteTokenizer({ specials: [], bos: null }).toJSON()));
  const corpus = join(APP, 'src/corpus.txt');
  const { page } = pgd;
  const device = await page.$eval('#device', (e) => e.textContent ?? '');
  await page.click('#tab-own');
  await ((await page.$('#pick-files')) as ElementHandle<HTMLInputElement>).uploadFile(join(model, 'config.json'), join(model, 'model.safetensors'), join(model, 'tokenizer.json'));
  if ((await pgd.waitState(['loaded', 'idle'], 60_000)) !== 'loaded') throw new Error(`the page did not load the model: ${await pgd.pg((p) => p.error())}`);
  await setValue(page, '#data-text', await readFile(corpus, 'utf8'));
  for (const [id, v] of Object.entries(options)) await setValue(page, `#opt-${id}`, v);
  await setValue(page, '#max-new', '1');
  await page.click('#start');
  if ((await pgd.waitState(['done', 'stopped'], 600_000)) !== 'done') throw new Error(`the page's run failed: ${await pgd.pg((p) => p.error())}`);
  const pageRate = (await pgd.pg((p) => p.rate))!;

  const out = join(pgd.tmp, 'node-run');
  const args = [CLI, 'finetune', '--model', model, '--data', corpus, '--steps', String(steps), '--seq-len', '64', '--batch-size', '4', '--val-split', '0', '--out', out];
  const { stderr } = await promisify(execFile)(process.execPath, args, { cwd: REPO, maxBuffer: 64 << 20 });
  const records = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { kind: string; step: number; tokensPerSec: number; stepTime: number })
    .filter((r) => r.kind === 'train' && r.step > 1);
  const tokens = records.reduce((n, r) => n + r.tokensPerSec * r.stepTime, 0);
  const seconds = records.reduce((n, r) => n + r.stepTime, 0);
  const nodeAdapter = /software adapter \((.*)\): slow/.exec(stderr)?.[1] ?? 'see rusty devices';
  console.log(
    JSON.stringify(
      {
        date: new Date().toISOString(),
        run: { model: 'fixtures/llama-tiny + 256-byte tokenizer', data: 'apps/playground/src/corpus.txt', steps, seqLen: 64, batchSize: 4, lora: 'r 8, alpha 16, q/k/v/o' },
        page: { adapter: device, tokensPerSec: Math.round(pageRate) },
        node: { adapter: nodeAdapter, command: `rusty ${args.slice(1).join(' ')}`, tokensPerSec: Math.round(tokens / seconds) },
      },
      null,
      2,
    ),
  );
} finally {
  await pgd.close();
}
