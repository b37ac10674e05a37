/**
 * A vocabulary: token string <-> id. An open-addressing hash table over typed arrays with its own string hash
 * (FNV-1a over UTF-16 code units), so that a token can be looked up from a range of a larger text, or as the
 * concatenation of two ranges, without building the string: loading a tokenizer.json resolves hundreds of
 * thousands of merges this way (see bpe-json-scan.ts).
 */

/** Ids must be below this (they index dense arrays: a larger id is a malformed file, not a vocabulary). */
export const MAX_TOKEN_ID = 2 ** 26;

const FNV_OFFSET = 0x811c9dc5 | 0;
const FNV_PRIME = 0x01000193;

/** The hash of `s` (or, from `h`, of what was hashed so far followed by `s`). */
export function hashString(s: string, h = FNV_OFFSET): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME);
  return h;
}

/** The hash of `text[start, end)` (or, from `h`, of what was hashed so far followed by it). */
export function hashRange(text: string, start: number, end: number, h = FNV_OFFSET): number {
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h;
}

export class TokenTable {
  /** id -> token (holes where the vocabulary has no token). */
  readonly idToToken: string[] = [];
  private tokens: string[] = [];
  private ids: number[] = [];
  /** Open addressing, two int32 per slot: the hash, then the entry index + 1 (0: empty slot). Keeping the hash
   *  in the slot means a probe touches one cache line until a hash matches. */
  private slots: Int32Array;
  private mask: number;

  constructor(expected = 16) {
    let cap = 16;
    while (cap < expected * 2) cap *= 2;
    this.slots = new Int32Array(cap * 2);
    this.mask = cap - 1;
  }

  /** Number of distinct tokens. */
  get size(): number {
    return this.tokens.length;
  }

  /** Add a token (its hash may be given); a token given again takes the new id, as JSON.parse keeps the last. */
  set(token: string, id: number, h = hashString(token)): void {
    if (this.tokens.length * 2 >= this.mask) this.grow();
    const slots = this.slots;
    const mask = this.mask;
    let s = (h ^ (h >>> 15)) & mask;
    for (let e; (e = slots[2 * s + 1]!) !== 0; s = (s + 1) & mask) {
      if (slots[2 * s] === h && this.tokens[e - 1] === token) {
        const old = this.ids[e - 1]!;
        if (this.idToToken[old] === token) delete this.idToToken[old];
        this.ids[e - 1] = id;
        this.idToToken[id] = token;
        return;
      }
    }
    this.tokens.push(token);
    this.ids.push(id);
    slots[2 * s] = h;
    slots[2 * s + 1] = this.tokens.length;
    this.idToToken[id] = token;
  }

  private grow(): void {
    const old = this.slots;
    const cap = (this.mask + 1) * 2;
    const slots = new Int32Array(cap * 2);
    const mask = cap - 1;
    for (let k = 0; k < old.length; k += 2) {
      if (old[k + 1] === 0) continue;
      const h = old[k]!;
      let s = (h ^ (h >>> 15)) & mask;
      while (slots[2 * s + 1] !== 0) s = (s + 1) & mask;
      slots[2 * s] = h;
      slots[2 * s + 1] = old[k + 1]!;
    }
    this.slots = slots;
    this.mask = mask;
  }

  get(token: string, h = hashString(token)): number | undefined {
    const slots = this.slots;
    const mask = this.mask;
    for (let s = (h ^ (h >>> 15)) & mask, e; (e = slots[2 * s + 1]!) !== 0; s = (s + 1) & mask)
      if (slots[2 * s] === h && this.tokens[e - 1] === token) return this.ids[e - 1];
    return undefined;
  }

  /** The id of the token `text[start, end)` (then `text[start2, end2)` when given), whose hash is `h`; -1 if none. */
  getRange(h: number, text: string, start: number, end: number, start2 = 0, end2 = 0): number {
    const slots = this.slots;
    const mask = this.mask;
    const len1 = end - start;
    const len = len1 + end2 - start2;
    for (let s = (h ^ (h >>> 15)) & mask, e; (e = slots[2 * s + 1]!) !== 0; s = (s + 1) & mask) {
      if (slots[2 * s] !== h) continue;
      const t = this.tokens[e - 1]!;
      if (t.length !== len) continue;
      if (end2 === start2) {
        if (text.startsWith(t, start)) return this.ids[e - 1]!;
        continue;
      }
      let same = true;
      for (let i = 0; i < len1 && same; i++) same = t.charCodeAt(i) === text.charCodeAt(start + i);
      for (let i = len1; i < len && same; i++) same = t.charCodeAt(i) === text.charCodeAt(start2 + i - len1);
      if (same) return this.ids[e - 1]!;
    }
    return -1;
  }
}
