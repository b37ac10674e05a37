import { z } from 'zod';
import { TokenizerError } from '../errors';
import { AddedVocabulary, addedTokenSchema, type AddedToken } from './added-tokens';
import { BpeModel } from './bpe';
import { scanBpeJson, type ScannedBpe } from './bpe-json-scan';
import { parseComponent } from './component';
import { buildDecoder, type Decoder } from './decoders';
import { buildNormalizer, type Normalizer } from './normalizers';
import { buildPostProcessor, concat, type Encoding, type PostProcessor } from './post-processors';
import { buildPreTokenizer, type Piece, type PreTokenizer } from './pre-tokenizers';

export type { Encoding } from './post-processors';
export type { AddedToken } from './added-tokens';

/** Options of `encode`. */
export interface EncodeOptions {
  /** Add the post-processor's special tokens (bos, template), like HF's `add_special_tokens=True`. Default true. */
  addSpecialTokens?: boolean;
  /** A second sequence, encoded with the post-processor's pair template. */
  pair?: string;
}

/** Options of `decode`. */
export interface DecodeOptions {
  /** Leave out special added tokens. Default false, like HF. */
  skipSpecialTokens?: boolean;
}

/** Token strings that name special roles, e.g. from `tokenizer_config.json`. */
export interface SpecialTokenNames {
  bos?: string;
  eos?: string;
  pad?: string;
  unk?: string;
}

/** Options of `Tokenizer.fromJSON`. */
export interface TokenizerOptions {
  /** Name used in error messages (the file name). Default 'tokenizer.json'. */
  source?: string;
  /** Override the detected bos/eos/pad/unk tokens (a name not in the vocabulary leaves that id undefined). */
  specialTokens?: SpecialTokenNames;
}

const topSchema = z.object({
  version: z.string().optional(),
  added_tokens: z.array(z.unknown()).default([]),
  normalizer: z.unknown().optional(),
  pre_tokenizer: z.unknown().optional(),
  post_processor: z.unknown().optional(),
  decoder: z.unknown().optional(),
  model: z.record(z.string(), z.unknown()),
});

const MODEL_TYPES = ['BPE'];

function firstMatch(tokens: AddedToken[], re: RegExp): string | undefined {
  return tokens.find((t) => t.special && re.test(t.content))?.content;
}

/**
 * A Hugging Face `tokenizer.json` tokenizer with a BPE model (byte-level like GPT-2 and Llama 3, or
 * SentencePiece-style metaspace with byte fallback like Llama 2 and Mistral), reimplemented from the format's
 * semantics: added tokens, normalizer, pre-tokenizer, BPE, post-processor and decoder give the same ids and
 * text as the reference library. Truncation, padding and BPE dropout settings in the file are ignored (as
 * transformers ignores them unless asked).
 */
export class Tokenizer {
  /** The id of each role, when the file (or `tokenizer_config.json`) determines it. */
  readonly bosTokenId: number | undefined;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly unkTokenId: number | undefined;
  private readonly model: BpeModel;
  private readonly added: AddedVocabulary;
  private readonly normalizer: Normalizer | null;
  private readonly preTokenizer: PreTokenizer | null;
  private readonly postProcessor: PostProcessor | null;
  private readonly decoder: Decoder | null;
  private readonly maxId: number;

  /** The tokenizer.json object, or (loaded through the scan) the text to parse it from when it is asked for. */
  private json: Record<string, unknown> | null;
  private text: string | null = null;

  /** @internal use `fromJSON` / `fromFile` */
  protected constructor(json: Record<string, unknown>, readonly source: string, names: SpecialTokenNames = {}, scanned?: ScannedBpe & { text: string }) {
    this.json = scanned ? null : json;
    if (scanned) this.text = scanned.text;
    const top = parseComponent(topSchema, json, source);
    const mtype = typeof top.model.type === 'string' ? top.model.type : 'merges' in top.model ? 'BPE' : undefined;
    if (mtype !== 'BPE')
      throw new TokenizerError(
        `${source}: model type '${mtype ?? 'unknown'}' is not supported (supported: ${MODEL_TYPES.join(', ')}; WordPiece, Unigram and WordLevel tokenizers cannot be loaded)`,
      );
    this.model = new BpeModel(top.model, `${source}: model (BPE)`, scanned);
    this.normalizer = buildNormalizer(top.normalizer, `${source}: normalizer`);
    this.preTokenizer = buildPreTokenizer(top.pre_tokenizer, `${source}: pre_tokenizer`);
    this.postProcessor = buildPostProcessor(top.post_processor, `${source}: post_processor`);
    this.decoder = buildDecoder(top.decoder, `${source}: decoder`);
    const addedList = top.added_tokens.map((t, i) => parseComponent(addedTokenSchema, t, `${source}: added_tokens[${i}]`));
    this.added = new AddedVocabulary(addedList, (s) => this.model.vocab.get(s), this.model.vocab.size, this.normalizer);
    let maxId = this.model.size - 1;
    for (const t of this.added.tokens) maxId = Math.max(maxId, t.id);
    this.maxId = maxId;

    const around = this.postProcessor?.singleAround;
    const specials = this.added.tokens;
    const resolve = (_role: string, name: string | undefined): number | undefined => (name === undefined ? undefined : this.tokenToId(name));
    this.bosTokenId = resolve('bos', names.bos ?? around?.before[0] ?? firstMatch(specials, /^(<s>|<bos>|<\|bos\|>|<\|begin_of_text\|>|<\|startoftext\|>)$/));
    this.eosTokenId = resolve('eos', names.eos ?? around?.after.at(-1) ?? firstMatch(specials, /^(<\/s>|<eos>|<\|eos\|>|<\|end_of_text\|>|<\|endoftext\|>)$/));
    this.padTokenId = resolve('pad', names.pad ?? firstMatch(specials, /^(<pad>|<\|pad\|>|\[PAD\]|<\|finetune_right_pad_id\|>)$/));
    const unk = (top.model as { unk_token?: unknown }).unk_token;
    this.unkTokenId = resolve('unk', names.unk ?? (typeof unk === 'string' ? unk : undefined));
  }

  /**
   * Load a tokenizer from the text (or parsed object) of a tokenizer.json.
   * @throws TokenizerError for malformed JSON, an unsupported model type or an unknown component, naming it
   */
  static fromJSON(text: string | object, opts: TokenizerOptions = {}): Tokenizer {
    const source = opts.source ?? 'tokenizer.json';
    let json: unknown = text;
    if (typeof text === 'string') {
      // fast path: a BPE model's vocab and merges read straight from the text (see bpe-json-scan.ts)
      const scanned = scanBpeJson(text);
      if (scanned) return new Tokenizer(scanned.rest, source, opts.specialTokens, { ...scanned, text });
      try {
        json = JSON.parse(text);
      } catch (e) {
        throw new TokenizerError(`${source}: not valid JSON: ${(e as Error).message}`);
      }
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new TokenizerError(`${source}: expected a JSON object`);
    return new Tokenizer(json as Record<string, unknown>, source, opts.specialTokens);
  }

  /**
   * Load a tokenizer.json file. When a `tokenizer_config.json` sits beside it, its `bos_token`, `eos_token`,
   * `pad_token` and `unk_token` name the special roles (as transformers' AutoTokenizer does).
   * @throws TokenizerError naming the file and the problem
   */
  static async fromFile(path: string, opts: Omit<TokenizerOptions, 'source'> = {}): Promise<Tokenizer> {
    // node:* only on this Node path, so that browsers can load the package (they use fromJSON)
    const { readFile } = await import('node:fs/promises');
    const { dirname, join } = await import('node:path');
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      throw new TokenizerError(`${path}: cannot read the tokenizer: ${(e as Error).message}`, { cause: e });
    }
    const names = { ...(await readTokenizerConfig(join(dirname(path), 'tokenizer_config.json'))), ...opts.specialTokens };
    return Tokenizer.fromJSON(text, { source: path, specialTokens: names });
  }

  /** Number of ids: the highest id of the model and added tokens, plus one (the embedding size it needs). */
  get vocabSize(): number {
    return this.maxId + 1;
  }

  /** The added tokens (special or not), with their ids. */
  get addedTokens(): readonly AddedToken[] {
    return this.added.tokens;
  }

  tokenToId(token: string): number | undefined {
    return this.added.tokenToId(token) ?? this.model.vocab.get(token);
  }

  idToToken(id: number): string | undefined {
    return this.added.idToToken(id)?.text ?? this.model.idToToken(id);
  }

  /** Is this id a special added token (bos, eos, template tokens, ...)? (What `skipSpecialTokens` leaves out,
   *  except that the reference keeps a special token whose normalizer changes it, and so does `decode`.) */
  isSpecialId(id: number): boolean {
    return !!this.added.idToToken(id)?.special;
  }

  /** Ids of `text`, with the post-processor's special tokens unless `addSpecialTokens` is false. */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    return this.run(text, opts, false).ids;
  }

  /** Ids and token strings of `text`. */
  encodeWithTokens(text: string, opts: EncodeOptions = {}): Encoding {
    return this.run(text, opts, true);
  }

  private run(text: string, opts: EncodeOptions, wantTokens: boolean): Encoding {
    if (typeof text !== 'string') throw new TokenizerError(`${this.source}: encode expects a string, got ${typeof text}`);
    if (opts.pair !== undefined && typeof opts.pair !== 'string') throw new TokenizerError(`${this.source}: the pair must be a string`);
    const encs = [this.encodeSequence(text, wantTokens)];
    if (opts.pair !== undefined) encs.push(this.encodeSequence(opts.pair, wantTokens));
    const add = opts.addSpecialTokens ?? true;
    const out = this.postProcessor ? this.postProcessor.process(encs, add) : encs;
    const enc = out.length === 1 ? out[0]! : concat(out);
    if (!wantTokens) enc.tokens = [];
    return enc;
  }

  private encodeSequence(text: string, wantTokens: boolean): Encoding {
    const ids: number[] = [];
    const tokens: string[] = [];
    let pieces: Piece[] = [];
    const flush = () => {
      if (!pieces.length) return;
      const words = this.preTokenizer ? this.preTokenizer(pieces) : pieces;
      for (const w of words) {
        const wordIds = this.model.tokenize(w.s);
        for (let i = 0; i < wordIds.length; i++) {
          ids.push(wordIds[i]!);
          if (wantTokens) tokens.push(this.model.idToToken(wordIds[i]!)!);
        }
      }
      pieces = [];
    };
    for (const seg of this.added.extract(text, this.normalizer)) {
      if ('id' in seg) {
        flush();
        ids.push(seg.id);
        if (wantTokens) tokens.push(seg.text);
      } else pieces.push(seg);
    }
    flush();
    return { ids, tokens };
  }

  /**
   * Text of a sequence of ids (through the decoder; special tokens included unless `skipSpecialTokens`). An id
   * the tokenizer has no token for (e.g. one of the padding rows of an embedding larger than the vocabulary) is
   * left out, as Hugging Face `tokenizers` does.
   * @throws TokenizerError for an id that is not an integer in [0, 2^32) (the reference rejects those too: they
   *   do not convert to its u32 ids)
   */
  decode(ids: ArrayLike<number>, opts: DecodeOptions = {}): string {
    const tokens: string[] = [];
    const skip = !!opts.skipSpecialTokens;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id > 0xffffffff)
        throw new TokenizerError(`${this.source}: cannot decode id ${id} at position ${i} (ids are integers >= 0 and < 2^32)`);
      const added = this.added.idToToken(id);
      if (added) {
        if (!(skip && this.added.isSpecial(added.text))) tokens.push(added.text);
        continue;
      }
      const t = this.model.idToToken(id);
      if (t !== undefined && !(skip && this.added.isSpecial(t))) tokens.push(t);
    }
    return this.decoder ? this.decoder(tokens).join('') : tokens.join(' ');
  }

  /** The tokenizer.json object this was loaded from. */
  toJSON(): Record<string, unknown> {
    if (!this.json) {
      this.json = JSON.parse(this.text!) as Record<string, unknown>;
      this.text = null;
    }
    return this.json;
  }
}

/** bos/eos/pad/unk names from a tokenizer_config.json (strings or `{content}` objects); {} if there is none. */
async function readTokenizerConfig(path: string): Promise<SpecialTokenNames> {
  const { readFile } = await import('node:fs/promises');
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return {};
  }
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TokenizerError(`${path}: not valid JSON: ${(e as Error).message}`);
  }
  const name = (v: unknown): string | undefined =>
    typeof v === 'string' ? v : typeof v === 'object' && v && typeof (v as { content?: unknown }).content === 'string' ? (v as { content: string }).content : undefined;
  const out: SpecialTokenNames = {};
  for (const role of ['bos', 'eos', 'pad', 'unk'] as const) {
    const n = name(json?.[`${role}_token`]);
    if (n !== undefined) out[role] = n;
  }
  return out;
}
