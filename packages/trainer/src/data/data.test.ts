import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tokenizer } from '@rusty/loader';
import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../rng';
import { DataLoader } from './dataloader';
import { IGNORE_INDEX, splitDataset } from './dataset';
import { globToRegExp, matchGlob } from './glob';
import { TextDataset } from './text-dataset';
import { tokenizerHash, type TextTokenizer } from './corpus';

/** A character-level tokenizer: BOS 1, EOS 2, char c -> 3 + (code % 61). Counts its encode calls. */
function charTokenizer(): TextTokenizer & { calls: number } {
  const t = {
    calls: 0,
    eosId: 2,
    bosId: 1,
    fingerprint: 'char-v1',
    encode(text: string): number[] {
      t.calls++;
      return [1, ...[...text].map((c) => 3 + (c.codePointAt(0)! % 61))];
    },
  };
  return t;
}

describe('glob', () => {
  const cases: [string, string, boolean][] = [
    ['**/*.ts', 'a.ts', true],
    ['**/*.ts', 'src/x/a.ts', true],
    ['**/*.ts', 'src/a.tsx', false],
    ['*.md', 'README.md', true],
    ['*.md', 'docs/guide.md', true], // no slash: any depth
    ['src/*.ts', 'src/a.ts', true],
    ['src/*.ts', 'src/x/a.ts', false],
    ['src/**', 'src/x/y.txt', true],
    ['src/**/test/*.js', 'src/test/a.js', true],
    ['src/**/test/*.js', 'src/a/b/test/a.js', true],
    ['*.{ts,js}', 'lib/a.js', true],
    ['file?.txt', 'file1.txt', true],
    ['file?.txt', 'file10.txt', false],
    ['[ab]*.txt', 'b1.txt', true],
    ['[!ab]*.txt', 'b1.txt', false],
    ['a.b', 'axb', false], // dots are literal
  ];
  it.each(cases)('%s vs %s -> %s', (pat, path, want) => {
    expect(matchGlob(path, pat)).toBe(want);
  });
  it('compiles to an anchored RegExp', () => {
    expect(globToRegExp('*.md').test('x/y.md')).toBe(true);
  });
});

describe('Rng', () => {
  it('is deterministic, restorable and gives permutations', () => {
    const a = new Rng(7);
    const s = a.state;
    const x = [a.nextU32(), a.nextU32()];
    expect(Rng.fromState(s).nextU32()).toBe(x[0]);
    const p = new Rng(3).permutation(100);
    expect([...p].sort((u, v) => u - v)).toEqual([...Array(100).keys()]);
    expect([...new Rng(3).permutation(100)]).toEqual([...p]);
    expect([...new Rng(4).permutation(100)]).not.toEqual([...p]);
  });
});

describe('TextDataset.fromSequences', () => {
  it('packs documents with separators into full windows; the last is padded with ignored labels', () => {
    const ds = TextDataset.fromSequences([[10, 11, 12], [20, 21], [30, 31, 32, 33]], { seqLen: 4, eosId: 2 });
    // stream: 10 11 12 2 | 20 21 2 30 | 31 32 33 2
    expect(ds.length).toBe(3);
    expect([...ds.get(0).inputIds]).toEqual([10, 11, 12, 2]);
    expect([...ds.get(1).inputIds]).toEqual([20, 21, 2, 30]);
    expect([...ds.get(2).labels]).toEqual([31, 32, 33, 2]);
    const ds2 = TextDataset.fromSequences([[5, 6, 7, 8, 9]], { seqLen: 4, eosId: 2 });
    expect([...ds2.get(1).inputIds]).toEqual([9, 2, 2, 2]);
    expect([...ds2.get(1).labels]).toEqual([9, 2, IGNORE_INDEX, IGNORE_INDEX]);
    expect(ds2.stats).toMatchObject({ documents: 1, tokens: 6, padding: 2 });
    const dropped = TextDataset.fromSequences([[5, 6, 7, 8, 9]], { seqLen: 4, eosId: 2, dropRemainder: true });
    expect(dropped.length).toBe(1);
  });

  it('does not double separators, adds BOS when asked, keeps masked labels', () => {
    const ds = TextDataset.fromSequences([[1, 4, 2], { ids: [5, 6, 7], labels: [IGNORE_INDEX, 6, 7] }], { seqLen: 8, eosId: 2, bosId: 1 });
    expect([...ds.get(0).inputIds]).toEqual([1, 4, 2, 1, 5, 6, 7, 2]);
    expect([...ds.get(0).labels]).toEqual([1, 4, 2, IGNORE_INDEX, IGNORE_INDEX, 6, 7, 2]);
  });

  it('pack: false gives one truncated, padded window per document', () => {
    const ds = TextDataset.fromSequences([[3, 4], [5, 6, 7, 8, 9, 10]], { seqLen: 4, eosId: 2, pack: false, padId: 0 });
    expect(ds.length).toBe(2);
    expect([...ds.get(0).inputIds]).toEqual([3, 4, 2, 0]);
    expect([...ds.get(0).labels]).toEqual([3, 4, 2, IGNORE_INDEX]);
    expect([...ds.get(1).inputIds]).toEqual([5, 6, 7, 8]);
    expect(ds.stats.dropped).toBe(3);
  });

  it('splits deterministically into disjoint train/validation sets', () => {
    const ds = TextDataset.fromSequences([[...Array(100).keys()]], { seqLen: 5 });
    const a = splitDataset(ds, { validationFraction: 0.2, seed: 1 });
    const b = ds.split(0.2, 1);
    expect(a.validation.length).toBe(4);
    expect(a.train.length).toBe(16);
    expect([...a.validation.indices]).toEqual([...b.validation.indices]);
    const all = new Set([...a.train.indices, ...a.validation.indices]);
    expect(all.size).toBe(20);
    expect([...splitDataset(ds, { validationFraction: 0.2, seed: 2 }).validation.indices]).not.toEqual([...a.validation.indices]);
  });
});

describe('corpus datasets', () => {
  const root = mkdtempSync(join(tmpdir(), 'rusty-corpus-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'proj/src/deep'), { recursive: true });
  mkdirSync(join(root, 'proj/node_modules/x'), { recursive: true });
  writeFileSync(join(root, 'proj/README.md'), 'hello');
  writeFileSync(join(root, 'proj/src/a.ts'), 'let a');
  writeFileSync(join(root, 'proj/src/deep/b.ts'), 'let b = 2');
  writeFileSync(join(root, 'proj/src/c.js'), 'nope');
  writeFileSync(join(root, 'proj/node_modules/x/i.ts'), 'skip');
  writeFileSync(join(root, 'sft.jsonl'), '{"prompt":"Q: hi","response":" A: yo"}\n\n{"text":"plain"}\n');

  it('reads folders with include globs, tokenizes once and caches by content + tokenizer', async () => {
    const tok = charTokenizer();
    const cacheDir = join(root, 'cache');
    const ds = await TextDataset.fromCorpus(join(root, 'proj'), { tokenizer: tok, include: ['**/*.ts', '*.md'], seqLen: 8, cacheDir });
    expect(ds.corpus!.files.map((f) => f.slice(root.length + 1))).toEqual(['proj/README.md', 'proj/src/a.ts', 'proj/src/deep/b.ts']);
    expect(ds.corpus!.cacheHit).toBe(false);
    expect(tok.calls).toBe(3);
    // documents: [bos + chars] + eos
    expect(ds.stats.tokens).toBe(6 + 1 + 6 + 1 + 10 + 1);
    expect(ds.get(0).inputIds[0]).toBe(1);
    const again = await TextDataset.fromCorpus(join(root, 'proj'), { tokenizer: tok, include: ['**/*.ts', '*.md'], seqLen: 8, cacheDir });
    expect(again.corpus!.cacheHit).toBe(true);
    expect(tok.calls).toBe(3);
    expect([...again.tokens]).toEqual([...ds.tokens]);
    // another tokenizer: a different cache entry
    const tok2 = { ...charTokenizer(), fingerprint: 'char-v2' };
    const third = await TextDataset.fromCorpus(join(root, 'proj'), { tokenizer: tok2, include: ['**/*.ts', '*.md'], seqLen: 8, cacheDir });
    expect(third.corpus!.cacheHit).toBe(false);
    // changed content: a new cache entry
    writeFileSync(join(root, 'proj/src/a.ts'), 'let a = 1');
    const fourth = await TextDataset.fromCorpus(join(root, 'proj'), { tokenizer: tok, include: ['**/*.ts', '*.md'], seqLen: 8, cacheDir });
    expect(fourth.corpus!.cacheHit).toBe(false);
    expect(fourth.corpus!.contentHash).not.toBe(ds.corpus!.contentHash);
  });

  it('JSONL: prompt tokens are masked out of the loss, text lines are plain documents', async () => {
    const tok = charTokenizer();
    const ds = await TextDataset.fromJsonl(join(root, 'sft.jsonl'), { tokenizer: tok, seqLen: 16, pack: false, cacheDir: false });
    expect(ds.length).toBe(2);
    const ex = ds.get(0);
    const promptLen = 1 + 'Q: hi'.length; // BOS + chars
    expect([...ex.labels.subarray(0, promptLen)].every((l) => l === IGNORE_INDEX)).toBe(true);
    expect([...ex.labels.subarray(promptLen, promptLen + 6)]).toEqual([...ex.inputIds.subarray(promptLen, promptLen + 6)]);
    expect(ex.inputIds[promptLen + 6]).toBe(2); // EOS separator, a target
    expect(ex.labels[promptLen + 6]).toBe(2);
    expect([...ds.get(1).labels].filter((l) => l !== IGNORE_INDEX).length).toBe(1 + 5 + 1 - 0);
  });

  it('names the file and line of bad JSONL', async () => {
    writeFileSync(join(root, 'bad.jsonl'), '{"text":"ok"}\n{"txt":"no"}\n');
    await expect(TextDataset.fromJsonl(join(root, 'bad.jsonl'), { tokenizer: charTokenizer(), seqLen: 4, cacheDir: false })).rejects.toThrow(
      /bad\.jsonl:2: expected a string field 'text'.*'txt'/,
    );
  });

  it('works with the loader Tokenizer (byte-level fixture) and hashes it by its definition', async () => {
    const tok = await Tokenizer.fromFile('/work/shared/fixtures/tokenizers/bytelevel.tokenizer.json');
    const ds = await TextDataset.fromCorpus(join(root, 'proj/README.md'), { tokenizer: tok, seqLen: 4, cacheDir: false });
    const ids = tok.encode('hello');
    expect([...ds.tokens.subarray(0, ids.length)]).toEqual(ids);
    expect(tokenizerHash(tok)).toMatch(/^[0-9a-f]{64}$/);
    expect(tokenizerHash(tok)).not.toBe(tokenizerHash(charTokenizer()));
  });
});

describe('DataLoader', () => {
  const ds = TextDataset.fromSequences([[...Array(40).keys()]], { seqLen: 4 }); // 10 examples

  it('batches rows, handles the last partial batch and dropLast', () => {
    const l = new DataLoader(ds, 4);
    const bs = [...l];
    expect(bs.map((b) => b.batch)).toEqual([4, 4, 2]);
    expect([...bs[0]!.inputIds.subarray(4, 8)]).toEqual([4, 5, 6, 7]);
    expect([...new DataLoader(ds, 4, { dropLast: true })].length).toBe(2);
  });

  it('is deterministic for a seed, reshuffles on reset, and state() restores exactly', async () => {
    const rows = (l: DataLoader, n: number) => Array.from({ length: n }, () => [...l.next().indices]);
    const a = new DataLoader(ds, 3, { shuffle: true, seed: 5 });
    const b = new DataLoader(ds, 3, { shuffle: true, seed: 5 });
    const ra = rows(a, 9);
    expect(rows(b, 9)).toEqual(ra);
    expect(ra.slice(0, 4).flat().sort((x, y) => x - y)).toEqual([...Array(10).keys()]);
    expect(ra.slice(4, 8).flat()).not.toEqual(ra.slice(0, 4).flat()); // epoch 2 is another order
    const c = new DataLoader(ds, 3, { shuffle: true, seed: 5 });
    rows(c, 6);
    const st = c.state();
    expect(st).toMatchObject({ epoch: 1, position: 2 });
    const d = new DataLoader(ds, 3, { shuffle: true, seed: 5 });
    d.setState(structuredClone(st));
    expect(rows(d, 7)).toEqual(rows(c, 7));
    // for..of runs the rest of the epoch; reset() starts the next
    const e = new DataLoader(ds, 3, { shuffle: true, seed: 5 });
    e.next();
    expect([...e].length).toBe(3);
    e.reset();
    expect(e.epoch).toBe(1);
    let n = 0;
    for await (const _ of e) n++;
    expect(n).toBe(4);
  });

  it('prefetches without changing the batches', async () => {
    const a = new DataLoader(ds, 2, { shuffle: true, seed: 1, prefetch: 3 });
    const b = new DataLoader(ds, 2, { shuffle: true, seed: 1, prefetch: 0 });
    for (let i = 0; i < 12; i++) {
      await new Promise((r) => setImmediate(r));
      expect([...a.next().inputIds]).toEqual([...b.next().inputIds]);
    }
  });
});
