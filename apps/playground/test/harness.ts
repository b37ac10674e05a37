// Build the playground, serve it on 127.0.0.1 and open it in headless Chromium (Debian's `chromium`; WebGPU on
// SwiftShader where there is no GPU), for the browser test and the benchmark.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { build } from 'vite';

export const APP = fileURLToPath(new URL('..', import.meta.url));
export const REPO = resolve(APP, '../..');
/** ../shared/fixtures beside the repository checkout. */
export const FIXTURES = resolve(REPO, '../shared/fixtures');
/** The built CLI (`pnpm build`). */
export const CLI = join(REPO, 'packages/cli/dist/bin.js');
export const CHROMIUM = process.env.RUSTY_CHROMIUM ?? '/usr/bin/chromium';

/** Flags that give headless Chromium a WebGPU adapter on a machine without a GPU (SwiftShader) and keep it off
 *  the network (without the background-networking flags a closed network refuses many connections). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--disable-default-apps',
];

const MIME: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.map': 'application/json', '.svg': 'image/svg+xml' };

/** What the page exposes as `window.rustyPlayground`. */
export interface PlaygroundHandle {
  state: string;
  losses: [number, number][];
  step: number;
  lastGenerated: { prompt: number[]; before: number[]; after: number[] } | null;
  rate: number | null;
  logits(ids: number[][]): Promise<number[]>;
  error(): string | null;
}

export interface Playground {
  url: string;
  browser: Browser;
  page: Page;
  /** A temporary directory (removed by `close`). */
  tmp: string;
  /** Where the page's downloads land (see `downloadTo`). */
  downloads: string;
  /** Send the page's next downloads to `dir`. */
  downloadTo(dir: string): Promise<void>;
  /** Evaluate `fn(window.rustyPlayground)` in the page. */
  pg<T>(fn: (p: PlaygroundHandle) => T | Promise<T>): Promise<T>;
  /** Wait until the page's state is one of `states`; returns it. */
  waitState(states: string[], timeout: number): Promise<string>;
  close(): Promise<void>;
}

/** Build the app, serve it and open it (the page waits for its WebGPU adapter). */
export async function openPlayground(o: { viewport?: { width: number; height: number; deviceScaleFactor?: number }; webgpu?: boolean } = {}): Promise<Playground> {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium not found at ${CHROMIUM}: run .ci/setup.sh (it installs Debian's chromium package), or set RUSTY_CHROMIUM to a Chromium binary`);
  const tmp = await mkdtemp(join(tmpdir(), 'rusty-playground-'));
  const downloads = join(tmp, 'downloads');
  await mkdir(downloads);
  const dist = join(tmp, 'dist');
  await build({ root: APP, logLevel: 'warn', build: { outDir: dist } });
  const server: Server = createServer(async (req, res) => {
    const path = join(dist, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname).replace(/\/$/, '/index.html'));
    if (!path.startsWith(dist)) return void res.writeHead(403).end();
    try {
      const body = await readFile(path);
      res.writeHead(200, { 'content-type': MIME[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS.filter((a) => o.webgpu !== false || !/webgpu|Vulkan/.test(a)), ...(o.webgpu === false ? ['--disable-features=WebGPU'] : []), `--user-data-dir=${join(tmp, 'profile')}`],
    defaultViewport: o.viewport ?? { width: 1280, height: 1000 },
  });
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  const cdp = await page.createCDPSession();
  const downloadTo = async (dir: string) => void (await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir }));
  await downloadTo(downloads);
  const pg = <T>(fn: (p: PlaygroundHandle) => T | Promise<T>): Promise<T> => page.evaluate(`(${fn.toString()})(window.rustyPlayground)`) as Promise<T>;
  const waitState = async (states: string[], timeout: number) => {
    await page.waitForFunction((s: string[]) => s.includes((window as unknown as { rustyPlayground: PlaygroundHandle }).rustyPlayground?.state), { timeout, polling: 250 }, states);
    return pg((p) => p.state);
  };
  await page.goto(url);
  await waitState(['idle', 'no-gpu'], 60_000);
  return {
    url,
    browser,
    page,
    tmp,
    downloads,
    downloadTo,
    pg,
    waitState,
    async close() {
      await browser.close();
      server.close();
      await rm(tmp, { recursive: true, force: true });
    },
  };
}

/** Set an input's value. */
export async function setValue(page: Page, selector: string, value: string): Promise<void> {
  await page.$eval(selector, (el, v) => ((el as HTMLInputElement).value = v as string), value);
}

/** The file names in `dir` once `names` are all there and no download is in progress (`.crdownload`), or after
 *  `timeout` ms. */
export async function waitDownloads(dir: string, names: string[], timeout = 30_000): Promise<string[]> {
  const t0 = Date.now();
  for (;;) {
    const got = (await readdir(dir)).sort();
    if ((names.every((n) => got.includes(n)) && !got.some((f) => f.endsWith('.crdownload'))) || Date.now() - t0 > timeout) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
}
