import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES } from '../testing/fixtures';
import { scanBpeJson } from './bpe-json-scan';
import { Tokenizer } from './index';

/** Outputs of Hugging Face `tokenizers` 0.23.2 (see testdata/gen-reference.py) for variants of the fixture
 *  tokenizers that exercise every supported component. */
interface Case {
  name: string;
  spec: { base: string; patch: Record<string, unknown>; model: Record<string, unknown>; added: unknown[] } | null;
  tokenizer: Record<string, unknown> | null;
  samples: {
    text: string;
    ids: number[];
    tokens?: string[];
    plain?: number[];
    decoded: string | null;
    skipped: string | null;
    pair?: string;
    pair_ids?: number[];
  }[];
}

const cases = JSON.parse(readFileSync(new URL('./testdata/reference.json', import.meta.url), 'utf8')) as Case[];

function build(c: Case): Record<string, unknown> {
  if (c.tokenizer) return c.tokenizer;
  const base = JSON.parse(readFileSync(join(FIXTURES, 'tokenizers', `${c.spec!.base}.tokenizer.json`), 'utf8'));
  Object.assign(base, c.spec!.patch);
  Object.assign(base.model, c.spec!.model);
  base.added_tokens = [...base.added_tokens, ...c.spec!.added];
  return base;
}

describe('matches Hugging Face tokenizers', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const json = build(c);
    const tok = Tokenizer.fromJSON(json, { source: c.name });
    // the same file as text goes through the scan of vocab and merges (bpe-json-scan.ts)
    const text = JSON.stringify(json);
    expect(scanBpeJson(text)).not.toBeNull();
    const fromText = Tokenizer.fromJSON(text, { source: c.name });
    expect(fromText.vocabSize).toBe(tok.vocabSize);
    for (let id = 0; id < tok.vocabSize; id++) expect(fromText.idToToken(id)).toBe(tok.idToToken(id));
    for (const s of c.samples) {
      expect(fromText.encode(s.text), `${c.name} (from text): ${JSON.stringify(s.text)}`).toEqual(s.ids);
      const what = `${c.name}: ${JSON.stringify(s.text)}`;
      const enc = tok.encodeWithTokens(s.text);
      expect(enc.ids, what).toEqual(s.ids);
      if (s.tokens) expect(enc.tokens, what).toEqual(s.tokens);
      expect(tok.encode(s.text, { addSpecialTokens: false }), what).toEqual(s.plain ?? s.ids);
      if (s.decoded !== null) expect(tok.decode(s.ids), what).toBe(s.decoded);
      if (s.skipped !== null) expect(tok.decode(s.ids, { skipSpecialTokens: true }), what).toBe(s.skipped);
      if (s.pair !== undefined) expect(tok.encode(s.text, { pair: s.pair }), `${what} + pair`).toEqual(s.pair_ids);
    }
  });
});
