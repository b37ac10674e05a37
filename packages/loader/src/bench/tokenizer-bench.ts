/**
 * Tokenizer benchmark: builds synthetic tokenizers in memory (real ones cannot be downloaded here) and times
 *   - load:   Tokenizer.fromFile / fromJSON of a Qwen-sized byte-level BPE (150,000 vocabulary entries,
 *             ~150,000 merges, NFC + Split + ByteLevel like Qwen2/3), with merges in both the `[a, b]` and the
 *             older `"a b"` form; fromJSON of an already parsed object is timed too (no JSON.parse);
 *   - encode with a Gemma-3-sized added-token list: the fixture tokenizers of ../shared/fixtures/tokenizers plus
 *             6,400 added tokens that start with `<` (`<unused0>` ..., `<start_of_image>`, HTML tags ...):
 *             20,000 `<s>` (`s20000_added`: `<s>` is an added token, the metaspace fixture; `s20000_model`: it is
 *             not one, the byte-level fixture), prose, the same prose as HTML (lots of `<`), and adversarial
 *             near-misses (`<unused` repeated);
 *   - decode of a long id sequence.
 * Each timing is the median of `--reps` runs after one warm-up run (the first run's time is reported too), in
 * milliseconds (and the median CPU time of the process); throughput in MB/s (10^6 UTF-16 code units per second).
 * Prints ONE JSON object, with the CPU model and the load average (other work on the machine slows wall times).
 *
 *   node tokenizer-bench.js [--quick] [--reps 7] [--write-dir DIR] [--fixtures DIR]
 *
 * `--write-dir DIR` also writes the synthetic tokenizers and texts there (qwen-like.tokenizer.json,
 * gemma-like-*.tokenizer.json, texts.json) so that tokenizer-hf.py can time Hugging Face `tokenizers` on the
 * same inputs. Unknown arguments (those `rusty bench` passes to every program) are ignored.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BYTE_TO_CHAR, Tokenizer } from '../tokenizer';

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq?.slice(name.length + 3);
}

const quick = process.argv.includes('--quick');
const reps = Number(argValue('reps') ?? (quick ? 3 : 7));
if (!Number.isInteger(reps) || reps < 1) throw new Error('--reps must be a positive integer');
const writeDir = argValue('write-dir');

/** The fixture tokenizers: `--fixtures DIR`, else `shared/fixtures/tokenizers` beside a directory above this
 *  program (the repository checkout, whether run from src/ or dist/); null outside a checkout. */
function fixtureTokenizers(): string | null {
  const given = argValue('fixtures');
  if (given) return given;
  for (let d = dirname(fileURLToPath(import.meta.url)); ; d = dirname(d)) {
    for (const c of [join(d, 'shared/fixtures/tokenizers'), join(d, '../shared/fixtures/tokenizers')]) if (existsSync(c)) return resolve(c);
    if (dirname(d) === d) return null;
  }
}
const FIXTURE_TOKENIZERS = fixtureTokenizers();

/** A small deterministic generator (mulberry32). */
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

interface Timing {
  first_ms: number;
  median_ms: number;
  min_ms: number;
  /** Median CPU time of this process (user + system) per run: less sensitive than wall time to other load on
   *  the machine, though it includes the garbage collector's helper threads. */
  cpu_median_ms: number;
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
};
const r3 = (x: number) => +x.toFixed(3);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function summary(first: number, ts: number[], cpus: number[]): Timing {
  return { first_ms: r3(first), median_ms: r3(median(ts)), min_ms: r3(Math.min(...ts)), cpu_median_ms: r3(median(cpus)) };
}

function time(fn: () => unknown, n = reps): Timing {
  const t0 = performance.now();
  fn();
  const first = performance.now() - t0;
  const ts: number[] = [];
  const cpus: number[] = [];
  for (let r = 0; r < n; r++) {
    const c = cpuMs();
    const t = performance.now();
    fn();
    ts.push(performance.now() - t);
    cpus.push(cpuMs() - c);
  }
  return summary(first, ts, cpus);
}

async function timeAsync(fn: () => Promise<unknown>, n = reps): Promise<Timing> {
  const t0 = performance.now();
  await fn();
  const first = performance.now() - t0;
  const ts: number[] = [];
  const cpus: number[] = [];
  for (let r = 0; r < n; r++) {
    const c = cpuMs();
    const t = performance.now();
    await fn();
    ts.push(performance.now() - t);
    cpus.push(cpuMs() - c);
  }
  return summary(first, ts, cpus);
}

const QWEN_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/**
 * A Qwen-sized byte-level BPE: the 256 byte symbols, then merges of two earlier tokens (biased towards short,
 * early ones, as trained merges are) until `size` tokens; 22 special added tokens after them, as in Qwen2.
 */
function qwenLike(size: number, stringMerges: boolean): Record<string, unknown> {
  const r = rng(1234);
  const tokens: string[] = [...BYTE_TO_CHAR];
  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => (vocab[t] = i));
  const merges: (string | [string, string])[] = [];
  const pick = () => tokens[Math.floor(tokens.length * r() ** 3)]!;
  while (tokens.length < size) {
    const a = pick();
    const b = pick();
    const m = a + b;
    if (m.length > 16 || vocab[m] !== undefined) continue;
    vocab[m] = tokens.length;
    tokens.push(m);
    merges.push(stringMerges ? `${a} ${b}` : [a, b]);
  }
  const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>', '<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>'];
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, i) => ({ id: size + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: i < 14 })),
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: QWEN_SPLIT }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      ],
    },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
}

const HTML_TAGS = ['html', 'head', 'body', 'div', 'span', 'p', 'a', 'b', 'i', 'u', 'em', 'strong', 'code', 'pre', 'table', 'caption', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td', 'ul', 'ol', 'li', 'dl', 'dt', 'dd', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'section', 'article', 'header', 'footer', 'nav', 'img', 'br', 'hr', 'sup', 'sub', 'small', 'big', 'form', 'input', 'button', 'select', 'option', 'label', 'textarea', 'script', 'style', 'title', 'meta', 'link'];

/** One of the fixture tokenizers with a Gemma-3-sized list of added tokens that start with `<` appended. */
function gemmaLike(base: 'bytelevel' | 'metaspace'): Record<string, unknown> {
  const json = JSON.parse(readFileSync(join(FIXTURE_TOKENIZERS!, `${base}.tokenizer.json`), 'utf8')) as { added_tokens: { id: number }[]; model: { vocab: Record<string, number> } };
  let next = Math.max(...Object.values(json.model.vocab), ...json.added_tokens.map((t) => t.id)) + 1;
  const contents = ['<start_of_turn>', '<end_of_turn>', '<start_of_image>', '<end_of_image>', '<image_soft_token>', '<mask>', '<bos>', '<eos>', '<pad>', '[multimodal]'];
  for (const t of HTML_TAGS) contents.push(`<${t}>`, `</${t}>`);
  for (let i = 0; contents.length < 6400; i++) contents.push(`<unused${i}>`);
  const add = (content: string) => ({ id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  json.added_tokens.push(...contents.map(add));
  return json;
}

/** Prose of `n` UTF-16 units from a fixed list of words and punctuation. */
function prose(n: number, seed: number): string {
  const words = 'the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they you were her she there would their we him been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people Mr how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three'.split(' ');
  const r = rng(seed);
  const out: string[] = [];
  let len = 0;
  while (len < n) {
    let w = words[Math.floor(r() * words.length)]!;
    const x = r();
    if (x < 0.05) w += ',';
    else if (x < 0.1) w += '.';
    else if (x < 0.12) w = `${Math.floor(r() * 10000)}`;
    out.push(w);
    len += w.length + 1;
  }
  return out.join(' ').slice(0, n);
}

/** HTML of about `n` UTF-16 units: the prose cut into elements of the tags above (which are added tokens), with
 *  attributes and entities (which are not). */
function html(n: number, seed: number): string {
  const r = rng(seed);
  const text = prose(n, seed + 1);
  const parts: string[] = [];
  for (let i = 0; i < text.length; ) {
    const k = 5 + Math.floor(r() * 40);
    const tag = HTML_TAGS[Math.floor(r() * HTML_TAGS.length)]!;
    const attrs = r() < 0.3 ? `<${tag} class="c${Math.floor(r() * 100)}" id="x">` : `<${tag}>`;
    parts.push(`${attrs}${text.slice(i, i + k).replace(/ the /g, ' &amp; the ')}</${tag}>`);
    if (r() < 0.2) parts.push('<br/>\n');
    i += k;
  }
  return parts.join('').slice(0, n);
}

async function main(): Promise<void> {
  const result: Record<string, unknown> = { node: process.version, cpu: cpus()[0]?.model, cores: cpus().length, load_average: loadavg().map((x) => +x.toFixed(2)), reps };
  const texts: Record<string, string> = {};

  // --- encoding with a Gemma-3-sized added-token list (built on the fixture tokenizers) ---
  const gemma = FIXTURE_TOKENIZERS ? { metaspace: Tokenizer.fromJSON(gemmaLike('metaspace')), bytelevel: Tokenizer.fromJSON(gemmaLike('bytelevel')) } : null;
  const size = quick ? 100_000 : 400_000;
  texts.s20000 = '<s>'.repeat(20_000);
  texts.prose = prose(size, 1);
  texts.html = html(size, 2);
  texts.near_miss = '<unused'.repeat(Math.floor(size / 7));
  if (gemma) {
    result.gemma_like_added_tokens = gemma.metaspace.addedTokens.length;
    const enc: Record<string, unknown> = {};
    const one = (tok: Tokenizer, text: string) => {
      const t = time(() => tok.encode(text));
      return { chars: text.length, tokens: tok.encode(text).length, ...t, MBps: +(text.length / t.median_ms / 1e3).toFixed(2) };
    };
    enc.s20000_added = one(gemma.metaspace, texts.s20000);
    enc.s20000_model = one(gemma.bytelevel, texts.s20000);
    for (const [name, tok] of Object.entries(gemma)) {
      enc[`prose_${name}`] = one(tok, texts.prose);
      enc[`html_${name}`] = one(tok, texts.html);
      enc[`near_miss_${name}`] = one(tok, texts.near_miss);
    }
    result.encode_gemma_like = enc;
  } else result.encode_gemma_like = { skipped: 'no shared/fixtures/tokenizers above this program (give --fixtures DIR)' };

  // --- loading a Qwen-sized byte-level BPE ---
  const qwenSize = quick ? 50_000 : 150_000;
  const dir = writeDir ?? (await mkdtemp(join(tmpdir(), 'rusty-tok-bench-')));
  mkdirSync(dir, { recursive: true });
  try {
    const load: Record<string, unknown> = { vocab: qwenSize };
    for (const form of ['array', 'string'] as const) {
      const json = qwenLike(qwenSize, form === 'string');
      const text = JSON.stringify(json);
      const file = join(dir, `qwen-like${form === 'string' ? '-string-merges' : ''}.tokenizer.json`);
      writeFileSync(file, text);
      load[`merges_${form}`] = {
        merges: (json.model as { merges: unknown[] }).merges.length,
        file_MB: +(Buffer.byteLength(text) / 1e6).toFixed(2),
        json_parse: time(() => JSON.parse(text)),
        fromJSON_text: time(() => Tokenizer.fromJSON(text)),
        fromJSON_object: time(() => Tokenizer.fromJSON(json)),
        fromFile: await timeAsync(() => Tokenizer.fromFile(file)),
      };
      if (form === 'array') {
        const tok = Tokenizer.fromJSON(json);
        const p = prose(quick ? 50_000 : 200_000, 3);
        texts.qwen_prose = p;
        const ids = tok.encode(p);
        load.encode_prose = { chars: p.length, tokens: ids.length, ...time(() => tok.encode(p)) };
        load.decode_prose = { tokens: ids.length, ...time(() => tok.decode(ids)) };
      }
    }
    result.load_qwen_like = load;
    if (writeDir) {
      if (!gemma) throw new Error('--write-dir needs the fixture tokenizers (give --fixtures DIR)');
      writeFileSync(join(dir, 'gemma-like-metaspace.tokenizer.json'), JSON.stringify(gemmaLike('metaspace')));
      writeFileSync(join(dir, 'gemma-like-bytelevel.tokenizer.json'), JSON.stringify(gemmaLike('bytelevel')));
      writeFileSync(join(dir, 'texts.json'), JSON.stringify(texts));
      // what this program computed, for tokenizer-hf.py to compare ids with
      const ids: Record<string, number[]> = {};
      for (const [name, tok] of Object.entries(gemma)) for (const k of ['s20000', 'prose', 'html', 'near_miss']) ids[`${k}_${name}`] = tok.encode(texts[k]!);
      ids.qwen_prose = Tokenizer.fromJSON(readFileSync(join(dir, 'qwen-like.tokenizer.json'), 'utf8')).encode(texts.qwen_prose!);
      writeFileSync(join(dir, 'rusty-ids.json'), JSON.stringify(ids));
    }
  } finally {
    if (!writeDir) rmSync(dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
