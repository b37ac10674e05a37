// Training windows from text or JSONL, as `rusty finetune` builds them: plain text is one document (packed into
// full windows), JSONL lines are {"text"} documents or {"prompt","response"} pairs whose prompt tokens are masked
// out of the loss, one padded window per document (`--pack auto`). EOS ends every document.
import { DataError } from './errors';

export const IGNORE_INDEX = -100;

/** What a page's data needs from a tokenizer. */
export interface PageTokenizer {
  encode(text: string): number[];
  readonly eosTokenId?: number;
}

/** Fixed-length windows: ids and labels (IGNORE_INDEX where not learned), row-major [n, seqLen]. */
export interface Windows {
  ids: Int32Array;
  labels: Int32Array;
  count: number;
  seqLen: number;
  documents: number;
  tokens: number;
  targets: number;
}

interface Doc {
  prompt?: string;
  text: string;
}

/** Parse JSONL (every non-empty line an object with `text`, or `prompt` and `response`). */
export function parseJsonl(name: string, text: string): Doc[] {
  const docs: Doc[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return;
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(line);
    } catch (e) {
      throw new DataError(`${name}:${i + 1}: not valid JSON (${(e as Error).message})`);
    }
    if (typeof r?.prompt === 'string' && typeof r?.response === 'string') docs.push({ prompt: r.prompt, text: r.response });
    else if (typeof r?.text === 'string') docs.push({ text: r.text });
    else throw new DataError(`${name}:${i + 1}: expected a string field 'text', or 'prompt' and 'response'`);
  });
  return docs;
}

/** Whether text looks like JSONL (first non-empty line is a JSON object). */
export const looksLikeJsonl = (text: string): boolean => /^\s*\{/.test(text.split(/\r?\n/).find((l) => l.trim()) ?? '');

function tokenize(tok: PageTokenizer, d: Doc): { ids: number[]; labels: number[] } {
  if (d.prompt === undefined) {
    const ids = tok.encode(d.text);
    return { ids, labels: [...ids] };
  }
  const ids = tok.encode(d.prompt + d.text);
  const p = tok.encode(d.prompt);
  let shared = 0;
  while (shared < p.length && shared < ids.length && p[shared] === ids[shared]) shared++;
  return { ids, labels: ids.map((v, i) => (i < shared ? IGNORE_INDEX : v)) };
}

/**
 * Documents -> windows of `seqLen`. `pack`: concatenate into full windows (the last one padded), else one
 * window per document (truncated, padded). EOS is appended to documents that do not end with it.
 */
export function buildWindows(name: string, text: string, tok: PageTokenizer, seqLen: number, pack: 'auto' | 'yes' | 'no'): Windows {
  const jsonl = looksLikeJsonl(text);
  const docs = jsonl ? parseJsonl(name, text) : [{ text }];
  const packed = pack === 'auto' ? !jsonl : pack === 'yes';
  const eos = tok.eosTokenId ?? null;
  const pad = eos ?? 0;
  const seqs: { ids: number[]; labels: number[] }[] = [];
  let tokens = 0;
  for (const d of docs) {
    if (!d.text.trim() && !d.prompt) continue;
    const t = tokenize(tok, d);
    if (eos !== null && t.ids.at(-1) !== eos) {
      t.ids.push(eos);
      t.labels.push(eos);
    }
    tokens += t.ids.length;
    seqs.push(t);
  }
  const rows: { ids: number[]; labels: number[] }[] = [];
  if (packed) {
    const ids = seqs.flatMap((s) => s.ids);
    const labels = seqs.flatMap((s) => s.labels);
    for (let o = 0; o < ids.length; o += seqLen) rows.push({ ids: ids.slice(o, o + seqLen), labels: labels.slice(o, o + seqLen) });
  } else for (const s of seqs) rows.push({ ids: s.ids.slice(0, seqLen), labels: s.labels.slice(0, seqLen) });
  const count = rows.length;
  const out: Windows = { ids: new Int32Array(count * seqLen).fill(pad), labels: new Int32Array(count * seqLen).fill(IGNORE_INDEX), count, seqLen, documents: seqs.length, tokens, targets: 0 };
  rows.forEach((r, i) => {
    out.ids.set(r.ids, i * seqLen);
    out.labels.set(r.labels, i * seqLen);
  });
  // a target is a label the shifted loss uses: positions 1.. of each window
  for (let i = 0; i < count; i++) for (let t = 1; t < seqLen; t++) if (out.labels[i * seqLen + t] !== IGNORE_INDEX) out.targets++;
  if (!count || !out.targets) throw new DataError(`${name}: no text to train on (${docs.length} documents, ${tokens} tokens)`);
  return out;
}

/** A mulberry32 stream (the seeded order of the windows). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The batch of micro-step `k` (0-based over the whole run): windows in a seeded shuffled order per epoch, so
 * any step can be recomputed after a reload without saving the loader's state.
 */
export function batchAt(w: Windows, batchSize: number, k: number, seed: number): { ids: Int32Array; labels: Int32Array; batch: number } {
  const b = Math.min(batchSize, w.count);
  const perEpoch = Math.max(1, Math.floor(w.count / b));
  const epoch = Math.floor(k / perEpoch);
  const pos = (k % perEpoch) * b;
  const order = [...Array(w.count).keys()];
  const r = rng(seed * 7919 + epoch);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const ids = new Int32Array(b * w.seqLen);
  const labels = new Int32Array(b * w.seqLen);
  for (let i = 0; i < b; i++) {
    const row = order[pos + i]!;
    ids.set(w.ids.subarray(row * w.seqLen, (row + 1) * w.seqLen), i * w.seqLen);
    labels.set(w.labels.subarray(row * w.seqLen, (row + 1) * w.seqLen), i * w.seqLen);
  }
  return { ids, labels, batch: b };
}
