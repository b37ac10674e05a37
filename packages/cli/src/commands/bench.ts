import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { flag, parseArgs, type CommandSpec } from '../args';
import { EXIT_OK, InputError, UsageError } from '../errors';
import { repoPackagesDir } from '../corpus';

const flags = {
  list: flag.bool('list the benchmark programs found and exit'),
  only: flag.list('run only these programs (names as --list shows them)', { value: '<names>' }),
  quick: flag.bool('pass --quick to the programs (small sizes that finish quickly on a CPU adapter)'),
  out: flag.str('also write the JSON to this file', { short: 'o', value: '<file>' }),
};

export const benchSpec: CommandSpec<typeof flags> = {
  name: 'bench',
  summary: 'run the built benchmark programs and print their results as JSON',
  usage: 'rusty bench [--quick] [--only <names>] [--out <file>] [-- <arguments for the programs>]',
  description: `Runs each benchmark program that the packages' builds produce (dist/*bench*.js of @rusty/backend, @rusty/loader, ...)
one after the other and prints one JSON object: {"<program>": <its JSON output>, ...}. Arguments after -- are passed
to every program. Build them first with pnpm build; RUSTY_BENCH_PATH=dir1:dir2 adds directories to search.`,
  flags,
  positionals: { name: 'arguments', min: 0, max: Infinity },
  examples: ['rusty bench --quick', 'rusty bench --only bench -- --variants=v1,v3 --no-llm', 'rusty bench --out bench.json'],
};

const PACKAGES = ['backend', 'autograd', 'graph', 'loader', 'trainer'];

/** Directories of the @rusty packages' builds (resolved through Node, else the checkout's packages/), after
 *  those of `RUSTY_BENCH_PATH` (colon-separated). */
function distDirs(): string[] {
  const dirs = new Set<string>((process.env.RUSTY_BENCH_PATH ?? '').split(':').filter(Boolean));
  for (const p of PACKAGES) {
    try {
      const url = (import.meta as ImportMeta & { resolve?: (s: string) => string }).resolve?.(`@rusty/${p}`);
      if (url?.startsWith('file:')) {
        const file = fileURLToPath(url);
        if (basename(dirname(file)) === 'dist') dirs.add(dirname(file));
      }
    } catch {
      // not resolvable from here
    }
  }
  const pkgs = repoPackagesDir();
  if (pkgs) for (const p of PACKAGES) dirs.add(join(pkgs, p, 'dist'));
  return [...dirs];
}

/** The built benchmark programs: name -> file. */
export function findBenchPrograms(): Map<string, string> {
  const out = new Map<string, string>();
  for (const d of distDirs()) {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      continue;
    }
    const pkg = basename(dirname(d)) || basename(d);
    for (const n of names.sort())
      if (/bench.*\.m?js$/.test(n)) {
        const name = n.replace(/\.m?js$/, '');
        out.set(out.has(name) ? `${pkg}/${name}` : name, join(d, n));
      }
  }
  return out;
}

function runProgram(file: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolveP, reject) => {
    const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (s: string) => (stdout += s));
    child.on('error', reject);
    child.on('close', (code, signal) => resolveP({ code: code ?? (signal ? 128 : 1), stdout }));
  });
}

/** The JSON a program printed (the whole output, else its last line that parses). */
function parseOutput(stdout: string): unknown {
  try {
    return JSON.parse(stdout);
  } catch {
    const lines = stdout.trim().split('\n').reverse();
    for (const l of lines)
      try {
        return JSON.parse(l);
      } catch {
        // keep looking
      }
  }
  return { output: stdout.trim() };
}

export async function benchCommand(argv: string[]): Promise<number> {
  const { opts: o, positionals } = parseArgs(benchSpec, argv);
  const programs = findBenchPrograms();
  if (o.list) {
    if (!programs.size) process.stdout.write('no benchmark programs are built (pnpm build)\n');
    for (const [n, f] of programs) process.stdout.write(`${n.padEnd(24)} ${f}\n`);
    return EXIT_OK;
  }
  if (!programs.size)
    throw new InputError(`no benchmark programs are built (looked for dist/*bench*.js in ${distDirs().join(', ')}); run pnpm build first`);
  const chosen = o.only ? o.only : [...programs.keys()];
  for (const n of chosen) if (!programs.has(n)) throw new UsageError(`bench: no benchmark program '${n}' (built: ${[...programs.keys()].join(', ')})`);
  const args = [...(o.quick ? ['--quick'] : []), ...positionals];
  const results: Record<string, unknown> = {};
  let failed = 0;
  for (const n of chosen) {
    process.stderr.write(`bench: running ${n} ${args.join(' ')}\n`);
    const r = await runProgram(programs.get(n)!, args);
    results[n] = r.code === 0 ? parseOutput(r.stdout) : { error: `exited with code ${r.code}`, ...((parseOutput(r.stdout) as object) ?? {}) };
    if (r.code !== 0) failed++;
  }
  const json = JSON.stringify(results, null, 2) + '\n';
  process.stdout.write(json);
  if (o.out) await writeFile(o.out, json);
  if (failed) throw new InputError(`bench: ${failed} of ${chosen.length} programs failed (see their entries)`);
  return EXIT_OK;
}
