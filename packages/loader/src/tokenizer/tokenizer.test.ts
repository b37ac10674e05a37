import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testing } from '@rusty/backend';
import { afterAll, describe, expect, it } from 'vitest';
import { TokenizerError } from '../errors';
import { tempDir } from '../testing/fixtures';
import { ByteTokenizer, Tokenizer } from './index';
import { translateRegex } from './regex';

const { dir: TMP, cleanup } = tempDir();
afterAll(cleanup);

const bpe = (extra: Record<string, unknown> = {}, model: Record<string, unknown> = {}) => ({
  added_tokens: [],
  model: { type: 'BPE', vocab: { a: 0, b: 1, ab: 2 }, merges: ['a b'], ...model },
  ...extra,
});

function throwsTok(f: () => unknown, pattern: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(TokenizerError);
  expect((err as Error).message).toMatch(pattern);
}

describe('hostile tokenizer files', () => {
  it('unsupported model types and components name the component', () => {
    for (const type of ['WordPiece', 'Unigram', 'WordLevel'])
      throwsTok(() => Tokenizer.fromJSON({ model: { type, vocab: {} } }, { source: 'tok.json' }), new RegExp(`^tok.json: model type '${type}' is not supported`));
    throwsTok(() => Tokenizer.fromJSON(bpe({ normalizer: { type: 'Precompiled', precompiled_charsmap: '' } })), /tokenizer.json: normalizer: normalizer type 'Precompiled' is not supported/);
    throwsTok(
      () => Tokenizer.fromJSON(bpe({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'ByteLevel' }, { type: 'UnicodeScripts' }] } })),
      /pre_tokenizer.pretokenizers\[1\]: pre-tokenizer type 'UnicodeScripts' is not supported/,
    );
    throwsTok(() => Tokenizer.fromJSON(bpe({ post_processor: { type: 'Mystery' } })), /post_processor: post-processor type 'Mystery'/);
    throwsTok(() => Tokenizer.fromJSON(bpe({ decoder: { type: 'CTC' } })), /decoder: decoder type 'CTC' is not supported/);
    throwsTok(() => Tokenizer.fromJSON(bpe({ decoder: { nope: 1 } })), /decoder: missing "type"/);
  });

  it('malformed files, fields, merges and regexes', () => {
    throwsTok(() => Tokenizer.fromJSON('{"model": ', { source: 'x.json' }), /^x.json: not valid JSON/);
    throwsTok(() => Tokenizer.fromJSON('[1]'), /expected a JSON object/);
    throwsTok(() => Tokenizer.fromJSON({}), /tokenizer.json: 'model': /);
    throwsTok(() => Tokenizer.fromJSON(bpe({}, { vocab: { a: -1 } })), /model \(BPE\): 'vocab.a'/);
    throwsTok(() => Tokenizer.fromJSON(bpe({}, { merges: ['a b c'] })), /merges\[0\] "a b c" is not two tokens/);
    throwsTok(() => Tokenizer.fromJSON(bpe({}, { merges: [['a', 'z']] })), /merges\[0\] uses 'z', which is not in the vocab/);
    throwsTok(() => Tokenizer.fromJSON(bpe({}, { merges: ['b a'] })), /merges\[0\] makes 'ba', which is not in the vocab/);
    throwsTok(() => Tokenizer.fromJSON(bpe({ added_tokens: [{ content: 'x' }] })), /added_tokens\[0\]: 'id'/);
    throwsTok(
      () => Tokenizer.fromJSON(bpe({ pre_tokenizer: { type: 'Split', pattern: { Regex: 'a++' }, behavior: 'Isolated', invert: false } })),
      /pre_tokenizer \(Split\): the regex "a\+\+" uses a possessive quantifier/,
    );
    throwsTok(() => Tokenizer.fromJSON(bpe({ pre_tokenizer: { type: 'Split', pattern: { Regex: 'a' }, behavior: 'Sideways' } })), /'behavior'/);
    throwsTok(() => Tokenizer.fromJSON(bpe({ post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<x>' } }], pair: [] } })), /special token '<x>', which is missing/);
    throwsTok(() => Tokenizer.fromJSON(bpe({}, { unk_token: '<unk>' })).encode('c'), /the unk_token '<unk>' is not in the vocab/);
    const tok = Tokenizer.fromJSON(bpe());
    // ids that cannot be token ids at all (the reference's u32): a clear error
    throwsTok(() => tok.decode([0, -1]), /cannot decode id -1 at position 1/);
    throwsTok(() => tok.decode([1.5]), /cannot decode id 1.5/);
    throwsTok(() => tok.decode([NaN]), /cannot decode id NaN/);
    throwsTok(() => tok.decode([2 ** 32]), /cannot decode id 4294967296/);
    throwsTok(() => tok.encode(3 as unknown as string), /encode expects a string/);
  });

  it('decode skips ids it has no token for, as the reference does', () => {
    // e.g. a model whose embedding has more rows than its tokenizer has ids (Qwen3: 151,936 rows, 151,669 ids)
    const tok = Tokenizer.fromJSON(bpe({ added_tokens: [{ id: 3, content: '<s>', special: true }], decoder: { type: 'Fuse' } }));
    expect(tok.vocabSize).toBe(4);
    expect(tok.decode([0, 4, 2, 151_935, 3, 2 ** 32 - 1, 1])).toBe('aab<s>b');
    expect(tok.decode([4, 5])).toBe('');
    expect(tok.decode([3, 9, 0], { skipSpecialTokens: true })).toBe('a');
  });

  it('reports unreadable files', async () => {
    await expect(Tokenizer.fromFile(join(TMP, 'none.json'))).rejects.toThrow(/none.json: cannot read the tokenizer/);
    const d = join(TMP, 'cfg');
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'tokenizer.json'), JSON.stringify(bpe({ added_tokens: [{ id: 3, content: '<s>', special: true }, { id: 4, content: '</s>', special: true }] })));
    writeFileSync(join(d, 'tokenizer_config.json'), '{');
    await expect(Tokenizer.fromFile(join(d, 'tokenizer.json'))).rejects.toThrow(/tokenizer_config.json: not valid JSON/);
    writeFileSync(join(d, 'tokenizer_config.json'), JSON.stringify({ bos_token: { content: '</s>' }, eos_token: '<s>' }));
    const tok = await Tokenizer.fromFile(join(d, 'tokenizer.json'));
    expect([tok.bosTokenId, tok.eosTokenId]).toEqual([4, 3]);
  });
});

describe('BPE', () => {
  it('merges long words quickly (priority queue, no quadratic rescans)', () => {
    // vocab: single letters and every doubling of "a" up to 2^12; merges double runs
    const vocab: Record<string, number> = { a: 0 };
    const merges: string[] = [];
    for (let k = 1; k <= 12; k++) {
      vocab['a'.repeat(2 ** k)] = k;
      merges.push(`${'a'.repeat(2 ** (k - 1))} ${'a'.repeat(2 ** (k - 1))}`);
    }
    const tok = Tokenizer.fromJSON({ model: { type: 'BPE', vocab, merges } });
    const n = 200_000;
    const t0 = performance.now();
    const ids = tok.encode('a'.repeat(n));
    const ms = performance.now() - t0;
    // 200000 = 48 * 4096 + 3392 = ... greedy doubling from the left
    let rest = n;
    const want: number[] = [];
    for (let k = 12; k >= 0; k--) while (rest >= 2 ** k && (k === 12 || rest < 2 ** (k + 1))) (want.push(k), (rest -= 2 ** k));
    expect(ids).toEqual(want);
    expect(ms).toBeLessThan(3000);
  });

  it('continuing_subword_prefix, end_of_word_suffix and byte fallback on the affixed string', () => {
    const tok = Tokenizer.fromJSON({
      pre_tokenizer: { type: 'WhitespaceSplit' },
      model: {
        type: 'BPE',
        vocab: { h: 0, '##i': 1, 'hi</w>': 2, '##i</w>': 3, '<0xC3>': 4, '<0xA9>': 5, x: 6 },
        merges: ['h ##i</w>'],
        continuing_subword_prefix: '##',
        end_of_word_suffix: '</w>',
        byte_fallback: true,
      },
    });
    // 'é' becomes 'é</w>' before the lookup, and byte fallback needs every byte of that: it is dropped (no unk)
    expect(tok.encode('hi hii é')).toEqual([2, 0, 1, 3]);
    expect(tok.encode('hi é', { addSpecialTokens: false })).toEqual([2]);
  });
});

describe('regex translation', () => {
  it('keeps Oniguruma semantics for \\s, \\w, \\d and anchors', () => {
    const m = (p: string, s: string) => [...s.matchAll(translateRegex(p, 't'))].map((x) => x[0]);
    expect(m('\\s+', 'a\u0085b\ufeffc\u00a0d')).toEqual(['\u0085', '\u00a0']);
    expect(m('\\w+', 'é_1٣ x-y')).toEqual(['é_1٣', 'x', 'y']);
    expect(m('\\d+', 'a١٢٣b45')).toEqual(['١٢٣', '45']);
    expect(m('^a|a$', 'a\na\ra')).toEqual(['a', 'a', 'a']);
    expect(m('(?i:st)+', 'STst sT')).toEqual(['STst', 'sT']);
    expect(m('[[:digit:]x]{2,}', 'x1 2 33')).toEqual(['x1', '33']);
  });
});

describe('ByteTokenizer', () => {
  it('encodes bytes with specials, decodes back, and its tokenizer.json loads to the same tokenizer', () => {
    const bt = new ByteTokenizer();
    expect(bt.vocabSize).toBe(259);
    expect([bt.bosTokenId, bt.eosTokenId, bt.padTokenId]).toEqual([256, 257, 258]);
    expect(bt.encode('hé')).toEqual([256, 104, 195, 169]);
    expect(bt.encode('hé', { addSpecialTokens: false })).toEqual([104, 195, 169]);
    expect(bt.decode([256, 104, 195, 169])).toBe('<|bos|>hé');
    expect(bt.decode([256, 104, 195, 169], { skipSpecialTokens: true })).toBe('hé');
    expect(bt.decode([195])).toBe('\ufffd');
    const again = Tokenizer.fromJSON(JSON.stringify(bt.toJSON()));
    const r = testing.rng(7);
    const alphabet = ['a', ' ', '\n', 'é', '日', '🚀', '<|eos|>', '<|bos|>', '<|', '|>', '\u0000', '\ufffd'];
    for (let k = 0; k < 300; k++) {
      const text = Array.from({ length: Math.floor(r() * 20) }, () => alphabet[Math.floor(r() * alphabet.length)]).join('');
      for (const addSpecialTokens of [true, false]) {
        const ids = bt.encode(text, { addSpecialTokens });
        expect(again.encode(text, { addSpecialTokens })).toEqual(ids);
        expect(bt.decode(ids)).toBe(again.decode(ids));
        expect(bt.decode(ids, { skipSpecialTokens: true })).toBe(again.decode(ids, { skipSpecialTokens: true }));
      }
      expect(bt.encode(text, { pair: 'x<|eos|>' })).toEqual(again.encode(text, { pair: 'x<|eos|>' }));
      if (!text.includes('<|')) expect(bt.decode(bt.encode(text, { addSpecialTokens: false }))).toBe(text);
    }
  });

  it('writes the tokenizer.json that the reference outputs were computed with', () => {
    const saved = JSON.parse(readFileSync(new URL('./testdata/byte-tokenizer.json', import.meta.url), 'utf8'));
    expect(new ByteTokenizer({ eos: '<|eos|>' }).toJSON()).toEqual(saved);
  });

  it('takes custom specials, bos and eos', () => {
    const bt = new ByteTokenizer({ specials: ['<s>', '</s>', '<pad>', '<mask>'], bos: '<s>', eos: '</s>', pad: '<pad>' });
    expect(bt.encode('a')).toEqual([256, 97, 257]);
    expect(bt.encode('a<mask>b')).toEqual([256, 97, 259, 98, 257]);
    expect(bt.padTokenId).toBe(258);
    expect(new ByteTokenizer({ bos: null }).encode('a')).toEqual([97]);
    throwsTok(() => new ByteTokenizer({ bos: '<x>' }), /the bos token '<x>' is not among the specials/);
    throwsTok(() => new ByteTokenizer({ specials: ['a', 'a'] }), /distinct/);
  });
});
