import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES } from '../testing/fixtures';
import { Tokenizer } from './index';

interface Sample {
  text: string;
  ids: number[];
  tokens: string[];
  decoded: string;
}

describe.each(['bytelevel', 'metaspace'])('fixture tokenizer %s', (name) => {
  const dir = join(FIXTURES, 'tokenizers');
  const samples = JSON.parse(readFileSync(join(dir, `${name}.expected.json`), 'utf8')) as Sample[];

  it('encodes every sample to the expected ids and tokens and decodes to the expected text', async () => {
    const tok = await Tokenizer.fromFile(join(dir, `${name}.tokenizer.json`));
    for (const s of samples) {
      const enc = tok.encodeWithTokens(s.text);
      expect(enc.ids, JSON.stringify(s.text)).toEqual(s.ids);
      expect(enc.tokens, JSON.stringify(s.text)).toEqual(s.tokens);
      expect(tok.encode(s.text)).toEqual(s.ids);
      expect(tok.decode(s.ids), JSON.stringify(s.text)).toBe(s.decoded);
    }
  });

  it('knows its special tokens, vocabulary and options', async () => {
    const tok = await Tokenizer.fromFile(join(dir, `${name}.tokenizer.json`));
    const bos = name === 'bytelevel' ? '<|begin_of_text|>' : '<s>';
    const eos = name === 'bytelevel' ? '<|end_of_text|>' : '</s>';
    expect(tok.idToToken(tok.bosTokenId!)).toBe(bos);
    expect(tok.idToToken(tok.eosTokenId!)).toBe(eos);
    expect(tok.vocabSize).toBe(name === 'bytelevel' ? 600 : 700);
    const s = samples[0]!;
    expect(tok.encode(s.text, { addSpecialTokens: false })).toEqual(s.ids.slice(1));
    expect(tok.decode(s.ids, { skipSpecialTokens: true })).toBe(s.decoded.slice(bos.length).replace(/^ /, ''));
    for (let id = 0; id < tok.vocabSize; id++) {
      const t = tok.idToToken(id);
      if (t !== undefined) expect(tok.tokenToId(t)).toBe(id);
    }
    // special tokens in the text are matched before the model
    expect(tok.encode(`${eos}x`, { addSpecialTokens: false })[0]).toBe(tok.eosTokenId);
  });
});
