// The embedded default corpus: what `rusty train` learns from when no data is given, with no network. First
// choice: this repository's own TypeScript sources (a small code-completion model, trained on the code that
// trains it). Where they are not next to the CLI (an installed package), a corpus of TypeScript-like code
// generated here, deterministically. (`rusty demo` has a fixed corpus of its own: demo-corpus.ts.)
import { readdirSync, statSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A corpus to train on: files/directories and the globs that select files inside directories. */
export interface CorpusSource {
  /** Human-readable description (printed by the commands). */
  name: string;
  paths: string[];
  include?: string[];
  exclude?: string[];
}

/** The `packages/` directory of a checkout when the CLI runs from one (dist/ or src/ of packages/cli). */
export function repoPackagesDir(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidate = resolve(here, '..', '..');
  try {
    if (statSync(join(candidate, 'cli')).isDirectory() && statSync(join(candidate, 'backend', 'src')).isDirectory()) return candidate;
  } catch {
    // not a checkout
  }
  return null;
}

/** This repository's TypeScript sources (tests and declarations left out), if the CLI runs from a checkout. */
export function repoSourceCorpus(): CorpusSource | null {
  const pkgs = repoPackagesDir();
  if (!pkgs) return null;
  const dirs = readdirSync(pkgs)
    .sort()
    .map((p) => join(pkgs, p, 'src'))
    .filter((d) => {
      try {
        return statSync(d).isDirectory();
      } catch {
        return false;
      }
    });
  if (!dirs.length) return null;
  return {
    name: `the TypeScript sources of this repository (${dirs.length} packages under ${pkgs})`,
    paths: dirs,
    include: ['**/*.ts'],
    exclude: ['**/*.test.ts', '**/*.d.ts', 'scratch/**'],
  };
}

/** A deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const VERBS = ['get', 'set', 'read', 'write', 'load', 'save', 'make', 'build', 'parse', 'check', 'find', 'count', 'scale', 'merge', 'split', 'apply', 'update', 'reset'];
const NOUNS = ['tensor', 'buffer', 'shape', 'kernel', 'model', 'layer', 'weight', 'token', 'batch', 'step', 'loss', 'grad', 'config', 'cache', 'file', 'value', 'index', 'size'];
const TYPES = ['number', 'string', 'boolean', 'number[]', 'Float32Array', 'Tensor', 'Shape'];

/**
 * TypeScript-like source text: small functions and interfaces with consistent naming and structure, a stand-in
 * for real code when no sources are available. About `bytes` bytes, the same for the same seed.
 */
export function syntheticCode(bytes = 300_000, seed = 1): string {
  const r = rng(seed);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(r() * a.length)]!;
  const cap = (s: string) => s[0]!.toUpperCase() + s.slice(1);
  const parts: string[] = [];
  let total = 0;
  while (total < bytes) {
    const noun = pick(NOUNS);
    const verb = pick(VERBS);
    const name = `${verb}${cap(noun)}`;
    let s: string;
    const kind = r();
    if (kind < 0.2) {
      const fields = Array.from({ length: 2 + Math.floor(r() * 4) }, () => `  ${pick(NOUNS)}${r() < 0.3 ? '?' : ''}: ${pick(TYPES)};`);
      s = `/** The ${noun} options. */\nexport interface ${cap(noun)}Options {\n${[...new Set(fields)].join('\n')}\n}\n`;
    } else if (kind < 0.6) {
      const a = pick(NOUNS);
      const b = pick(NOUNS.filter((n) => n !== a));
      s =
        `/** ${cap(verb)} the ${noun} of a ${a}. */\nexport function ${name}(${a}: number, ${b}: number): number {\n` +
        `  if (${a} < 0) throw new Error(\`${a} must be >= 0, got \${${a}}\`);\n` +
        `  const ${noun} = ${a} ${pick(['+', '*', '-'])} ${b};\n  return ${noun};\n}\n`;
    } else if (kind < 0.8) {
      const n = pick(NOUNS);
      s =
        `export function ${name}(${n}s: number[]): number {\n  let total = 0;\n  for (let i = 0; i < ${n}s.length; i++) {\n` +
        `    total += ${n}s[i]!${r() < 0.5 ? ' * 2' : ''};\n  }\n  return total;\n}\n`;
    } else {
      const n = pick(NOUNS);
      s =
        `export class ${cap(noun)}${cap(n)} {\n  private ${n} = 0;\n\n  ${verb}(value: number): void {\n    this.${n} = value;\n  }\n\n` +
        `  get ${noun}(): number {\n    return this.${n};\n  }\n}\n`;
    }
    parts.push(s);
    total += s.length + 1;
  }
  return parts.join('\n');
}

/** The generated code corpus written to `dir/synthetic-code.ts.txt` (so the corpus pipeline and cache see a file). */
export async function syntheticCorpus(dir: string, bytes?: number): Promise<CorpusSource> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'synthetic-code.txt');
  await writeFile(file, syntheticCode(bytes));
  return { name: `generated TypeScript-like code (${file})`, paths: [file] };
}

/** The default corpus: this repository's sources, else generated code (written under `dataDir`). */
export async function defaultCorpus(dataDir: string): Promise<CorpusSource> {
  return repoSourceCorpus() ?? (await syntheticCorpus(dataDir));
}
