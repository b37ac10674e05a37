import { z } from 'zod';
import type { Normalizer } from './normalizers';
import type { Piece } from './pre-tokenizers';
import { LongestMatchTrie } from './longest-match-trie';
import { WORD, WS } from './regex';

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

/** Rust regex's Unicode `\w` (what the reference's single-word check uses) and `\s`. */
const WORD_CHAR = new RegExp(`[${WORD}]`, 'u');
const WHITE = new RegExp(`[${WS}]`, 'u');

/** The code point that ends at `end` (exclusive), as a string. */
function charBefore(s: string, end: number): string {
  const c = s.charCodeAt(end - 1);
  return c >= 0xdc00 && c <= 0xdfff && end >= 2 && (s.charCodeAt(end - 2) & 0xfc00) === 0xd800 ? s.slice(end - 2, end) : s[end - 1]!;
}

/** The code point that starts at `start`, as a string. */
function charAt(s: string, start: number): string {
  return String.fromCodePoint(s.codePointAt(start)!);
}

/**
 * The added tokens of a tokenizer and their extraction from text before the model runs: tokens with
 * `normalized: false` are found in the raw text, the others in the normalized pieces between them, honouring
 * `single_word`, `lstrip` and `rstrip` as Hugging Face `tokenizers` does. Both searches are leftmost-longest
 * (see LongestMatchTrie), special tokens taking precedence over others with the same (normalized) text.
 */
export class AddedVocabulary {
  readonly tokens: AddedToken[] = [];
  private byContent = new Map<string, AddedToken>();
  private byId = new Map<number, AddedToken>();
  private raw: LongestMatchTrie<AddedToken>;
  private norm: LongestMatchTrie<AddedToken>;

  /**
   * Ids are assigned as the reference does on load: a token already in the model vocabulary keeps the model's
   * id, any other one gets the next id after the model vocabulary and the added tokens so far (the ids written
   * in the JSON are normally equal to these).
   */
  constructor(list: z.output<typeof addedTokenSchema>[], modelToId: (s: string) => number | undefined, modelCount: number, normalizer: Normalizer | null) {
    let max = -1;
    const replaced = new Set<AddedToken>();
    for (const t of list) {
      if (!t.content.length) continue;
      const existing = this.byContent.get(t.content);
      let id = existing?.id ?? modelToId(t.content);
      if (id === undefined) id = max < 0 ? modelCount : max >= modelCount || modelCount === 0 ? max + 1 : modelCount;
      max = Math.max(max, id);
      const token: AddedToken = { id, content: t.content, singleWord: t.single_word, lstrip: t.lstrip, rstrip: t.rstrip, normalized: t.normalized, special: t.special || !!existing?.special, text: t.normalized && normalizer ? normalizer(t.content) : t.content };
      // rare: the same content twice; the later entry replaces the earlier one, at the end of the list
      if (existing) replaced.add(existing);
      this.tokens.push(token);
      this.byContent.set(t.content, token);
      this.byId.set(id, token);
    }
    if (replaced.size) {
      const kept = this.tokens.filter((t) => !replaced.has(t));
      this.tokens.length = kept.length;
      kept.forEach((t, i) => (this.tokens[i] = t));
    }
    // the reference searches its special tokens first, then the others (which matters for equal patterns)
    const ordered = [...this.tokens.filter((t) => t.special), ...this.tokens.filter((t) => !t.special)];
    this.raw = new LongestMatchTrie(ordered.filter((t) => !t.normalized).map((t) => ({ pattern: t.content, value: t })));
    this.norm = new LongestMatchTrie(ordered.filter((t) => t.normalized).map((t) => ({ pattern: t.text, value: t })));
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
    if (!text.length) return out;
    if (this.raw.empty) {
      this.split(normalizer ? normalizer(text) : text, this.norm, true, out);
      return out;
    }
    const rawSegs: Segment[] = [];
    this.split(text, this.raw, true, rawSegs);
    for (const seg of rawSegs) {
      if ('id' in seg) out.push(seg);
      else this.split(normalizer ? normalizer(seg.s) : seg.s, this.norm, seg.first, out);
    }
    return out;
  }

  /** Append the pieces of `s` and the added tokens found in it to `out` (no empty pieces). */
  private split(s: string, m: LongestMatchTrie<AddedToken>, first: boolean, out: Segment[]): void {
    if (!s.length) return;
    let from = 0;
    for (let at = 0, mStart: number; (mStart = m.find(s, at)) >= 0; ) {
      const mEnd = m.matchEnd;
      const token = m.matchValue!;
      // the search resumes after the match as found, whatever stripping or the single-word check do to it
      at = mEnd;
      let start = mStart;
      let end = mEnd;
      if (token.singleWord) {
        const before = start === 0 || !WORD_CHAR.test(charBefore(s, start));
        const after = end === s.length || !WORD_CHAR.test(charAt(s, end));
        if (!before || !after) continue;
      }
      if (token.lstrip) {
        let k = start;
        while (k > 0) {
          const c = charBefore(s, k);
          if (!WHITE.test(c)) break;
          k -= c.length;
        }
        start = Math.max(k, from);
      }
      if (token.rstrip) {
        while (end < s.length) {
          const c = charAt(s, end);
          if (!WHITE.test(c)) break;
          end += c.length;
        }
      }
      if (from < start) out.push({ s: s.slice(from, start), first: first && from === 0 });
      out.push({ id: token.id, token, text: s.slice(start, end) });
      from = end;
    }
    if (from < s.length) out.push({ s: s.slice(from), first: first && from === 0 });
  }
}
