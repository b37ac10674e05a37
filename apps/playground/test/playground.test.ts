// The playground in a real headless Chromium (Debian's `chromium`, WebGPU on SwiftShader): the app is built with
// Vite, served on 127.0.0.1 and driven with puppeteer-core. The built-in start trains and its loss falls; a
// fixture model picked through the file input gives HF's logits; a LoRA fine-tune in the page produces an adapter
// that `rusty generate --adapter` (the built CLI, in Node) loads and decodes to the page's greedy tokens, and so
// does the merged model it downloads; runs stopped or finished come back after a reload from their OPFS
// checkpoints.
// Screenshots go to artifacts/ (git-ignored).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ByteTokenizer, readSafetensors } from '@rusty/loader';
import type { ElementHandle, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP, CLI, FIXTURES, openPlayground, REPO, setValue as setIn, waitDownloads, type Playground, type PlaygroundHandle } from './harness';

const FIXTURE = join(FIXTURES, 'llama-tiny');
const ARTIFACTS = join(APP, 'artifacts');

let pgd: Playground;
let page: Page;
let tmp: string;
let downloads: string;
const pg = <T>(fn: (p: PlaygroundHandle) => T | Promise<T>) => pgd.pg(fn);
const waitState = (states: string[], timeout: number) => pgd.waitState(states, timeout);
const setValue = (selector: string, value: string) => setIn(page, selector, value);

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) as `${string}.png`, fullPage: true });
}

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run pnpm build first (the test compares with the built CLI)`);
  await mkdir(ARTIFACTS, { recursive: true });
  pgd = await openPlayground();
  ({ page, tmp, downloads } = pgd);
}, 180_000);

afterAll(async () => {
  await pgd?.close();
});

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('the playground in headless Chromium', () => {
  it('finds a WebGPU adapter', async () => {
    expect(await pg((p) => p.state)).toBe('idle');
    expect(await page.$eval('#device', (e) => e.textContent)).toMatch(/WebGPU/);
    await shot('1-start');
  });

  it('the built-in start pretrains the tiny Llama and its loss falls; a stopped run resumes after a reload', async () => {
    await setValue('#builtin-steps', '30');
    await page.click('#pretrain');
    await page.waitForFunction(() => (window as unknown as { rustyPlayground: PlaygroundHandle }).rustyPlayground.step >= 8, { timeout: 120_000, polling: 200 });
    await shot('2-pretraining');
    await page.click('#stop');
    expect(await waitState(['stopped'], 60_000)).toBe('stopped');
    const stoppedAt = await pg((p) => p.step);
    expect(stoppedAt).toBeGreaterThanOrEqual(8);
    expect(stoppedAt).toBeLessThan(30);
    // a reload loses the page; the OPFS checkpoint written at the stop brings the run back
    await page.reload();
    await waitState(['idle'], 60_000);
    expect(await page.$eval('#resume', (e) => !(e as HTMLElement).hidden)).toBe(true);
    expect(await page.$eval('#resume-text', (e) => e.textContent)).toContain(`step ${stoppedAt} of 30`);
    await page.click('#resume-go');
    expect(await waitState(['done'], 150_000)).toBe('done');
    const losses = await pg((p) => p.losses);
    expect(losses.map(([s]) => s)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const first = mean(losses.slice(0, 5).map(([, l]) => l));
    const last = mean(losses.slice(-5).map(([, l]) => l));
    // bytes start near ln(259) = 5.56 nats; 30 steps of the preset learn the story's letters and words
    expect(first).toBeGreaterThan(4.5);
    expect(last).toBeLessThan(first - 1.5);
    expect((await page.$eval('#after', (e) => e.textContent ?? '')).length).toBeGreaterThan('The robot'.length);
    await shot('3-pretrained');
  }, 300_000);

  it('a fixture model picked through the file input gives the logits of HF transformers (1e-4)', async () => {
    await page.click('#tab-own');
    const input = (await page.$('#pick-files')) as ElementHandle<HTMLInputElement>;
    await input.uploadFile(join(FIXTURE, 'config.json'), join(FIXTURE, 'model.safetensors'));
    expect(await waitState(['loaded', 'idle'], 60_000)).toBe('loaded');
    expect(await page.$eval('#model-info', (e) => e.textContent)).toMatch(/llama · 2 layers · hidden 64/);
    const inputs = JSON.parse(await readFile(join(FIXTURE, 'inputs.json'), 'utf8')) as { input_ids: number[][] };
    const got = await page.evaluate((ids) => (window as unknown as { rustyPlayground: PlaygroundHandle }).rustyPlayground.logits(ids), inputs.input_ids);
    const st = await readSafetensors(join(FIXTURE, 'expected.safetensors'));
    const want = await st.readF32('logits');
    await st.close();
    expect(got.length).toBe(want.length);
    let err = 0;
    let max = 0;
    for (let i = 0; i < want.length; i++) {
      err = Math.max(err, Math.abs(got[i]! - want[i]!));
      max = Math.max(max, Math.abs(want[i]!));
    }
    expect(err / max).toBeLessThan(1e-4);
  });

  it('a bad file and a model too large for the adapter are reported with the typed errors of the CLI', async () => {
    const bad = join(tmp, 'bad');
    await mkdir(bad);
    await copyFile(join(FIXTURE, 'config.json'), join(bad, 'config.json'));
    await writeFile(join(bad, 'model.safetensors'), Buffer.from([200, 0, 0, 0, 0, 0, 0, 0, 123]));
    await ((await page.$('#pick-files')) as ElementHandle<HTMLInputElement>).uploadFile(join(bad, 'config.json'), join(bad, 'model.safetensors'));
    await waitState(['idle'], 60_000);
    expect(await pg((p) => p.error())).toMatch(/SafetensorsError: .*model\.safetensors/);
    await shot('4-bad-file');
    await page.click('#error-close');
    // a config whose embedding (2 TiB) cannot fit one buffer of any adapter is refused before any weight is read
    const huge = join(tmp, 'huge');
    await mkdir(huge);
    const config = JSON.parse(await readFile(join(FIXTURE, 'config.json'), 'utf8'));
    await writeFile(join(huge, 'config.json'), JSON.stringify({ ...config, vocab_size: 1048576, hidden_size: 524288, head_dim: 128, num_attention_heads: 4096, num_key_value_heads: 8 }));
    await copyFile(join(FIXTURE, 'model.safetensors'), join(huge, 'model.safetensors'));
    await ((await page.$('#pick-files')) as ElementHandle<HTMLInputElement>).uploadFile(join(huge, 'config.json'), join(huge, 'model.safetensors'));
    await waitState(['idle'], 60_000);
    expect(await pg((p) => p.error())).toMatch(/OutOfMemoryError: picked files: the embedding needs a 2\.00 TiB buffer, more than this adapter's maxBufferSize/);
    await page.click('#error-close');
  });

  it('a LoRA fine-tune in the page gives an adapter that rusty generate loads to the same greedy tokens', async () => {
    // the fixture with a tokenizer of its 256 ids (bytes, no specials)
    const model = join(tmp, 'llama-tiny');
    await mkdir(model);
    for (const f of ['config.json', 'model.safetensors']) await copyFile(join(FIXTURE, f), join(model, f));
    await writeFile(join(model, 'tokenizer.json'), JSON.stringify(new ByteTokenizer({ specials: [], bos: null }).toJSON()));
    await ((await page.$('#pick-files')) as ElementHandle<HTMLInputElement>).uploadFile(join(model, 'config.json'), join(model, 'model.safetensors'), join(model, 'tokenizer.json'));
    expect(await waitState(['loaded', 'idle'], 60_000)).toBe('loaded');
    const lines = ['the cat sat on the mat', 'the dog sat on the log', 'a bird sang in the tree'].map((t) => JSON.stringify({ prompt: 'Q: ', response: t }));
    await setValue('#data-text', lines.join('\n'));
    for (const [id, v] of Object.entries({ steps: '12', seqLen: '32', batchSize: '2', r: '4', alpha: '8', lr: '0.01', targets: 'all' })) await setValue(`#opt-${id}`, v);
    await setValue('#prompt', 'Q: the ');
    await setValue('#temperature', '0');
    await setValue('#max-new', '12');
    await page.click('#start');
    expect(await waitState(['done', 'stopped'], 180_000)).toBe('done');
    await page.waitForFunction(() => ((window as unknown as { rustyPlayground: PlaygroundHandle }).rustyPlayground.lastGenerated?.after.length ?? 0) > 0, { timeout: 60_000 });
    const gen = (await pg((p) => p.lastGenerated))!;
    expect(gen.prompt).toEqual([...Buffer.from('Q: the ')]);
    await shot('5-finetuned');
    await page.click('#export-adapter');
    await page.waitForFunction(() => document.querySelectorAll('#downloads a').length === 2, { timeout: 30_000 });
    const want = ['adapter_config.json', 'adapter_model.safetensors'];
    expect(await waitDownloads(downloads, want)).toEqual(want);
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [CLI, 'generate', '--model', model, '--adapter', downloads, '--ids', gen.prompt.join(','), '--temperature', '0', '--max-new-tokens', '12'],
      { cwd: REPO, timeout: 120_000 },
    );
    expect(JSON.parse(stdout.trim())).toEqual(gen.after);
    // the adapter changed the model: the base model's greedy tokens differ
    expect(gen.after).not.toEqual(gen.before);
    // the merged model (LoRA folded into the weights) is an HF directory that generates the same tokens alone
    const merged = join(tmp, 'merged');
    await mkdir(merged);
    await pgd.downloadTo(merged);
    await page.click('#export-merged');
    const files = ['config.json', 'model.safetensors', 'tokenizer.json'];
    expect(await waitDownloads(merged, files)).toEqual(files);
    const alone = await promisify(execFile)(
      process.execPath,
      [CLI, 'generate', '--model', merged, '--ids', gen.prompt.join(','), '--temperature', '0', '--max-new-tokens', '12'],
      { cwd: REPO, timeout: 120_000 },
    );
    expect(JSON.parse(alone.stdout.trim())).toEqual(gen.after);
    // a reload, the same model picked again: the run comes back from OPFS with its adapter (same greedy tokens)
    await page.reload();
    await waitState(['idle'], 60_000);
    await page.click('#tab-own');
    await ((await page.$('#pick-files')) as ElementHandle<HTMLInputElement>).uploadFile(join(model, 'config.json'), join(model, 'model.safetensors'), join(model, 'tokenizer.json'));
    expect(await waitState(['loaded', 'idle'], 60_000)).toBe('loaded');
    expect(await page.$eval('#resume-text', (e) => e.textContent)).toContain('LoRA fine-tune of picked files was saved at step 12 of 12');
    await setValue('#prompt', 'Q: the ');
    await setValue('#temperature', '0');
    await setValue('#max-new', '12');
    await page.click('#resume-go');
    expect(await waitState(['done'], 120_000)).toBe('done');
    await page.waitForFunction(() => ((window as unknown as { rustyPlayground: PlaygroundHandle }).rustyPlayground.lastGenerated?.after.length ?? 0) > 0, { timeout: 60_000 });
    expect((await pg((p) => p.lastGenerated))!.after).toEqual(gen.after);
  }, 300_000);
});
