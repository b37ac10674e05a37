import { z } from 'zod';
import { TokenizerError } from '../errors';
import type { ScannedBpe } from './bpe-json-scan';
import { parseComponent } from './component';
import { MAX_TOKEN_ID, TokenTable } from './token-table';

const UTF8 = new TextEncoder();

/** The BPE model's options; `vocab` and `merges` (hundreds of thousands of entries) are checked by hand, in one
 *  pass that also builds the tables (a schema validator costs more than the rest of loading). */
const bpeOptionsSchema = z.object({
  type: z.literal('BPE').optional(),
  vocab: z.unknown(),
  merges: z.unknown(),
  unk_token: z.string().nullable().optional(),
  continuing_subword_prefix: z.string().nullable().optional(),
  end_of_word_suffix: z.string().nullable().optional(),
  fuse_unk: z.boolean().default(false),
  byte_fallback: z.boolean().default(false),
  ignore_merges: z.boolean().default(false),
  dropout: z.number().nullable().optional(),
});

/** A min-heap of candidate merges keyed by rank * 2^32 + position (exact below 2^53: ranks < 2^21), carrying
 *  the id the merge produces. */
class MergeHeap {
  private key = new Float64Array(64);
  private id = new Int32Array(64);
  size = 0;
  push(rank: number, pos: number, id: number): void {
    if (this.size === this.key.length) {
      const k = new Float64Array(this.size * 2);
      k.set(this.key);
      this.key = k;
      const d = new Int32Array(this.size * 2);
      d.set(this.id);
      this.id = d;
    }
    const key = rank * 4294967296 + pos;
    const keys = this.key;
    const ids = this.id;
    let i = this.size++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (keys[p]! <= key) break;
      keys[i] = keys[p]!;
      ids[i] = ids[p]!;
      i = p;
    }
    keys[i] = key;
    ids[i] = id;
  }
  /** Remove the smallest entry; returns its position, and its merge id in `this.topId`. */
  topId = 0;
  pop(): number {
    const keys = this.key;
    const ids = this.id;
    const topKey = keys[0]!;
    this.topId = ids[0]!;
    const n = --this.size;
    const key = keys[n]!;
    const id = ids[n]!;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && keys[c + 1]! < keys[c]!) c++;
      if (keys[c]! >= key) break;
      keys[i] = keys[c]!;
      ids[i] = ids[c]!;
      i = c;
    }
    keys[i] = key;
    ids[i] = id;
    return topKey % 4294967296;
  }
}

/** Open-addressing hash table from a pair of ids to a merge rank (faster than a Map with 52-bit keys). */
class PairTable {
  private a: Int32Array;
  private b: Int32Array;
  private v: Int32Array;
  private mask: number;
  size = 0;
  constructor(n: number) {
    let cap = 16;
    while (cap < n * 2) cap *= 2;
    this.a = new Int32Array(cap);
    this.b = new Int32Array(cap);
    this.v = new Int32Array(cap).fill(-1);
    this.mask = cap - 1;
  }
  private slot(a: number, b: number): number {
    let h = (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca77)) & this.mask;
    while (this.v[h] !== -1 && (this.a[h] !== a || this.b[h] !== b)) h = (h + 1) & this.mask;
    return h;
  }
  set(a: number, b: number, rank: number): void {
    const h = this.slot(a, b);
    if (this.v[h] === -1) this.size++;
    this.a[h] = a;
    this.b[h] = b;
    this.v[h] = rank;
  }
  /** The rank, or -1. */
  get(a: number, b: number): number {
    return this.v[this.slot(a, b)]!;
  }
}

const CACHE_LIMIT = 50_000;
const CACHE_WORD_LENGTH = 256;

/**
 * The BPE model of Hugging Face `tokenizers`: a word is split into characters (or bytes, with byte fallback),
 * then the adjacent pair with the lowest merge rank is merged, leftmost first, until no pair merges. Uses a
 * priority queue over pair positions (O(n log n) per word) and a cache of recent words.
 */
export class BpeModel {
  readonly vocab: TokenTable;
  private readonly idToTok: string[];
  /** (left id, right id) -> merge rank (an index into newIds). */
  private readonly pairs: PairTable;
  private readonly newIds: Int32Array;
  private readonly unkId: number | undefined;
  private readonly prefix: string | null;
  private readonly suffix: string | null;
  private readonly fuseUnk: boolean;
  private readonly byteFallback: boolean;
  private readonly ignoreMerges: boolean;
  private readonly byteIds: (number | undefined)[] = [];
  private readonly unkToken: string | null;
  private cache = new Map<string, number[]>();

  /**
   * @param json the `model` object of a tokenizer.json
   * @param scanned its vocab and merges as `scanBpeJson` read them from the text (then `json` has them empty)
   */
  constructor(json: unknown, private readonly where: string, scanned?: ScannedBpe) {
    const o = parseComponent(bpeOptionsSchema, json, where);
    this.prefix = o.continuing_subword_prefix || null;
    this.suffix = o.end_of_word_suffix || null;
    this.fuseUnk = o.fuse_unk;
    this.byteFallback = o.byte_fallback;
    this.ignoreMerges = o.ignore_merges;
    this.unkToken = o.unk_token ?? null;
    if (scanned) this.vocab = scanned.vocab;
    else {
      if (typeof o.vocab !== 'object' || o.vocab === null || Array.isArray(o.vocab)) throw new TokenizerError(`${where}: 'vocab': expected an object of token: id`);
      const v = o.vocab as Record<string, unknown>;
      const table = new TokenTable(1024);
      for (const tok in v) {
        if (!Object.hasOwn(v, tok)) continue;
        const id = v[tok];
        if (typeof id !== 'number' || !Number.isInteger(id) || id < 0)
          throw new TokenizerError(`${where}: 'vocab.${tok}': expected a non-negative integer id, got ${JSON.stringify(id)}`);
        if (id >= MAX_TOKEN_ID) throw new TokenizerError(`${where}: vocab id ${id} of '${tok}' is too large`);
        table.set(tok, id);
      }
      this.vocab = table;
    }
    this.idToTok = this.vocab.idToToken;
    this.unkId = this.unkToken === null ? undefined : this.vocab.get(this.unkToken);
    for (let b = 0; b < 256; b++) this.byteIds[b] = this.vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    const merges = scanned ? scanned.left : (o.merges ?? []);
    if (!Array.isArray(merges)) throw new TokenizerError(`${where}: 'merges': expected an array`);
    if (merges.length >= 2 ** 21) throw new TokenizerError(`${where}: ${merges.length} merges are more than this implementation supports (2^21)`);
    this.pairs = new PairTable(merges.length);
    this.newIds = new Int32Array(merges.length);
    if (scanned) {
      const { left, right, merged } = scanned;
      for (let rank = 0; rank < left.length; rank++) {
        let id = merged[rank]!;
        const a = left[rank]!;
        const b = right[rank]!;
        if (id < 0 || this.prefix) {
          const ta = this.idToTok[a]!;
          const tb = this.idToTok[b]!;
          const m = this.mergedToken(ta, tb);
          id = this.vocab.get(m) ?? -1;
          if (id < 0) throw new TokenizerError(`${where}: merges[${rank}] makes '${m}', which is not in the vocab`);
        }
        this.pairs.set(a, b, rank);
        this.newIds[rank] = id;
      }
    } else
      for (let rank = 0; rank < merges.length; rank++) {
        const m: unknown = merges[rank];
        if (typeof m === 'string') {
          const sp = m.indexOf(' ');
          if (sp < 0 || m.indexOf(' ', sp + 1) >= 0) throw new TokenizerError(`${where}: merges[${rank}] ${JSON.stringify(m)} is not two tokens separated by one space`);
          this.addMerge(rank, m.slice(0, sp), m.slice(sp + 1));
        } else if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') this.addMerge(rank, m[0], m[1]);
        else throw new TokenizerError(`${where}: 'merges.${rank}': expected "a b" or ["a", "b"], got ${JSON.stringify(m)}`);
      }
  }

  /** The token a merge of `a` and `b` makes (`b` without the continuing-subword prefix). */
  private mergedToken(a: string, b: string): string {
    const prefix = this.prefix;
    return prefix && b.startsWith(prefix) ? a + b.slice(prefix.length) : a + b;
  }

  /** Merge `rank` of tokens `a` and `b`: its pair in `pairs`, the id it makes in `newIds`. */
  private addMerge(rank: number, a: string, b: string): void {
    const ia = this.vocab.get(a);
    const ib = this.vocab.get(b);
    if (ia === undefined) throw new TokenizerError(`${this.where}: merges[${rank}] uses '${a}', which is not in the vocab`);
    if (ib === undefined) throw new TokenizerError(`${this.where}: merges[${rank}] uses '${b}', which is not in the vocab`);
    const merged = this.mergedToken(a, b);
    const id = this.vocab.get(merged);
    if (id === undefined) throw new TokenizerError(`${this.where}: merges[${rank}] makes '${merged}', which is not in the vocab`);
    this.pairs.set(ia, ib, rank);
    this.newIds[rank] = id;
  }

  /** Model vocabulary size (highest id + 1). */
  get size(): number {
    return this.idToTok.length;
  }

  idToToken(id: number): string | undefined {
    return this.idToTok[id];
  }

  /** Token ids of one pre-tokenized word. */
  tokenize(word: string): number[] {
    if (word.length === 0) return [];
    if (this.ignoreMerges) {
      const id = this.vocab.get(word);
      if (id !== undefined) return [id];
    }
    const hit = this.cache.get(word);
    if (hit) return hit;
    const ids = this.merge(this.symbols(word));
    if (word.length <= CACHE_WORD_LENGTH) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(word, ids);
    }
    return ids;
  }

  /** Initial symbols: one per character (prefix/suffix added), bytes for unknown characters with byte
   *  fallback, else the unknown token (fused when `fuse_unk`); characters with none of these are dropped. */
  private symbols(word: string): number[] {
    const out: number[] = [];
    if (!this.prefix && !this.suffix) {
      // fast path: every character is in the vocabulary
      let all = true;
      for (let i = 0; i < word.length; i++) {
        const c = word.charCodeAt(i);
        let ch: string;
        const lo = c >= 0xd800 && c <= 0xdbff && i + 1 < word.length ? word.charCodeAt(i + 1) : 0;
        if (lo >= 0xdc00 && lo <= 0xdfff) {
          ch = word.slice(i, i + 2);
          i++;
        } else ch = word[i]!;
        const id = this.vocab.get(ch);
        if (id === undefined) {
          all = false;
          break;
        }
        out.push(id);
      }
      if (all) return out;
      out.length = 0;
    }
    const chars = [...word];
    let pendingUnk = false;
    const unk = (): number => {
      if (this.unkId === undefined) throw new TokenizerError(`${this.where}: the unk_token '${this.unkToken}' is not in the vocab`);
      return this.unkId;
    };
    for (let i = 0; i < chars.length; i++) {
      let s = chars[i]!;
      if (i > 0 && this.prefix) s = this.prefix + s;
      if (i === chars.length - 1 && this.suffix) s += this.suffix;
      const id = this.vocab.get(s);
      if (id !== undefined) {
        if (pendingUnk) out.push(unk());
        pendingUnk = false;
        out.push(id);
        continue;
      }
      if (this.byteFallback) {
        const bytes = UTF8.encode(s); // not Buffer: browsers load this too
        const ids: number[] = [];
        for (const b of bytes) {
          const bid = this.byteIds[b];
          if (bid === undefined) break;
          ids.push(bid);
        }
        if (ids.length === bytes.length) {
          // the byte tokens go in; a pending unknown stays pending, as in the reference
          out.push(...ids);
          continue;
        }
      }
      if (this.unkToken !== null) {
        if (pendingUnk && !this.fuseUnk) out.push(unk());
        unk();
        pendingUnk = true;
      }
    }
    if (pendingUnk) out.push(unk());
    return out;
  }

  // scratch space reused across words (allocating typed arrays per word dominated the cost of short words)
  private sId = new Int32Array(256);
  private sPrev = new Int32Array(256);
  private sNext = new Int32Array(256);
  private sAlive = new Uint8Array(256);
  private heap = new MergeHeap();

  private merge(ids: number[]): number[] {
    const n = ids.length;
    if (n < 2 || this.pairs.size === 0) return ids;
    if (this.sId.length < n) {
      let cap = this.sId.length;
      while (cap < n) cap *= 2;
      this.sId = new Int32Array(cap);
      this.sPrev = new Int32Array(cap);
      this.sNext = new Int32Array(cap);
      this.sAlive = new Uint8Array(cap);
    }
    const id = this.sId;
    const prev = this.sPrev;
    const next = this.sNext;
    const alive = this.sAlive;
    for (let i = 0; i < n; i++) {
      id[i] = ids[i]!;
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
      alive[i] = 1;
    }
    const heap = this.heap;
    heap.size = 0;
    for (let i = 0; i + 1 < n; i++) {
      const r = this.pairs.get(id[i]!, id[i + 1]!);
      if (r >= 0) heap.push(r, i, this.newIds[r]!);
    }
    while (heap.size) {
      const pos = heap.pop();
      const newId = heap.topId;
      if (!alive[pos]) continue;
      const nx = next[pos]!;
      if (nx < 0) continue;
      const r = this.pairs.get(id[pos]!, id[nx]!);
      if (r < 0 || this.newIds[r] !== newId) continue;
      id[pos] = newId;
      alive[nx] = 0;
      const nn = next[nx]!;
      next[pos] = nn;
      if (nn >= 0) prev[nn] = pos;
      const pv = prev[pos]!;
      if (pv >= 0) {
        const rp = this.pairs.get(id[pv]!, id[pos]!);
        if (rp >= 0) heap.push(rp, pv, this.newIds[rp]!);
      }
      if (nn >= 0) {
        const rn = this.pairs.get(id[pos]!, id[nn]!);
        if (rn >= 0) heap.push(rn, pos, this.newIds[rn]!);
      }
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]!) out.push(id[i]!);
    return out;
  }
}
