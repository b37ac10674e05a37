import { createHash } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import { DataError } from '../errors';
import { IGNORE_INDEX } from './dataset';
import { filterPaths } from './glob';
import type { TokenizedDocument } from './packing';

/**
 * What the data pipeline needs of a tokenizer: `encode(text)` (with the special tokens the model expects, like
 * HF's `add_special_tokens=True`) and, optionally, the EOS/BOS ids. `@rusty/loader`'s `Tokenizer` fits
 * (`eosTokenId`/`bosTokenId`), as does any object with `eosId`/`bosId`.
 */
export interface TextTokenizer {
  encode(text: string): ArrayLike<number>;
  eosId?: number | null;
  bosId?: number | null;
  eosTokenId?: number | null;
  bosTokenId?: number | null;
  /** A string that changes whenever the tokenizer's output can change (cache key). */
  fingerprint?: string;
  /** The tokenizer's full definition (hashed for the cache key when there is no `fingerprint`). */
  toJSON?(): unknown;
}

/** Options of `tokenizeCorpus` (and `TextDataset.fromCorpus`). */
export interface CorpusOptions {
  tokenizer: TextTokenizer;
  /** Globs of files to take from directory sources, relative to that directory (`**\/*.ts`, `*.md`); default all. */
  include?: string[];
  /** Globs of files to leave out of directory sources. Hidden entries (`.git`, ...) and `node_modules` are always skipped. */
  exclude?: string[];
  /** `auto` (default): `.jsonl`/`.ndjson` files are JSONL, the rest plain text (one document per file). */
  format?: 'auto' | 'text' | 'jsonl';
  /** JSONL field names (defaults `text`, `prompt`, `response`). */
  textField?: string;
  promptField?: string;
  responseField?: string;
  /**
   * Directory of the token cache (a file per corpus, named by the hash of the content and of the tokenizer).
   * Default `$RUSTY_CACHE_DIR`, else `$XDG_CACHE_HOME/rusty/tokens`, else `~/.cache/rusty/tokens`; `false`: no cache.
   */
  cacheDir?: string | false;
}

/** Where a tokenized corpus came from. */
export interface CorpusInfo {
  /** Absolute paths of the files read, in order. */
  files: string[];
  documents: number;
  tokens: number;
  /** sha256 of the file names and contents (and the JSONL field names). */
  contentHash: string;
  /** sha256 identifying the tokenizer. */
  tokenizerHash: string;
  cacheFile: string | null;
  /** True when the tokens came from the cache (no tokenization ran). */
  cacheHit: boolean;
}

/** Tokenized documents and how they were made. */
export interface TokenizedCorpus {
  documents: TokenizedDocument[];
  info: CorpusInfo;
}

const CACHE_VERSION = 1;
const SKIP_DIRS = new Set(['node_modules']);

/** The default token-cache directory (see `CorpusOptions.cacheDir`). */
export function defaultCacheDir(): string {
  if (process.env.RUSTY_CACHE_DIR) return process.env.RUSTY_CACHE_DIR;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'rusty', 'tokens');
}

/** EOS / BOS ids of a tokenizer (`eosId` or `eosTokenId`), or null. */
export function tokenizerSpecialIds(tok: TextTokenizer): { eosId: number | null; bosId: number | null } {
  return { eosId: tok.eosId ?? tok.eosTokenId ?? null, bosId: tok.bosId ?? tok.bosTokenId ?? null };
}

/**
 * A hash that identifies what a tokenizer produces: its `fingerprint`, else its `toJSON()` definition, else
 * (for tokenizers that expose neither) the ids it gives for a fixed probe text covering ASCII, accents, CJK,
 * emoji, whitespace runs and code.
 */
export function tokenizerHash(tok: TextTokenizer): string {
  const h = createHash('sha256');
  const ids = tokenizerSpecialIds(tok);
  h.update(`eos=${ids.eosId};bos=${ids.bosId};`);
  if (typeof tok.fingerprint === 'string') h.update('fp:' + tok.fingerprint);
  else if (typeof tok.toJSON === 'function') h.update('json:' + stableStringify(tok.toJSON()));
  else {
    const probe =
      'The quick brown fox jumps over the lazy dog. 0123456789 <s></s> <|endoftext|>\n\n\tcafé naïve Ünïcödé ' +
      '日本語のテキスト 中文 한국어 🙂🚀 function f(x) { return x ** 2; } // code\r\n    indented   spaces';
    h.update('probe:' + Array.from(tok.encode(probe)).join(','));
  }
  return h.digest('hex');
}

function stableStringify(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return '[' + v.map(stableStringify).join(',') + ']';
  const o = v as Record<string, unknown>;
  return '{' + Object.keys(o).sort().map((k) => JSON.stringify(k) + ':' + stableStringify(o[k])).join(',') + '}';
}

async function walk(root: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(join(root, rel), { withFileTypes: true });
  } catch (e) {
    throw new DataError(`cannot read directory ${join(root, rel)}: ${(e as Error).message}`, { cause: e });
  }
  for (const e of entries) {
    if (e.name.startsWith('.') || SKIP_DIRS.has(e.name)) continue;
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(root, r)));
    else if (e.isFile()) out.push(r);
  }
  return out;
}

const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * The files of a corpus, in a deterministic order: file sources as given, directory sources walked
 * recursively with `include`/`exclude` globs applied to paths relative to the directory, sorted by path.
 * Returns `[absolutePath, nameForHashing]` pairs.
 */
export async function listCorpusFiles(sources: string | readonly string[], include?: readonly string[], exclude?: readonly string[]): Promise<[string, string][]> {
  const list = typeof sources === 'string' ? [sources] : sources;
  if (!list.length) throw new DataError('a corpus needs at least one file or directory');
  const out: [string, string][] = [];
  for (const src of list) {
    const abs = resolve(src);
    let st;
    try {
      st = await stat(abs);
    } catch (e) {
      throw new DataError(`corpus source ${src} does not exist or cannot be read: ${(e as Error).message}`, { cause: e });
    }
    if (st.isDirectory()) {
      const files = filterPaths((await walk(abs)).sort(byteOrder), include, exclude);
      if (!files.length)
        throw new DataError(
          `corpus directory ${src} has no files matching ${include?.length ? `include ${JSON.stringify(include)}` : 'anything'}` +
            (exclude?.length ? ` (exclude ${JSON.stringify(exclude)})` : ''),
        );
      for (const f of files) out.push([join(abs, ...f.split('/')), `${basename(abs)}/${f}`]);
    } else out.push([abs, basename(abs)]);
  }
  return out;
}

interface RawDoc {
  text: string;
  /** Text whose tokens are masked out of the loss (the prompt), prepended to `text`. */
  prompt?: string;
}

function parseJsonl(file: string, text: string, o: Required<Pick<CorpusOptions, 'textField' | 'promptField' | 'responseField'>>): RawDoc[] {
  const docs: RawDoc[] = [];
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new DataError(`${file}:${i + 1}: not valid JSON (${(e as Error).message})`);
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new DataError(`${file}:${i + 1}: expected a JSON object`);
    const r = v as Record<string, unknown>;
    if (typeof r[o.promptField] === 'string' && typeof r[o.responseField] === 'string')
      docs.push({ prompt: r[o.promptField] as string, text: r[o.responseField] as string });
    else if (typeof r[o.textField] === 'string') docs.push({ text: r[o.textField] as string });
    else
      throw new DataError(
        `${file}:${i + 1}: expected a string field '${o.textField}', or '${o.promptField}' and '${o.responseField}'; ` +
          `the object has ${Object.keys(r).length ? Object.keys(r).map((k) => `'${k}'`).join(', ') : 'no fields'}`,
      );
  });
  return docs;
}

/**
 * Tokenize a document. A prompt/response pair is encoded as one text (`prompt + response`, so the tokens are
 * what the model will see); the tokens it shares with the prompt encoded alone are masked out of the loss.
 */
function tokenizeDoc(tok: TextTokenizer, d: RawDoc, where: string): TokenizedDocument {
  const enc = (s: string): Int32Array => {
    let ids: ArrayLike<number>;
    try {
      ids = tok.encode(s);
    } catch (e) {
      throw new DataError(`${where}: the tokenizer failed: ${(e as Error).message}`, { cause: e });
    }
    return Int32Array.from(ids);
  };
  if (d.prompt === undefined) return { ids: enc(d.text) };
  const full = enc(d.prompt + d.text);
  const p = enc(d.prompt);
  let m = 0;
  while (m < p.length && m < full.length && p[m] === full[m]) m++;
  const labels = Int32Array.from(full);
  labels.fill(IGNORE_INDEX, 0, m);
  return { ids: full, labels };
}

interface CacheFile {
  v: number;
  contentHash: string;
  tokenizerHash: string;
  offsets: Uint8Array;
  tokens: Uint8Array;
  masked: Uint8Array;
}

function aligned<T extends Int32Array | Uint32Array>(Ctor: { new (b: ArrayBuffer): T }, bytes: Uint8Array): T {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Ctor(copy.buffer);
}

const asBytes = (a: Int32Array | Uint32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

async function readCache(path: string, contentHash: string, tokHash: string): Promise<TokenizedDocument[] | null> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch {
    return null;
  }
  try {
    const c = decode(bytes) as CacheFile;
    if (c.v !== CACHE_VERSION || c.contentHash !== contentHash || c.tokenizerHash !== tokHash) return null;
    const offsets = aligned(Uint32Array, c.offsets);
    const tokens = aligned(Int32Array, c.tokens);
    const masked = aligned(Uint32Array, c.masked);
    if (offsets.length !== masked.length + 1 || offsets[offsets.length - 1] !== tokens.length) return null;
    const docs: TokenizedDocument[] = [];
    for (let i = 0; i < masked.length; i++) {
      const ids = tokens.subarray(offsets[i]!, offsets[i + 1]!);
      const m = masked[i]!;
      if (!m) docs.push({ ids });
      else {
        const labels = Int32Array.from(ids);
        labels.fill(IGNORE_INDEX, 0, m);
        docs.push({ ids, labels });
      }
    }
    return docs;
  } catch {
    return null; // a damaged cache is rebuilt
  }
}

async function writeCache(path: string, dir: string, docs: TokenizedDocument[], contentHash: string, tokHash: string): Promise<void> {
  const offsets = new Uint32Array(docs.length + 1);
  const masked = new Uint32Array(docs.length);
  docs.forEach((d, i) => {
    offsets[i + 1] = offsets[i]! + d.ids.length;
    if (d.labels) {
      let m = 0;
      while (m < d.labels.length && d.labels[m] === IGNORE_INDEX) m++;
      masked[i] = m;
    }
  });
  const tokens = new Int32Array(offsets[docs.length]!);
  docs.forEach((d, i) => tokens.set(d.ids, offsets[i]!));
  const body: CacheFile = { v: CACHE_VERSION, contentHash, tokenizerHash: tokHash, offsets: asBytes(offsets), tokens: asBytes(tokens), masked: asBytes(masked) };
  await mkdir(dir, { recursive: true });
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(encode(body));
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
}

/**
 * Read a corpus (text files, directories of files filtered by globs, JSONL files with `{"text"}` or
 * `{"prompt","response"}` lines) and tokenize every document once. The tokens are cached in a file keyed by the
 * content hash and the tokenizer hash, so a second call with the same files and tokenizer reads the cache
 * instead of tokenizing. Prompt tokens of prompt/response pairs get `IGNORE_INDEX` labels.
 */
export async function tokenizeCorpus(sources: string | readonly string[], opts: CorpusOptions): Promise<TokenizedCorpus> {
  const fields = { textField: opts.textField ?? 'text', promptField: opts.promptField ?? 'prompt', responseField: opts.responseField ?? 'response' };
  const format = opts.format ?? 'auto';
  const files = await listCorpusFiles(sources, opts.include, opts.exclude);
  const h = createHash('sha256');
  h.update(`rusty-corpus;v${CACHE_VERSION};format=${format};${JSON.stringify(fields)}\0`);
  const contents: string[] = [];
  for (const [abs, name] of files) {
    let buf: Buffer;
    try {
      buf = await readFile(abs);
    } catch (e) {
      throw new DataError(`cannot read corpus file ${abs}: ${(e as Error).message}`, { cause: e });
    }
    h.update(`${name}\0${buf.length}\0`);
    h.update(buf);
    contents.push(buf.toString('utf8'));
  }
  const contentHash = h.digest('hex');
  const tokHash = tokenizerHash(opts.tokenizer);
  const dir = opts.cacheDir === false ? null : (opts.cacheDir ?? defaultCacheDir());
  const key = createHash('sha256').update(`${contentHash}:${tokHash}`).digest('hex').slice(0, 32);
  const cacheFile = dir ? join(dir, `corpus-${key}.msgpack`) : null;
  const info: Omit<CorpusInfo, 'documents' | 'tokens' | 'cacheHit'> = {
    files: files.map(([a]) => a),
    contentHash,
    tokenizerHash: tokHash,
    cacheFile,
  };
  if (cacheFile) {
    const docs = await readCache(cacheFile, contentHash, tokHash);
    if (docs) return { documents: docs, info: { ...info, documents: docs.length, tokens: count(docs), cacheHit: true } };
  }
  const docs: TokenizedDocument[] = [];
  files.forEach(([abs], i) => {
    const text = contents[i]!;
    const jsonl = format === 'jsonl' || (format === 'auto' && /\.(jsonl|ndjson)$/i.test(abs));
    const raws = jsonl ? parseJsonl(abs, text, fields) : text.length ? [{ text }] : [];
    raws.forEach((r, j) => {
      const d = tokenizeDoc(opts.tokenizer, r, jsonl ? `${abs}: document ${j + 1}` : abs);
      if (d.ids.length) docs.push(d);
    });
  });
  if (cacheFile && dir) {
    try {
      await writeCache(cacheFile, dir, docs, contentHash, tokHash);
    } catch (e) {
      throw new DataError(`cannot write the token cache ${cacheFile}: ${(e as Error).message} (pass cacheDir: false to disable it)`, { cause: e });
    }
  }
  return { documents: docs, info: { ...info, documents: docs.length, tokens: count(docs), cacheHit: false } };
}

function count(docs: TokenizedDocument[]): number {
  let n = 0;
  for (const d of docs) n += d.ids.length;
  return n;
}
