import { describe, expect, it } from 'vitest';
import { AddedVocabulary } from './added-tokens';
import { Tokenizer } from './index';

interface Opts {
  special?: boolean;
  single_word?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
  normalized?: boolean;
}

/** An added token as tokenizer.json writes it; like the reference's `AddedToken::from(content, special)`,
 *  `normalized` defaults to `!special`. */
function added(id: number, content: string, o: Opts = {}) {
  const special = o.special ?? false;
  return { id, content, special, single_word: o.single_word ?? false, lstrip: o.lstrip ?? false, rstrip: o.rstrip ?? false, normalized: o.normalized ?? !special };
}

const lowercase = (s: string) => s.toLowerCase();

/** The splits of `text` as [text, id or null], like the reference's tests print them. */
function splits(vocab: AddedVocabulary, text: string, normalizer: ((s: string) => string) | null = lowercase): [string, number | null][] {
  return vocab.extract(text, normalizer).map((seg) => ('id' in seg ? [seg.text, seg.id] : [seg.s, null]));
}

/** An AddedVocabulary over an empty model, so ids count from 0 in the order given. */
function vocabulary(list: ReturnType<typeof added>[], normalizer: ((s: string) => string) | null = lowercase): AddedVocabulary {
  return new AddedVocabulary(list, () => undefined, 0, normalizer);
}

describe('added tokens are split out as Hugging Face tokenizers does', () => {
  // The first four cases restate the reference's own tests of its AddedVocabulary (added_vocabulary.rs).
  it('honours lstrip, rstrip, single_word and normalized (the normalized text is lowercased)', () => {
    const v = vocabulary([
      added(0, 'my', { lstrip: true, rstrip: true }),
      added(1, 'name'),
      added(2, 'ony', { single_word: true }),
      added(3, '[CLS]', { special: true }),
      added(4, '[SEP]', { special: true }),
    ]);
    expect(splits(v, '[CLS] My name is Anthony [SEP]')).toEqual([
      ['[CLS]', 3],
      [' my ', 0],
      ['name', 1],
      [' is anthony ', null],
      ['[SEP]', 4],
    ]);
  });

  it('matches a single_word token only between non-word characters', () => {
    const v = vocabulary([added(0, '<mask>', { single_word: true })]);
    expect(splits(v, '<mask> My name <mask> A<mask> <mask>ony <mask>')).toEqual([
      ['<mask>', 0],
      [' my name ', null],
      ['<mask>', 0],
      [' a<mask> <mask>ony ', null],
      ['<mask>', 0],
    ]);
    // punctuation is not a word character, a combining mark (U+0330 after U+25CC) is, and so is an astral letter
    expect(splits(v, '<mask>, <mask>- \u25cc\u0330<mask>')).toEqual([
      ['<mask>', 0],
      [', ', null],
      ['<mask>', 0],
      ['- \u25cc\u0330<mask>', null],
    ]);
    expect(splits(v, '\u{1d400}<mask> _<mask> <mask>\u{1d400}')).toEqual([['\u{1d400}<mask> _<mask> <mask>\u{1d400}', null]]);
  });

  it('strips Unicode whitespace, but never into the previous match', () => {
    const v = vocabulary([added(0, '<mask>', { lstrip: true, rstrip: true, single_word: true })]);
    expect(splits(v, 'Hi <mask> there\t<mask>\t<mask>\u2000')).toEqual([
      ['hi', null],
      [' <mask> ', 0],
      ['there', null],
      ['\t<mask>\t', 0],
      ['<mask>\u2000', 0],
    ]);
  });

  it('extracts special and normal tokens alike', () => {
    const v = vocabulary([added(0, 'my'), added(1, 'name'), added(2, '[CLS]', { special: true }), added(3, '[SEP]', { special: true })], null);
    expect(splits(v, '[CLS] My name is Anthony [SEP]', null)).toEqual([
      ['[CLS]', 2],
      [' My ', null],
      ['name', 1],
      [' is Anthony ', null],
      ['[SEP]', 3],
    ]);
  });

  it('takes the longest token at the leftmost position where one starts', () => {
    const v = vocabulary([added(0, '<a>'), added(1, '<a><b>'), added(2, '<a><b'), added(3, 'b>c'), added(4, 'ab'), added(5, 'bcdef')], null);
    // '<a><b>' over its prefixes '<a>' and '<a><b'; where '>' does not follow, '<a><b'
    expect(splits(v, '<a><b>x<a><bc<a>', null)).toEqual([
      ['<a><b>', 1],
      ['x', null],
      ['<a><b', 2],
      ['c', null],
      ['<a>', 0],
    ]);
    // leftmost before longest: 'ab' starts first, so the longer 'bcdef' is not found
    expect(splits(v, 'abcdef', null)).toEqual([
      ['ab', 4],
      ['cdef', null],
    ]);
  });

  it('goes on after a match that single_word rejects, not inside it', () => {
    const v = vocabulary([added(0, 'aa', { single_word: true }), added(1, 'a')], null);
    // 'aa' is found at 1 and rejected ('x' is a word character); the search resumes at 3, so no 'a' is taken
    expect(splits(v, 'xaab', null)).toEqual([['xaab', null]]);
    expect(splits(v, 'xaa a', null)).toEqual([
      ['xaa ', null],
      ['a', 1],
    ]);
  });

  it('matches non-normalized tokens in the raw text first, then normalized ones in the normalized rest', () => {
    const v = vocabulary([added(0, 'AB', { normalized: false }), added(1, 'ab')]);
    expect(splits(v, 'xAB aB Ab')).toEqual([
      ['x', null],
      ['AB', 0],
      [' ', null],
      ['ab', 1],
      [' ', null],
      ['ab', 1],
    ]);
  });

  it('prefers a special token over a normal one with the same normalized text, whatever their order', () => {
    // the reference searches its special tokens before the others
    for (const list of [
      [added(0, 'Hello'), added(1, 'HELLO', { special: true, normalized: true })],
      [added(1, 'HELLO', { special: true, normalized: true }), added(0, 'Hello')],
    ]) {
      const v = new AddedVocabulary(list, () => undefined, 5, lowercase);
      expect(splits(v, 'say hello')).toEqual([
        ['say ', null],
        ['hello', v.tokenToId('HELLO')!],
      ]);
    }
  });

  it('lets a repeated token replace the earlier entry, keeping its id', () => {
    const v = vocabulary([added(0, '<a>'), added(1, '<b>'), added(5, '<a>', { special: true })], null);
    expect(v.tokens.map((t) => [t.content, t.id, t.special])).toEqual([
      ['<b>', 1, false],
      ['<a>', 0, true],
    ]);
    expect(splits(v, 'x<a>', null)).toEqual([
      ['x', null],
      ['<a>', 0],
    ]);
  });

  it('assigns ids as the reference does and keeps a token of the model vocabulary at its id', () => {
    const model = new Map([['x', 0], ['y', 1]]);
    const v = new AddedVocabulary([added(7, '<a>'), added(1, 'y'), added(9, '<b>')], (s) => model.get(s), 2, null);
    expect(['<a>', 'y', '<b>'].map((s) => v.tokenToId(s))).toEqual([2, 1, 3]);
  });
});

describe('added tokens through a Tokenizer', () => {
  const vocab: Record<string, number> = {};
  for (const c of ' abcdefghijklmnopqrstuvwxyz<>/') vocab[c] = Object.keys(vocab).length;
  const json = {
    added_tokens: [
      added(30, '<s>', { special: true }),
      added(31, '<start>', { special: true }),
      added(32, '<st', {}),
      added(33, ' bold', { lstrip: true, normalized: false }),
    ],
    model: { type: 'BPE', vocab, merges: [] },
  };

  it('splits overlapping and prefix tokens, special or not, and decodes or skips them', () => {
    const tok = Tokenizer.fromJSON(json);
    const enc = tok.encodeWithTokens('<s><start><stx<sta   bold');
    expect(enc.tokens).toEqual(['<s>', '<start>', '<st', 'x', '<st', 'a', '   bold']);
    expect(enc.ids).toEqual([30, 31, 32, vocab.x, 32, vocab.a, 33]);
    expect(tok.decode(enc.ids, { skipSpecialTokens: true })).toBe('<st x <st a  bold');
    expect(tok.decode(enc.ids)).toBe('<s> <start> <st x <st a  bold');
  });
});
