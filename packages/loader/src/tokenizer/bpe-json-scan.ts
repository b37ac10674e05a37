/**
 * The fast path of loading a tokenizer.json text: the BPE model's `vocab` and `merges` (hundreds of thousands of
 * short strings, most of the file) are read straight from the text, the vocab into its table and each merge into
 * the ids of its two tokens and of the token it makes (looked up from ranges of the text, without building
 * strings), and only the rest of the file goes through JSON.parse. Building a 150,000-key object and 150,000
 * two-element arrays with JSON.parse, then walking them and hashing every string again, costs several times more.
 *
 * The scan accepts only what it fully understands (strict JSON: string keys, non-negative integer ids written
 * without sign, fraction or exponent, merges as `"a b"` strings or `["a", "b"]` pairs); anything else makes it
 * return null, and the caller parses the whole text with JSON.parse, which reports syntax errors and lets the
 * general path report everything else exactly as before.
 */
import { hashRange, hashString, MAX_TOKEN_ID, TokenTable } from './token-table';

/** The vocab and merges of a tokenizer.json, and the file's object without them. */
export interface ScannedBpe {
  /** The parsed file with `model.vocab` as `{}` and `model.merges` as `[]`. */
  rest: Record<string, unknown>;
  vocab: TokenTable;
  /** Merges in file order: the ids of the left and right token, and of their concatenation (-1 if that is not
   *  in the vocabulary; a model with a `continuing_subword_prefix` recomputes it). */
  left: number[];
  right: number[];
  merged: number[];
}

const QUOTE = 34;
const BACKSLASH = 92;

class Scanner {
  pos = 0;
  constructor(readonly text: string) {}

  ws(): void {
    const t = this.text;
    let p = this.pos;
    for (;;) {
      const c = t.charCodeAt(p);
      if (c === 32 || c === 10 || c === 13 || c === 9) p++;
      else break;
    }
    this.pos = p;
  }

  /** Consume `c` (after whitespace), or fail. */
  expect(c: number): boolean {
    this.ws();
    if (this.text.charCodeAt(this.pos) !== c) return false;
    this.pos++;
    return true;
  }

  /** Where the last string `string()` read lies in the text (its contents, without the quotes), and whether it
   *  has escapes (then only its decoded value, which `string()` returned, is meaningful). */
  start = 0;
  end = 0;
  escaped = false;

  /** A JSON string at `pos` (after whitespace); undefined if it is not one. With `lazy`, an unescaped string is
   *  not built: '' is returned and its range is in `start`/`end`. */
  string(lazy = false): string | undefined {
    this.ws();
    const t = this.text;
    const start = this.pos;
    if (t.charCodeAt(start) !== QUOTE) return undefined;
    let escaped = false;
    let p = start + 1;
    for (;;) {
      const c = t.charCodeAt(p);
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        p += 2;
        continue;
      }
      // raw control characters are not allowed in JSON strings (and NaN: the text ended)
      if (!(c >= 32)) return undefined;
      p++;
    }
    this.pos = p + 1;
    this.start = start + 1;
    this.end = p;
    this.escaped = escaped;
    if (!escaped) return lazy ? '' : t.slice(start + 1, p);
    try {
      return JSON.parse(t.slice(start, p + 1)) as string;
    } catch {
      return undefined;
    }
  }

  /** A non-negative integer written plainly (no sign, fraction, exponent or leading zero); -1 if not one. */
  integer(): number {
    this.ws();
    const t = this.text;
    let p = this.pos;
    let v = 0;
    const first = t.charCodeAt(p);
    if (!(first >= 48 && first <= 57)) return -1;
    for (;;) {
      const c = t.charCodeAt(p);
      if (!(c >= 48 && c <= 57)) break;
      v = v * 10 + (c - 48);
      p++;
    }
    const after = t.charCodeAt(p);
    if ((first === 48 && p - this.pos > 1) || after === 46 || after === 101 || after === 69 || p - this.pos > 15) return -1;
    this.pos = p;
    return v;
  }

  /** Skip any JSON value (checked only structurally: JSON.parse of the rest checks it fully). */
  skipValue(): boolean {
    this.ws();
    const t = this.text;
    let depth = 0;
    for (;;) {
      const c = t.charCodeAt(this.pos);
      if (c !== c) return false; // end of text
      if (c === QUOTE) {
        if (this.string() === undefined) return false;
      } else if (c === 123 || c === 91) {
        depth++;
        this.pos++;
      } else if (c === 125 || c === 93) {
        if (depth === 0) return true;
        depth--;
        this.pos++;
      } else if (c === 44 && depth === 0) return true;
      else this.pos++;
      if (depth === 0 && (c === QUOTE || c === 125 || c === 93)) return true;
    }
  }
}

/** Read an object's members: `onKey` is called at each value and must consume it. */
function members(s: Scanner, onKey: (key: string) => boolean): boolean {
  if (!s.expect(123)) return false;
  if (s.expect(125)) return true;
  for (;;) {
    const key = s.string();
    if (key === undefined || !s.expect(58) || !onKey(key)) return false;
    if (s.expect(125)) return true;
    if (!s.expect(44)) return false;
  }
}

function vocab(s: Scanner, table: TokenTable): boolean {
  const t = s.text;
  return members(s, (key) => {
    const h = s.escaped ? hashString(key) : hashRange(t, s.start, s.end);
    const id = s.integer();
    // (ids the model cannot hold are reported by the general path)
    if (id < 0 || id >= MAX_TOKEN_ID) return false;
    table.set(key, id, h);
    return true;
  });
}

/** One side of a merge: its range in the text, or its decoded string when it had escapes. */
interface Side {
  start: number;
  end: number;
  str: string | null;
}

/** Resolve merges to ids as they are read; false when one is malformed or names a token not in `vocab` (the
 *  general path then reports it). */
function merges(s: Scanner, vocab: TokenTable, out: ScannedBpe): boolean {
  const t = s.text;
  const { left, right, merged } = out;
  const idToToken = vocab.idToToken;
  const a: Side = { start: 0, end: 0, str: null };
  const b: Side = { start: 0, end: 0, str: null };
  const side = (x: Side, str: string | undefined): boolean => {
    if (str === undefined) return false;
    x.start = s.start;
    x.end = s.end;
    x.str = s.escaped ? str : null;
    return true;
  };
  let lastMerged = -2;
  if (!s.expect(91)) return false;
  if (s.expect(93)) return true;
  for (;;) {
    s.ws();
    if (t.charCodeAt(s.pos) === 91) {
      s.pos++;
      if (!side(a, s.string(true)) || !s.expect(44) || !side(b, s.string(true)) || !s.expect(93)) return false;
    } else {
      const m = s.string(true);
      if (m === undefined) return false;
      if (s.escaped) {
        const sp = m.indexOf(' ');
        if (sp < 0 || m.indexOf(' ', sp + 1) >= 0) return false;
        a.str = m.slice(0, sp);
        b.str = m.slice(sp + 1);
      } else {
        const sp = t.indexOf(' ', s.start);
        const sp2 = sp < 0 ? -1 : t.indexOf(' ', sp + 1);
        if (sp < 0 || sp >= s.end || (sp2 >= 0 && sp2 < s.end)) return false;
        a.start = s.start;
        a.end = sp;
        b.start = sp + 1;
        b.end = s.end;
        a.str = b.str = null;
      }
    }
    let ia: number;
    let ib: number;
    let im: number;
    if (a.str === null && b.str === null) {
      const ha = hashRange(t, a.start, a.end);
      ia = vocab.getRange(ha, t, a.start, a.end);
      ib = vocab.getRange(hashRange(t, b.start, b.end), t, b.start, b.end);
      // Trained files list merges in the order their tokens joined the vocabulary, so the token a merge makes
      // is usually the one after the previous merge's: compare it in place before hashing the concatenation.
      const la = a.end - a.start;
      const lb = b.end - b.start;
      const guess = idToToken[lastMerged + 1];
      let same = guess !== undefined && guess.length === la + lb;
      for (let i = 0; i < la && same; i++) same = guess!.charCodeAt(i) === t.charCodeAt(a.start + i);
      for (let i = 0; i < lb && same; i++) same = guess!.charCodeAt(la + i) === t.charCodeAt(b.start + i);
      im = same ? lastMerged + 1 : vocab.getRange(hashRange(t, b.start, b.end, ha), t, a.start, a.end, b.start, b.end);
    } else {
      const sa = a.str ?? t.slice(a.start, a.end);
      const sb = b.str ?? t.slice(b.start, b.end);
      ia = vocab.get(sa) ?? -1;
      ib = vocab.get(sb) ?? -1;
      im = vocab.get(sa + sb) ?? -1;
    }
    if (ia < 0 || ib < 0) return false;
    left.push(ia);
    right.push(ib);
    merged.push(im);
    if (im >= 0) lastMerged = im;
    if (s.expect(93)) return true;
    if (!s.expect(44)) return false;
  }
}

/**
 * Scan a tokenizer.json text whose model has a `vocab` object and a `merges` array (a BPE model); null when the
 * text is anything else, or anything the scan does not accept (see the file comment).
 */
export function scanBpeJson(text: string): ScannedBpe | null {
  const s = new Scanner(text);
  const out: ScannedBpe = { rest: {}, vocab: new TokenTable(text.length / 50), left: [], right: [], merged: [] };
  // [start, end) of the vocab and merges values in the text
  let vocabAt: [number, number] | null = null;
  let mergesAt: [number, number] | null = null;
  let models = 0;
  const ok = members(s, (key) => {
    if (key !== 'model') return s.skipValue();
    models++;
    return members(s, (k) => {
      s.ws();
      const start = s.pos;
      // (a repeated key: JSON.parse keeps the last one; merges before the vocab: rare; leave both to JSON.parse)
      if (k === 'vocab') {
        if (vocabAt || mergesAt || !vocab(s, out.vocab)) return false;
        vocabAt = [start, s.pos];
        return true;
      }
      if (k === 'merges') {
        if (mergesAt || !vocabAt || !merges(s, out.vocab, out)) return false;
        mergesAt = [start, s.pos];
        return true;
      }
      return s.skipValue();
    });
  });
  s.ws();
  if (!ok || s.pos !== text.length || models !== 1 || !vocabAt || !mergesAt) return null;
  const [v, m] = [vocabAt as [number, number], mergesAt as [number, number]];
  const restText = text.slice(0, v[0]) + '{}' + text.slice(v[1], m[0]) + '[]' + text.slice(m[1]);
  try {
    out.rest = JSON.parse(restText) as Record<string, unknown>;
  } catch {
    return null;
  }
  return out;
}
