// Temporary directories for one test file (vitest only: the crash-test child does not load this).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** `tmp(name)` makes a fresh directory `<prefix>-<name>-XXXXXX`; all of them are removed after the file's tests. */
export function tempDirs(prefix = 'rusty-trainer'): (name: string) => string {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  return (name) => {
    const d = mkdtempSync(join(tmpdir(), `${prefix}-${name}-`));
    dirs.push(d);
    return d;
  };
}
