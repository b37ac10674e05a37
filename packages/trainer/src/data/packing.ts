import { DataError } from '../errors';
import { IGNORE_INDEX } from './dataset';

/** A tokenized document: its ids and, optionally, per-token labels (`IGNORE_INDEX` where masked). */
export interface TokenizedDocument {
  ids: ArrayLike<number>;
  labels?: ArrayLike<number>;
}

/** How documents become fixed-length windows. */
export interface PackOptions {
  /** Tokens per window. */
  seqLen: number;
  /** Separator appended after every document that does not already end with it (usually the EOS id; it is a
   *  target, so the model learns where documents end). `null`/absent: no separator. */
  eosId?: number | null;
  /** Prepended to every document that does not already start with it (absent: none; tokenizers that add
   *  BOS themselves need none). */
  bosId?: number | null;
  /**
   * `true` (default): concatenate the documents (with separators) into one stream cut into consecutive
   * windows, so every window is full (HF `group_texts`). `false`: one window per document, truncated to
   * `seqLen` and padded (for prompt/response data where a prompt must stay with its response).
   */
  pack?: boolean;
  /** Id written into padding positions (their labels are `IGNORE_INDEX`). Default `eosId`, else 0. */
  padId?: number;
  /** Packing: drop the last partial window instead of padding it (HF drops it). Default false. */
  dropRemainder?: boolean;
}

/** Sizes of a packed dataset. */
export interface PackStats {
  documents: number;
  /** Tokens in the documents, separators included. */
  tokens: number;
  /** Positions whose label is not ignored. */
  targets: number;
  /** Padding positions. */
  padding: number;
  /** Tokens cut off by truncation (`pack: false`) or a dropped remainder. */
  dropped: number;
}

export function checkId(v: number, what: string): void {
  if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) throw new DataError(`${what}: ${v} is not a 32-bit integer token id`);
}

/** Normalise a document: add BOS / separator, build labels. */
function prepare(doc: ArrayLike<number> | TokenizedDocument, i: number, o: PackOptions): { ids: Int32Array; labels: Int32Array } {
  const d: TokenizedDocument = typeof doc === 'object' && doc !== null && 'ids' in doc ? (doc as TokenizedDocument) : { ids: doc as ArrayLike<number> };
  if (d.labels && d.labels.length !== d.ids.length)
    throw new DataError(`document ${i}: ${d.labels.length} labels for ${d.ids.length} ids`);
  if (d.ids.length === 0) return { ids: new Int32Array(0), labels: new Int32Array(0) };
  const bos = o.bosId ?? null;
  const eos = o.eosId ?? null;
  const addBos = bos !== null && d.ids[0] !== bos ? 1 : 0;
  const addEos = eos !== null && d.ids[d.ids.length - 1] !== eos ? 1 : 0;
  const n = d.ids.length + addBos + addEos;
  const ids = new Int32Array(n);
  const labels = new Int32Array(n);
  let k = 0;
  if (addBos) {
    ids[k] = bos!;
    // a target like every token (HF labels = input_ids), unless the document starts masked
    labels[k++] = d.labels && d.labels[0] === IGNORE_INDEX ? IGNORE_INDEX : bos!;
  }
  for (let j = 0; j < d.ids.length; j++, k++) {
    const v = d.ids[j]!;
    if (!Number.isInteger(v)) checkId(v, `document ${i}, token ${j}`);
    ids[k] = v;
    labels[k] = d.labels ? d.labels[j]! : v;
  }
  if (addEos) {
    ids[k] = eos!;
    labels[k] = eos!;
  }
  return { ids, labels };
}

/** Packed windows: `tokens` and `labels` of `windows * seqLen`. */
export interface Packed {
  tokens: Int32Array;
  labels: Int32Array;
  stats: PackStats;
}

/** Turn documents into windows of `opts.seqLen` (see `PackOptions`). */
export function packDocuments(sequences: Iterable<ArrayLike<number> | TokenizedDocument>, opts: PackOptions): Packed {
  const { seqLen } = opts;
  if (!Number.isInteger(seqLen) || seqLen < 1) throw new DataError(`seqLen must be a positive integer, got ${seqLen}`);
  const pad = opts.padId ?? opts.eosId ?? 0;
  checkId(pad, 'padId');
  const docs: { ids: Int32Array; labels: Int32Array }[] = [];
  let total = 0;
  let i = 0;
  for (const s of sequences) {
    const d = prepare(s, i++, opts);
    docs.push(d);
    total += d.ids.length;
  }
  const stats: PackStats = { documents: i, tokens: total, targets: 0, padding: 0, dropped: 0 };
  let tokens: Int32Array;
  let labels: Int32Array;
  if (opts.pack ?? true) {
    const windows = opts.dropRemainder ? Math.floor(total / seqLen) : Math.ceil(total / seqLen);
    tokens = new Int32Array(windows * seqLen).fill(pad);
    labels = new Int32Array(windows * seqLen).fill(IGNORE_INDEX);
    let k = 0;
    for (const d of docs) {
      const room = Math.min(d.ids.length, tokens.length - k);
      if (room <= 0) break;
      tokens.set(d.ids.subarray(0, room), k);
      labels.set(d.labels.subarray(0, room), k);
      k += room;
    }
    stats.padding = tokens.length - Math.min(total, tokens.length);
    stats.dropped = Math.max(0, total - tokens.length);
  } else {
    const kept = docs.filter((d) => d.ids.length > 0);
    tokens = new Int32Array(kept.length * seqLen).fill(pad);
    labels = new Int32Array(kept.length * seqLen).fill(IGNORE_INDEX);
    kept.forEach((d, w) => {
      const n = Math.min(d.ids.length, seqLen);
      tokens.set(d.ids.subarray(0, n), w * seqLen);
      labels.set(d.labels.subarray(0, n), w * seqLen);
      stats.padding += seqLen - n;
      stats.dropped += d.ids.length - n;
    });
  }
  // targets the model sees after its label shift: positions t >= 1 of each window
  for (let w = 0; w < labels.length; w += seqLen) for (let t = 1; t < seqLen; t++) if (labels[w + t] !== IGNORE_INDEX) stats.targets++;
  return { tokens, labels, stats };
}
