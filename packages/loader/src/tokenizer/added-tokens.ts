import { z } from 'zod';
import type { Normalizer } from './normalizers';
import type { Piece } from './pre-tokenizers';
import { WS } from './regex';

export const addedTokenSchema = z.object({
  id: z.number().int().nonnegative(),
  content: z.string(),
  single_word: z.boolean().default(false),
  lstrip: z.boolean().default(false),
  rstrip: z.boolean().default(false),
  normalized: z.boolean().default(true),
  special: z.boolean().default(false),
});

/** An added token of tokenizer.json (`added_tokens`), with the id it ends up with. */
export interface AddedToken {
  id: number;
  content: string;
  /** Only matched as a whole word (not next to letters, digits or '_'). */
  singleWord: boolean;
  /** Swallows the whitespace on its left / right. */
  lstrip: boolean;
  rstrip: boolean;
  /** Matched in the normalized text (else in the raw text). */
  normalized: boolean;
  special: boolean;
  /** The string decoding and `idToToken` give: the content, normalized when `normalized` (as the reference). */
  text: string;
}

/** Text, or an added token's id and the text it matched (including whitespace it strips); `first` marks a
 *  piece that starts at the beginning of the input. */
export type Segment = { id: number; token: AddedToken; text: string } | Piece;

const WORD_CHAR = /[\p{Alphabetic}\p{N}_]/u;
const WHITE = new RegExp(`[${WS}]`, 'u');

function lastChar(s: string): string {
  const cp = s.codePointAt(s.length - 1)!;
  return cp >= 0xdc00 && cp <= 0xdfff && s.length >= 2 ? s.slice(-2) : s.slice(-1);
}

/** Leftmost-longest, non-overlapping search for a set of strings (what an Aho-Corasick automaton in
 *  leftmost-longest mode finds), indexed by first UTF-16 unit. */
class Matcher {
  private byFirst = new Map<number, { pattern: string; token: AddedToken }[]>();
  constructor(entries: { pattern: string; token: AddedToken }[]) {
    for (const e of entries) {
      if (!e.pattern.length) continue;
      const k = e.pattern.charCodeAt(0);
      let l = this.byFirst.get(k);
      if (!l) this.byFirst.set(k, (l = []));
      l.push(e);
    }
    for (const l of this.byFirst.values()) l.sort((a, b) => b.pattern.length - a.pattern.length);
  }

  get empty(): boolean {
    return this.byFirst.size === 0;
  }

  *matches(s: string): Generator<[number, number, AddedToken]> {
    for (let i = 0; i < s.length; ) {
      const cands = this.byFirst.get(s.charCodeAt(i));
      let hit: { pattern: string; token: AddedToken } | undefined;
      if (cands) for (const c of cands) if (s.startsWith(c.pattern, i)) {
        hit = c;
        break;
      }
      if (hit) {
        yield [i, i + hit.pattern.length, hit.token];
        i += hit.pattern.length;
      } else i++;
    }
  }
}

/**
 * The added tokens of a tokenizer and their extraction from text before the model runs: tokens with
 * `normalized: false` are found in the raw text, the others in the normalized pieces between them, honouring
 * `single_word`, `lstrip` and `rstrip` as Hugging Face `tokenizers` does.
 */
export class AddedVocabulary {
  readonly tokens: AddedToken[] = [];
  private byContent = new Map<string, AddedToken>();
  private byId = new Map<number, AddedToken>();
  private raw: Matcher;
  private norm: Matcher;

  /**
   * Ids are assigned as the reference does on load: a token already in the model vocabulary keeps the model's
   * id, any other one gets the next id after the model vocabulary and the added tokens so far (the ids written
   * in the JSON are normally equal to these).
   */
  constructor(list: z.output<typeof addedTokenSchema>[], modelToId: (s: string) => number | undefined, modelCount: number, normalizer: Normalizer | null) {
    for (const t of list) {
      if (!t.content.length) continue;
      const existing = this.byContent.get(t.content);
      let id = existing?.id ?? modelToId(t.content);
      if (id === undefined) {
        let max = -1;
        for (const k of this.byId.keys()) max = Math.max(max, k);
        id = max < 0 ? modelCount : max >= modelCount || modelCount === 0 ? max + 1 : modelCount;
      }
      const token: AddedToken = { id, content: t.content, singleWord: t.single_word, lstrip: t.lstrip, rstrip: t.rstrip, normalized: t.normalized, special: t.special || !!existing?.special, text: t.normalized && normalizer ? normalizer(t.content) : t.content };
      if (existing) this.tokens.splice(this.tokens.indexOf(existing), 1);
      this.tokens.push(token);
      this.byContent.set(t.content, token);
      this.byId.set(id, token);
    }
    this.raw = new Matcher(this.tokens.filter((t) => !t.normalized).map((t) => ({ pattern: t.content, token: t })));
    this.norm = new Matcher(this.tokens.filter((t) => t.normalized).map((t) => ({ pattern: normalizer ? normalizer(t.content) : t.content, token: t })));
  }

  tokenToId(s: string): number | undefined {
    return this.byContent.get(s)?.id;
  }

  idToToken(id: number): AddedToken | undefined {
    return this.byId.get(id);
  }

  isSpecial(content: string): boolean {
    return !!this.byContent.get(content)?.special;
  }

  /** Split text around the added tokens it contains and normalize the rest. */
  extract(text: string, normalizer: Normalizer | null): Segment[] {
    const out: Segment[] = [];
    for (const seg of this.split(text, this.raw, true)) {
      if ('id' in seg) {
        out.push(seg);
        continue;
      }
      const s = normalizer ? normalizer(seg.s) : seg.s;
      for (const sub of this.split(s, this.norm, seg.first)) if ('id' in sub || sub.s.length) out.push(sub);
    }
    return out;
  }

  private split(s: string, m: Matcher, first: boolean): Segment[] {
    if (!s.length) return [];
    if (m.empty) return [{ s, first }];
    const out: Segment[] = [];
    let from = 0;
    for (const [mStart, mEnd, token] of m.matches(s)) {
      let start = mStart;
      let end = mEnd;
      if (token.singleWord) {
        const before = start === 0 || !WORD_CHAR.test(lastChar(s.slice(0, start)));
        const after = end === s.length || !WORD_CHAR.test(String.fromCodePoint(s.codePointAt(end)!));
        if (!before || !after) continue;
      }
      if (token.lstrip) {
        let k = start;
        while (k > 0) {
          const c = lastChar(s.slice(0, k));
          if (!WHITE.test(c)) break;
          k -= c.length;
        }
        start = Math.max(k, from);
      }
      if (token.rstrip) {
        while (end < s.length) {
          const c = String.fromCodePoint(s.codePointAt(end)!);
          if (!WHITE.test(c)) break;
          end += c.length;
        }
      }
      if (from < start) out.push({ s: s.slice(from, start), first: first && from === 0 });
      out.push({ id: token.id, token, text: s.slice(start, end) });
      from = end;
    }
    if (from < s.length) out.push({ s: s.slice(from), first: first && from === 0 });
    return out;
  }
}
