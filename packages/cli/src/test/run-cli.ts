// Running the BUILT command (`node packages/cli/dist/bin.js`) as a subprocess, the way a user runs it: shared by
// the end-to-end tests. The CLI is built first when its dist/ (or a dependency's) is missing or older than the
// sources, so plain `pnpm test` / `npx vitest run` works; RUSTY_E2E_BUILD=0 skips that check.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

export const CLI_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ROOT = resolve(CLI_DIR, '..', '..');
export const BIN = join(CLI_DIR, 'dist', 'bin.js');
const DEPS = ['backend', 'autograd', 'graph', 'loader', 'trainer'];

function newest(dir: string, skip: RegExp = /\.test\.ts$/): number {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, skip));
    else if (!skip.test(e.name)) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

const mtime = (f: string): number => (existsSync(f) ? statSync(f).mtimeMs : 0);

/** Build the CLI (and its dependencies when theirs are stale), as `pnpm test` would need. */
export function ensureBuilt(): void {
  if (process.env.RUSTY_E2E_BUILD === '0') return;
  const depsStale = DEPS.some((p) => {
    const src = Math.max(newest(join(ROOT, 'packages', p, 'src')), p === 'backend' ? newest(join(ROOT, 'shaders')) : 0);
    return mtime(join(ROOT, 'packages', p, 'dist', 'index.js')) < src;
  });
  const cliStale = mtime(BIN) < newest(join(CLI_DIR, 'src'));
  if (!depsStale && !cliStale) return;
  const filter = depsStale ? '@rusty/cli...' : '@rusty/cli';
  const r = spawnSync('pnpm', ['--filter', filter, 'run', 'build'], { cwd: ROOT, encoding: 'utf8', env: process.env });
  if (r.status !== 0) throw new Error(`building ${filter} failed:\n${r.stdout}\n${r.stderr}`);
}

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stderr lines without the graphics driver's own notices (see `driverNoise`). */
  err: string[];
}

/**
 * Lines the graphics stack prints on its own: Mesa's (lavapipe prints one on some starts) and Dawn's adapter-limit
 * notices, which createContext keeps off a terminal or a pipe but cannot keep off the socket Node's `spawn` gives a
 * child as its stderr (see the Dawn test, which runs the CLI behind a real pipe).
 */
const driverNoise = (l: string): boolean => /^MESA|^WARNING: lavapipe/i.test(l) || /^Warning: maxDynamic\w+ artificially reduced/.test(l);

/** A CLI runner with its working directory and environment. */
export function cliRunner(o: { cwd: () => string; env: () => NodeJS.ProcessEnv }) {
  /** Run `rusty ...args`; `onStderr` sees stderr as it comes (with the child, to signal it). */
  function rusty(args: string[], onStderr?: (text: string, child: ReturnType<typeof spawn>) => void, cwd = o.cwd()): Promise<Run> {
    return new Promise((res, rej) => {
      const child = spawn(process.execPath, [BIN, ...args], { cwd, env: o.env(), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
      child.stderr!.setEncoding('utf8').on('data', (s: string) => {
        stderr += s;
        onStderr?.(stderr, child);
      });
      child.on('error', rej);
      child.on('close', (code, signal) =>
        res({ code, signal, stdout, stderr, err: stderr.split('\n').filter((l) => l.trim() && !driverNoise(l)) }),
      );
    });
  }

  /** A user error: one line `rusty: ...` on stderr (matching `re`), no stack trace, the exit code given. */
  async function expectOneLineError(args: string[], re: RegExp, code = 1, cwd?: string): Promise<string> {
    const r = await rusty(args, undefined, cwd);
    expect(r.err, `rusty ${args.join(' ')}\nstderr:\n${r.stderr}`).toHaveLength(1);
    expect(r.err[0]).toMatch(/^rusty: /);
    expect(r.err[0]).toMatch(re);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(code);
    return r.err[0]!;
  }

  return { rusty, expectOneLineError };
}
