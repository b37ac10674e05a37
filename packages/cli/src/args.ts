// A small flag parser: `--name value`, `--name=value`, `--flag` / `--no-flag`, `-x` short names, repeated
// flags, `--` to end options, and an optional `--config file.json` whose keys are the same options. Every value
// is validated by the flag's zod schema; a wrong flag gets one line naming it (exit code 2).
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { UsageError } from './errors';

type Kind = 'string' | 'number' | 'boolean' | 'strings' | 'list';

/** One command-line option. `T` is its value type; `D` whether it always has a value (a default). */
export interface Flag<T = unknown, D extends boolean = boolean> {
  kind: Kind;
  schema: z.ZodType<T>;
  desc: string;
  /** Placeholder in the help (`<dir>`). */
  value?: string;
  short?: string;
  default?: T;
  /** Not allowed in `--config` files (paths of the run itself, `--config`). */
  cliOnly?: boolean;
  readonly _d?: D;
}

interface FlagOpts<T> {
  value?: string;
  short?: string;
  cliOnly?: boolean;
  default?: T;
}

function mk<T>(kind: Kind, schema: z.ZodType<T>, desc: string, o: FlagOpts<T> = {}): Flag<T, false> {
  return { kind, schema, desc, value: o.value, short: o.short, default: o.default, cliOnly: o.cliOnly };
}

/** Flag constructors. `withDefault` marks the value as always present. */
export const flag = {
  str: (desc: string, o: FlagOpts<string> = {}) => mk('string', z.string().min(1, { error: 'must not be empty' }), desc, { value: '<value>', ...o }),
  int: (desc: string, o: FlagOpts<number> & { min?: number; max?: number } = {}) => {
    let s = z.number({ error: 'must be a number' }).int({ error: 'must be an integer' });
    if (o.min !== undefined) s = s.min(o.min, { error: o.min === 1 ? 'must be a positive integer' : `must be >= ${o.min}` });
    if (o.max !== undefined) s = s.max(o.max, { error: `must be <= ${o.max}` });
    return mk('number', s, desc, { value: '<n>', ...o });
  },
  num: (desc: string, o: FlagOpts<number> & { min?: number; max?: number; positive?: boolean; below?: number } = {}) => {
    let s = z.number({ error: 'must be a number' }).refine(Number.isFinite, { error: 'must be a finite number' });
    if (o.positive) s = s.refine((v) => v > 0, { error: 'must be > 0' });
    if (o.min !== undefined) s = s.refine((v) => v >= o.min!, { error: `must be >= ${o.min}` });
    if (o.max !== undefined) s = s.refine((v) => v <= o.max!, { error: `must be <= ${o.max}` });
    if (o.below !== undefined) s = s.refine((v) => v < o.below!, { error: `must be < ${o.below}` });
    return mk('number', s, desc, { value: '<x>', ...o });
  },
  bool: (desc: string, o: FlagOpts<boolean> = {}) => mk('boolean', z.boolean({ error: 'must be true or false' }), desc, o),
  choice: <const C extends readonly [string, ...string[]]>(choices: C, desc: string, o: FlagOpts<C[number]> = {}) =>
    mk('string', z.enum(choices, { error: `must be one of ${choices.join(', ')}` }) as unknown as z.ZodType<C[number]>, desc, {
      value: `<${choices.join('|')}>`,
      ...o,
    }),
  /** Repeatable: `--data a --data b` (a config file gives an array or a string). */
  strs: (desc: string, o: FlagOpts<string[]> = {}) =>
    mk('strings', z.array(z.string().min(1, { error: 'must not be empty' }), { error: 'must be a list of strings' }), desc, { value: '<path>', ...o }),
  /** Comma-separated: `--targets q_proj,v_proj` (a config file gives an array or a comma-separated string). */
  list: (desc: string, o: FlagOpts<string[]> = {}) =>
    mk('list', z.array(z.string().min(1, { error: 'must not have empty items' }), { error: 'must be a list of strings' }).min(1, { error: 'must not be empty' }), desc, {
      value: '<a,b,...>',
      ...o,
    }),
};

/** Give a flag a default (its value is then never undefined). */
export function withDefault<T>(f: Flag<T, boolean>, value: T): Flag<T, true> {
  return { ...f, default: value } as Flag<T, true>;
}

export type Flags = Record<string, Flag<any, boolean>>;

type Camel<S extends string> = S extends `${infer A}-${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;

/** The parsed options of a flag set, by camelCase name. */
export type OptionsOf<F extends Flags> = {
  [K in keyof F as Camel<K & string>]: F[K] extends Flag<infer T, infer D> ? (D extends true ? T : T | undefined) : never;
};

export const camel = (s: string): string => s.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
export const kebab = (s: string): string => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** A command: its flags, positionals, help text and examples. */
export interface CommandSpec<F extends Flags = Flags> {
  name: string;
  summary: string;
  usage: string;
  description?: string;
  flags: F;
  /** Positional arguments: how many are allowed (default none) and how many are required. */
  positionals?: { name: string; min: number; max: number };
  examples: string[];
  /** Flag name (kebab) of a JSON file with more options. */
  configFlag?: string;
}

export interface Parsed<F extends Flags> {
  opts: OptionsOf<F>;
  /** camelCase names given explicitly (on the command line or in the config file). */
  given: Set<string>;
  /** camelCase names given on the command line. */
  onCommandLine: Set<string>;
  positionals: string[];
  help: boolean;
}

function levenshtein(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length]![b.length]!;
}

function suggest(name: string, names: string[]): string {
  let best = '';
  let bestD = Infinity;
  for (const n of names) {
    const dist = levenshtein(name, n);
    if (dist < bestD) [best, bestD] = [n, dist];
  }
  return bestD <= Math.max(2, Math.floor(name.length / 3)) ? `; did you mean '--${best}'?` : '';
}

/** Convert a command-line string to a flag's value type (the schema checks the rest). */
function convert(cmd: string, name: string, f: Flag, raw: string): unknown {
  if (f.kind === 'number') {
    const v = raw.trim() === '' ? NaN : Number(raw);
    if (Number.isNaN(v)) throw new UsageError(`${cmd}: option '--${name}' expects a number, got '${raw}'`);
    return v;
  }
  if (f.kind === 'boolean') {
    if (/^(true|yes|1|on)$/i.test(raw)) return true;
    if (/^(false|no|0|off)$/i.test(raw)) return false;
    throw new UsageError(`${cmd}: option '--${name}' expects true or false, got '${raw}'`);
  }
  if (f.kind === 'list') return raw.split(',').map((s) => s.trim());
  if (f.kind === 'strings') return [raw];
  return raw;
}

/** Normalise a config-file value to the flag's type (lists may be given as comma-separated strings). */
function fromConfig(f: Flag, v: unknown): unknown {
  if ((f.kind === 'list' || f.kind === 'strings') && typeof v === 'string') return f.kind === 'list' ? v.split(',').map((s) => s.trim()) : [v];
  return v;
}

function readConfigFile(cmd: string, path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(`${cmd}: cannot read config file ${path}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${cmd}: config file ${path} is not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new UsageError(`${cmd}: config file ${path} must hold a JSON object of options`);
  return json as Record<string, unknown>;
}

/**
 * Parse `argv` (the words after the command name) against a command's flags. Throws `UsageError` for unknown
 * options, missing or malformed values, values the schemas reject, and wrong positional counts.
 */
export function parseArgs<F extends Flags>(spec: CommandSpec<F>, argv: readonly string[]): Parsed<F> {
  const cmd = spec.name;
  const flags = spec.flags as Flags;
  const names = Object.keys(flags);
  const shorts = new Map(names.filter((n) => flags[n]!.short).map((n) => [flags[n]!.short!, n]));
  const values: Record<string, unknown> = {};
  const source: Record<string, string> = {};
  const positionals: string[] = [];
  let help = false;
  const set = (name: string, f: Flag, v: unknown) => {
    const key = camel(name);
    if (f.kind === 'strings' || f.kind === 'list') {
      const prev = source[key] === 'cli' ? ((values[key] as string[]) ?? []) : [];
      values[key] = [...prev, ...(v as string[])];
    } else values[key] = v;
    source[key] = 'cli';
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a === '--help' || a === '-h') {
      help = true;
      continue;
    }
    let name: string | undefined;
    let inline: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
      inline = eq >= 0 ? a.slice(eq + 1) : undefined;
    } else if (/^-[a-zA-Z]$/.test(a)) {
      name = shorts.get(a.slice(1));
      if (!name) throw new UsageError(`${cmd}: unknown option '${a}' (see rusty ${cmd} --help)`);
    } else if (/^-[a-zA-Z]/.test(a) && !/^-\d/.test(a)) {
      throw new UsageError(`${cmd}: unknown option '${a}' (see rusty ${cmd} --help)`);
    } else {
      positionals.push(a);
      continue;
    }
    let f = flags[name];
    if (!f && name.startsWith('no-') && flags[name.slice(3)]?.kind === 'boolean') {
      if (inline !== undefined) throw new UsageError(`${cmd}: option '--${name}' takes no value`);
      set(name.slice(3), flags[name.slice(3)]!, false);
      continue;
    }
    if (!f) throw new UsageError(`${cmd}: unknown option '--${name}'${suggest(name, names)} (see rusty ${cmd} --help)`);
    if (f.kind === 'boolean' && inline === undefined) {
      set(name, f, true);
      continue;
    }
    let raw = inline;
    if (raw === undefined) {
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('--') && next.length > 2)) throw new UsageError(`${cmd}: option '--${name}' needs a value ${f.value ?? ''}`.trimEnd());
      raw = next;
      i++;
    }
    set(name, f, convert(cmd, name, f, raw));
  }
  const onCommandLine = new Set(Object.keys(values));
  // options from the config file, below those of the command line
  if (spec.configFlag && values[camel(spec.configFlag)] !== undefined) {
    const file = values[camel(spec.configFlag)] as string;
    const json = readConfigFile(cmd, file);
    for (const [k, v] of Object.entries(json)) {
      const name = k.includes('-') || !/[A-Z]/.test(k) ? k.replace(/_/g, '-') : kebab(k);
      const f = flags[name];
      if (!f || f.cliOnly) throw new UsageError(`${cmd}: config file ${file}: unknown option '${k}'${f ? ' (give it on the command line)' : suggest(name, names.filter((n) => !flags[n]!.cliOnly))}`);
      const key = camel(name);
      if (source[key] === 'cli') continue;
      values[key] = fromConfig(f, v);
      source[key] = `config file ${file}`;
    }
  }
  // validate
  for (const [key, v] of Object.entries(values)) {
    const name = kebab(key);
    const f = flags[name]!;
    const r = f.schema.safeParse(v);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      const where = source[key] === 'cli' ? `option '--${name}'` : `${source[key]}: option '${name}'`;
      const item = issue.path.length ? ` (item ${String(issue.path[0])})` : '';
      throw new UsageError(`${cmd}: ${where}${item} ${issue.message}${source[key] === 'cli' ? `, got '${Array.isArray(v) ? v.join(',') : String(v)}'` : ''}`);
    }
    values[key] = r.data;
  }
  const given = new Set(Object.keys(values));
  for (const n of names) {
    const key = camel(n);
    if (values[key] === undefined && flags[n]!.default !== undefined) values[key] = flags[n]!.default;
  }
  const pos = spec.positionals ?? { name: '', min: 0, max: 0 };
  if (!help) {
    if (positionals.length > pos.max)
      throw new UsageError(
        pos.max === 0
          ? `${cmd}: unexpected argument '${positionals[0]}' (see rusty ${cmd} --help)`
          : `${cmd}: too many arguments (expected ${pos.max === 1 ? `one ${pos.name}` : `at most ${pos.max}`}, got ${positionals.length})`,
      );
    if (positionals.length < pos.min) throw new UsageError(`${cmd}: missing ${pos.name} (see rusty ${cmd} --help)`);
  }
  return { opts: values as OptionsOf<F>, given, onCommandLine, positionals, help };
}

function fmtDefault(v: unknown): string {
  if (Array.isArray(v)) return v.join(',');
  return String(v);
}

/** The `--help` text of a command. */
export function helpText(spec: CommandSpec): string {
  const lines = [`rusty ${spec.name} - ${spec.summary}`, '', `Usage: ${spec.usage}`, ''];
  if (spec.description) lines.push(spec.description.trimEnd(), '');
  const rows: [string, string][] = [];
  for (const [name, f] of Object.entries(spec.flags)) {
    const left = `${f.short ? `-${f.short}, ` : '    '}--${name}${f.kind === 'boolean' ? '' : ` ${f.value ?? '<value>'}`}`;
    let desc = f.desc;
    if (f.default !== undefined && f.kind !== 'boolean') desc += ` (default ${fmtDefault(f.default)})`;
    if (f.kind === 'strings') desc += ' (repeatable)';
    rows.push([left, desc]);
  }
  rows.push(['-h, --help', 'show this help'], ['    --debug', 'print stack traces on errors']);
  const w = Math.min(34, Math.max(...rows.map(([l]) => l.length)));
  lines.push('Options:');
  for (const [l, d] of rows) lines.push(l.length > w ? `  ${l}\n  ${' '.repeat(w)}  ${d}` : `  ${l.padEnd(w)}  ${d}`);
  if (spec.configFlag)
    lines.push('', `Options may also come from a JSON file (--${spec.configFlag}) with the same names (\"batch-size\", \"batchSize\" or`, '"batch_size"); flags on the command line win.');
  lines.push('', 'Examples:', ...spec.examples.map((e) => `  ${e}`), '');
  return lines.join('\n');
}
