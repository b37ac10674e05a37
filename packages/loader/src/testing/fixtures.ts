import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `../shared/fixtures` beside the repository checkout (test-only helper, not exported by the package). */
export const FIXTURES = fileURLToPath(new URL('../../../../../shared/fixtures/', import.meta.url));

/** A fresh temporary directory and a function that deletes it. */
export function tempDir(prefix = 'rusty-loader-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
