import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { flag, helpText, parseArgs, withDefault, type CommandSpec } from './args';
import { UsageError } from './errors';

const flags = {
  steps: withDefault(flag.int('steps', { min: 1 }), 10),
  lr: flag.num('learning rate', { positive: true }),
  out: withDefault(flag.str('output', { short: 'o' }), 'out'),
  merge: flag.bool('merge'),
  'tie-embeddings': withDefault(flag.bool('tie'), true),
  data: flag.strs('data', { short: 'd' }),
  targets: withDefault(flag.list('targets'), ['q_proj', 'v_proj']),
  precision: withDefault(flag.choice(['no', 'f16', 'bf16'], 'precision'), 'no'),
  config: flag.str('config file', { cliOnly: true }),
};
const spec: CommandSpec<typeof flags> = {
  name: 'demo-cmd',
  summary: 'a test command',
  usage: 'rusty demo-cmd [options]',
  flags,
  configFlag: 'config',
  positionals: { name: 'file', min: 0, max: 1 },
  examples: ['rusty demo-cmd --steps 3'],
};

const parse = (argv: string[]) => parseArgs(spec, argv);
const usage = (argv: string[]) => {
  try {
    parse(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a UsageError');
};

describe('parseArgs', () => {
  it('parses every flag form and applies defaults', () => {
    const p = parse(['--steps=5', '--lr', '3e-4', '-o', 'dir', '--merge', '--no-tie-embeddings', '-d', 'a', '--data', 'b', '--targets', 'q,k', 'file.txt']);
    expect(p.opts).toEqual({ steps: 5, lr: 3e-4, out: 'dir', merge: true, tieEmbeddings: false, data: ['a', 'b'], targets: ['q', 'k'], precision: 'no' });
    expect(p.positionals).toEqual(['file.txt']);
    expect([...p.given].sort()).toEqual(['data', 'lr', 'merge', 'out', 'steps', 'targets', 'tieEmbeddings']);
    expect(parse([]).opts).toMatchObject({ steps: 10, out: 'out', tieEmbeddings: true, targets: ['q_proj', 'v_proj'] });
    expect(parse(['--merge=false']).opts.merge).toBe(false);
  });

  it('rejects unknown flags, missing and malformed values with messages naming the flag', () => {
    expect(usage(['--bogus'])).toBe("demo-cmd: unknown option '--bogus' (see rusty demo-cmd --help)");
    expect(usage(['--step', '3'])).toMatch(/unknown option '--step'; did you mean '--steps'\?/);
    expect(usage(['-x'])).toMatch(/unknown option '-x'/);
    expect(usage(['--steps'])).toMatch(/option '--steps' needs a value/);
    expect(usage(['--steps', '--merge'])).toMatch(/option '--steps' needs a value/);
    expect(usage(['--steps', 'ten'])).toMatch(/option '--steps' expects a number, got 'ten'/);
    expect(usage(['--steps', '2.5'])).toMatch(/option '--steps' must be an integer, got '2.5'/);
    expect(usage(['--steps', '0'])).toMatch(/option '--steps' must be a positive integer, got '0'/);
    expect(usage(['--lr', '0'])).toMatch(/option '--lr' must be > 0/);
    expect(usage(['--lr', '-1e-3'])).toMatch(/option '--lr' must be > 0, got '-0.001'/); // a negative number is a value
    expect(usage(['--precision', 'fp8'])).toMatch(/option '--precision' must be one of no, f16, bf16, got 'fp8'/);
    expect(usage(['--merge=maybe'])).toMatch(/expects true or false/);
    expect(usage(['--no-merge=1'])).toMatch(/takes no value/);
    expect(usage(['a', 'b'])).toMatch(/too many arguments/);
  });

  it('reads options from a JSON config file in any naming style, below the command line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rusty-args-'));
    const cfg = join(dir, 'cfg.json');
    writeFileSync(cfg, JSON.stringify({ steps: 7, lr: 0.01, tie_embeddings: false, targets: 'a,b', precision: 'bf16', data: 'x.jsonl' }));
    const p = parse(['--config', cfg, '--steps', '3']);
    expect(p.opts).toMatchObject({ steps: 3, lr: 0.01, tieEmbeddings: false, targets: ['a', 'b'], precision: 'bf16', data: ['x.jsonl'] });
    writeFileSync(cfg, JSON.stringify({ batchSize: 2 }));
    expect(usage(['--config', cfg])).toMatch(/config file .*cfg.json: unknown option 'batchSize'/);
    writeFileSync(cfg, JSON.stringify({ steps: 'many' }));
    expect(usage(['--config', cfg])).toMatch(/config file .*cfg.json: option 'steps' must be a number/);
    writeFileSync(cfg, JSON.stringify({ config: 'other.json' }));
    expect(usage(['--config', cfg])).toMatch(/unknown option 'config' \(give it on the command line\)/);
    writeFileSync(cfg, '{ not json');
    expect(usage(['--config', cfg])).toMatch(/is not valid JSON/);
    expect(usage(['--config', join(dir, 'missing.json')])).toMatch(/cannot read config file .*missing.json: no such file/);
  });

  it('help lists every flag with its default and the examples', () => {
    const h = helpText(spec);
    expect(h).toContain('Usage: rusty demo-cmd [options]');
    expect(h).toMatch(/--steps <n> +steps \(default 10\)/);
    expect(h).toMatch(/-o, --out <value> +output \(default out\)/);
    expect(h).toMatch(/-d, --data <path> +data \(repeatable\)/);
    expect(h).toContain('--precision <no|f16|bf16>');
    expect(h).toContain('Examples:\n  rusty demo-cmd --steps 3');
  });
});
