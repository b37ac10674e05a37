// A training process is killed with SIGKILL in the middle of writing a checkpoint: the latest complete
// checkpoint loads, and resuming from it loses nothing but the unsaved step (bit-identical losses). The training
// runs in child processes: the bundle of test/crash-child.ts, built here with esbuild and run with node.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findLatestCheckpoint, loadCheckpoint } from './checkpoint/checkpoint';

const here = dirname(fileURLToPath(import.meta.url));
const outDir = join(here, '..', 'node_modules', '.cache', 'rusty-trainer-test');
const child = join(outDir, 'crash-child.mjs');
const dirs: string[] = [];
const tmp = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), `rusty-${p}-`));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

beforeAll(async () => {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [join(here, 'test', 'crash-child.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: child,
    plugins: [
      {
        // Dawn stays outside the bundle, imported by absolute path from where @rusty/backend finds it
        name: 'webgpu-external',
        setup(b) {
          const backend = realpathSync(join(here, '..', 'node_modules', '@rusty', 'backend'));
          const webgpu = createRequire(join(backend, 'package.json')).resolve('webgpu');
          b.onResolve({ filter: /^webgpu$/ }, () => ({ path: webgpu, external: true }));
        },
      },
    ],
    conditions: ['source'],
    loader: { '.wgsl': 'text' },
    logLevel: 'error',
  });
});

type Line = { step?: number; loss?: number; committed?: number; writing?: number; phase?: string; done?: number; resumedFrom?: number | null };

/** Run the child; `onLine` may kill it. Resolves with its lines and exit signal. */
function runChild(args: string[], onLine: (l: Line, kill: () => void) => void = () => undefined): Promise<{ lines: Line[]; signal: string | null; code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUSTY_SAFE: '1' } });
    const lines: Line[] = [];
    let stderr = '';
    p.stderr.on('data', (d) => (stderr += d));
    createInterface({ input: p.stdout }).on('line', (s) => {
      const l = JSON.parse(s) as Line;
      lines.push(l);
      onLine(l, () => p.kill('SIGKILL'));
    });
    p.on('error', reject);
    p.on('close', (code, signal) => resolve({ lines, signal, code, stderr }));
  });
}

describe('crash safety', () => {
  it('SIGKILL while a checkpoint is being written: the latest complete one loads and resume loses only the unsaved step', async () => {
    const dir = tmp('crash');
    // the uninterrupted reference runs in a process of its own too (the same bundle: the same code)
    const [full, crashed] = await Promise.all([
      runChild([tmp('crash-ref'), '8', '-1']),
      runChild([dir, '8', '5'], (l, kill) => {
        if (l.writing === 5) kill();
      }),
    ]);
    expect(full.code, full.stderr).toBe(0);
    const ref = full.lines.filter((l) => l.step !== undefined).map((l) => l.loss!);
    expect(ref.length).toBe(8);
    expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
    const committed = crashed.lines.filter((l) => l.committed !== undefined).map((l) => l.committed);
    expect(committed).toEqual([1, 2, 3, 4]);
    expect(crashed.lines.some((l) => l.done !== undefined)).toBe(false);
    // the half-written checkpoint 5 is a temporary directory; the newest complete checkpoint is 4
    expect(readdirSync(dir).some((n) => n.startsWith('.tmp-checkpoint-5'))).toBe(true);
    expect(await findLatestCheckpoint(dir)).toBe(join(dir, 'checkpoint-4'));
    const ck = await loadCheckpoint(dir);
    expect(ck.step).toBe(4);
    expect(ck.dataLoader!.position).toBe(8); // 4 steps x 2 micro-batches
    expect(ck.optimizer!.steps).toBe(4);
    // resume in a new process: steps 5..8 are redone and match the uninterrupted run bit for bit
    const resumed = await runChild([dir, '8', '-1', 'resume']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.lines.at(-1)).toEqual({ done: 8, resumedFrom: 4 });
    const lossOf = (ls: Line[]) => ls.filter((l) => l.step !== undefined).map((l) => [l.step, l.loss]);
    expect(lossOf(crashed.lines)).toEqual(ref.slice(0, 5).map((l, i) => [i + 1, l]));
    expect(lossOf(resumed.lines)).toEqual(ref.slice(4).map((l, i) => [i + 5, l]));
    // the leftover of the crash is gone, and only the last 2 checkpoints are kept
    expect(readdirSync(dir).filter((n) => n.startsWith('.tmp-')).length).toBe(0);
    expect(readdirSync(dir).filter((n) => n.startsWith('checkpoint-')).sort()).toEqual(['checkpoint-7', 'checkpoint-8']);
  }, 300_000);
});

describe('crash safety at the commit point', () => {
  it('killed after the rename but before `latest` switched: the previous checkpoint is the latest', async () => {
    const dir = tmp('crash2');
    const r = await runChild([dir, '5', '3', 'fresh', 'renamed'], (l, kill) => {
      if (l.writing === 3) kill();
    });
    expect(r.signal, r.stderr).toBe('SIGKILL');
    expect(r.lines.filter((l) => l.committed !== undefined).map((l) => l.committed)).toEqual([1, 2]);
    expect(readdirSync(dir)).toContain('checkpoint-3'); // complete, but never committed
    expect((await loadCheckpoint(dir)).step).toBe(2);
  }, 300_000);
});
