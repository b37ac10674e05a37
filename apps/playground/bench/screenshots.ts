// Screenshots of each state of the page for apps/playground/README.md (docs/*.png, half scale):
//   pnpm --filter @rusty/playground screenshots
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ByteTokenizer } from '@rusty/loader';
import type { ElementHandle } from 'puppeteer-core';
import { APP, FIXTURES, openPlayground, setValue, type Playground } from '../test/harness';

const OUT = join(APP, 'docs');
await mkdir(OUT, { recursive: true });
const viewport = { width: 1280, height: 900, deviceScaleFactor: 0.5 };
const shot = (p: Playground, name: string) => p.page.screenshot({ path: join(OUT, `${name}.png`) as `${string}.png`, fullPage: true });

const none = await openPlayground({ viewport, webgpu: false });
await shot(none, 'no-webgpu');
await none.close();

const p = await openPlayground({ viewport });
try {
  const { page } = p;
  await shot(p, 'start');
  await setValue(page, '#builtin-steps', '80');
  await page.click('#pretrain');
  await page.waitForFunction(() => (window as unknown as { rustyPlayground: { step: number } }).rustyPlayground.step >= 30, { timeout: 300_000, polling: 200 });
  await shot(p, 'pretraining');
  await p.waitState(['done'], 600_000);
  await shot(p, 'pretrained');

  const model = join(p.tmp, 'llama-tiny');
  await mkdir(model);
  for (const f of ['config.json', 'model.safetensors']) await copyFile(join(FIXTURES, 'llama-tiny', f), join(model, f));
  await writeFile(join(model, 'tokenizer.json'), JSON.stringify(new ByteTokenizer({ specials: [], bos: null }).toJSON()));
  await page.click('#tab-own');
  const input = (await page.$('#pick-files')) as ElementHandle<HTMLInputElement>;
  await input.uploadFile(join(model, 'config.json'), join(model, 'model.safetensors'), join(model, 'tokenizer.json'));
  await p.waitState(['loaded'], 60_000);
  const qa = [
    ['What does Rusty train on?', 'WebGPU, in Node and in the browser.'],
    ['Where do the weights go?', 'Nowhere: they stay in this tab.'],
    ['What does the adapter hold?', 'LoRA A and B for each projection.'],
  ];
  await setValue(page, '#data-text', qa.map(([q, a]) => JSON.stringify({ prompt: `Q: ${q}\nA: `, response: a })).join('\n'));
  for (const [id, v] of Object.entries({ steps: '60', seqLen: '64', batchSize: '3', lr: '0.02', targets: 'all' })) await setValue(page, `#opt-${id}`, v);
  await setValue(page, '#prompt', 'Q: Where do the weights go?\nA: ');
  await setValue(page, '#temperature', '0');
  await setValue(page, '#max-new', '32');
  await shot(p, 'model-loaded');
  await page.click('#start');
  await p.waitState(['done'], 600_000);
  await page.waitForFunction(() => ((window as unknown as { rustyPlayground: { lastGenerated: { after: number[] } | null } }).rustyPlayground.lastGenerated?.after.length ?? 0) > 0);
  await page.click('#export-adapter');
  await page.waitForSelector('#downloads a');
  await shot(p, 'finetuned');

  const bad = join(p.tmp, 'bad');
  await mkdir(bad);
  await copyFile(join(FIXTURES, 'llama-tiny', 'config.json'), join(bad, 'config.json'));
  await writeFile(join(bad, 'model.safetensors'), Buffer.from([200, 0, 0, 0, 0, 0, 0, 0, 123]));
  await input.uploadFile(join(bad, 'config.json'), join(bad, 'model.safetensors'));
  await p.waitState(['idle'], 60_000);
  await shot(p, 'bad-file');
} finally {
  await p.close();
}
console.log(JSON.stringify({ written: OUT }));
