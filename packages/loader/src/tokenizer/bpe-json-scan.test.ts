import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenizerError } from '../errors';
import { FIXTURES } from '../testing/fixtures';
import { scanBpeJson } from './bpe-json-scan';
import { Tokenizer } from './index';

/** What loading `text` gives: ids of some texts, the vocabulary both ways, or the error. */
function outcome(load: () => Tokenizer, texts: string[]): unknown {
  let tok: Tokenizer;
  try {
    tok = load();
  } catch (e) {
    expect(e).toBeInstanceOf(TokenizerError);
    return { error: (e as Error).message };
  }
  const vocab: Record<string, number | undefined> = {};
  for (let id = 0; id < tok.vocabSize + 2; id++) {
    const t = tok.idToToken(id);
    vocab[`${id}`] = t === undefined ? undefined : tok.tokenToId(t);
    vocab[`#${id}`] = t as unknown as number;
  }
  return { size: tok.vocabSize, vocab, ids: texts.map((s) => tok.encode(s)), json: tok.toJSON() };
}

/** The text loads as its parsed object does (the general path); returns whether the scan took it. */
function sameAsParsed(text: string, texts: string[]): boolean {
  const viaText = outcome(() => Tokenizer.fromJSON(text), texts);
  const viaObject = outcome(() => Tokenizer.fromJSON(JSON.parse(text)), texts);
  expect(viaText).toEqual(viaObject);
  return scanBpeJson(text) !== null;
}

const model = (vocab: string, merges: string, extra = '') => `{"added_tokens":[],"model":{"type":"BPE"${extra},"vocab":${vocab},"merges":${merges}}}`;

describe('scanning vocab and merges from the text of a tokenizer.json', () => {
  it('loads the fixture tokenizers, compact or pretty-printed, exactly as their parsed objects', () => {
    for (const name of ['bytelevel', 'metaspace']) {
      const text = readFileSync(join(FIXTURES, 'tokenizers', `${name}.tokenizer.json`), 'utf8');
      const texts = ['Hello, world! <s> naïve café 日本語 🚀', ' leading  spaces\n\ttabs'];
      expect(sameAsParsed(text, texts)).toBe(true);
      expect(sameAsParsed(JSON.stringify(JSON.parse(text)), texts)).toBe(true);
      expect(sameAsParsed(JSON.stringify(JSON.parse(text), null, 1), texts)).toBe(true);
    }
  });

  it('decodes escaped tokens and merges in both forms', () => {
    const vocab = '{"a": 0, "\\"": 1, "b": 2, "\\u0041": 3, "c": 4, "\\"b": 5, "a\\"b": 6, "a\\"bc": 7, "Ac": 8, "\\ud83d\\ude80": 9, "\\u00e9": 10, "\\ud83d\\ude80\\u00e9": 11}';
    const texts = ['a"bc', 'Ac', 'a"bAc', '🚀é', 'zz'];
    for (const merges of [
      '["\\" b", "a \\"b", "a\\"b c", "A c", "\\ud83d\\ude80 \\u00e9"]',
      '[["\\"", "b"], ["a", "\\"b"], ["a\\"b", "c"], ["\\u0041", "c"], ["\\ud83d\\ude80", "é"]]',
    ]) {
      expect(sameAsParsed(model(vocab, merges), texts)).toBe(true);
      const tok = Tokenizer.fromJSON(model(vocab, merges));
      expect(texts.map((t) => tok.encode(t))).toEqual([[7], [8], [6, 8], [11], []]);
    }
  });

  it('finds merged tokens whatever their ids, and a repeated vocab key keeps its last id as JSON.parse does', () => {
    // merged ids out of order (the in-place guess fails), and 'a' given twice
    const text = model('{"a": 0, "b": 1, "ba": 9, "ab": 2, "a": 5, "bab": 7}', '[["a", "b"], ["b", "a"], ["b", "ab"]]');
    expect(sameAsParsed(text, ['ab', 'ba', 'bab', 'aab'])).toBe(true);
    const tok = Tokenizer.fromJSON(text);
    expect([tok.tokenToId('a'), tok.idToToken(0), tok.idToToken(5)]).toEqual([5, undefined, 'a']);
    expect(tok.encode('bab')).toEqual([7]);
    // the id after the previous merge's token holds a token that starts like this merge's but is longer
    const text2 = model('{"a": 0, "b": 1, "ab": 2, "abcd": 3, "c": 4, "abc": 5, "d": 6}', '[["a", "b"], ["ab", "c"], ["abc", "d"]]');
    expect(sameAsParsed(text2, ['abc', 'abcd'])).toBe(true);
    expect(['abc', 'abcd'].map((t) => Tokenizer.fromJSON(text2).encode(t))).toEqual([[5], [3]]);
  });

  it('leaves anything unusual to JSON.parse and the general path, with the same results and errors', () => {
    const texts = ['ab', 'ba'];
    const cases: [string, boolean][] = [
      // ids JSON.parse accepts but the scan does not take
      [model('{"a": 0, "b": 1.0, "ab": 2e0}', '[["a", "b"]]'), false],
      // bad ids, tokens and merges: the general path's errors
      [model('{"a": -1, "b": 1, "ab": 2}', '[]'), false],
      [model('{"a": 0, "b": 1, "ab": 99999999999}', '[]'), false],
      [model('{"a": 0, "b": 1}', '[["a", "z"]]'), false],
      [model('{"a": 0, "b": 1}', '[["a", "b"]]'), true],
      [model('{"a": 0, "b": 1, "ab": 2}', '["a b c"]'), false],
      [model('{"a": 0, "b": 1, "ab": 2}', '[["a", "b", "c"]]'), false],
      [model('{"a": 0, "b": 1, "ab": 2}', '[["a", "b"]]', ',"continuing_subword_prefix":"##"'), true],
      // merges before the vocab, a repeated key, no merges, not BPE
      ['{"model":{"type":"BPE","merges":[["a","b"]],"vocab":{"a":0,"b":1,"ab":2}}}', false],
      ['{"model":{"vocab":{"a":0},"merges":[],"vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}}', false],
      ['{"model":{"type":"WordPiece","vocab":{"a":0,"b":1}}}', false],
    ];
    for (const [text, scanned] of cases) expect(sameAsParsed(text, texts), text).toBe(scanned);
    expect(() => Tokenizer.fromJSON(model('{"a": 0, "b": 1}', '[["a", "b"]]'))).toThrow(/merges\[0\] makes 'ab', which is not in the vocab/);
  });

  it('rejects text that is not JSON, even inside the vocab', () => {
    for (const bad of [
      model('{"a": 0, "b": 1,}', '[]'),
      model('{"a\n": 0}', '[]'),
      model('{"a": 0 "b": 1}', '[]'),
      model('{"a": 0}', '[["a", "a"],]'),
      model('{"a": 0}', '[]').slice(0, -1),
      model('{"a": 0}', '[]') + 'x',
      model('{"\\x": 0}', '[]'),
    ]) {
      expect(scanBpeJson(bad), bad).toBeNull();
      expect(() => Tokenizer.fromJSON(bad), bad).toThrow(/not valid JSON/);
    }
  });
});
