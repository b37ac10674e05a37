import { DataError } from '../errors';
import { splitDataset, type Dataset, type Example, type SubsetDataset } from './dataset';
import { tokenizeCorpus, tokenizerSpecialIds, type CorpusInfo, type CorpusOptions } from './corpus';
import { packDocuments, type PackOptions, type PackStats, type TokenizedDocument } from './packing';

/** Options of `TextDataset.fromCorpus`: where the text comes from, the tokenizer and its cache, and packing. */
export interface TextCorpusOptions extends CorpusOptions, Omit<PackOptions, 'eosId' | 'bosId'> {
  /** Document separator; default the tokenizer's EOS id (`eosId` / `eosTokenId`), `null` for none. */
  eosId?: number | null;
  /** Prepended to documents that do not start with it; default none (tokenizers add their own BOS). */
  bosId?: number | null;
}

/**
 * Documents packed into fixed-length windows of token ids and labels, held in memory (two Int32Arrays of
 * `length * seqLen`). Build one from token sequences (`fromSequences`) or from files (`fromCorpus`,
 * `fromJsonl`): tokenized once, cached, packed with document separators.
 */
export class TextDataset implements Dataset {
  /** Window `i` is `tokens[i * seqLen, (i + 1) * seqLen)`. */
  readonly tokens: Int32Array;
  /** Labels of the windows (`IGNORE_INDEX` for padding and masked prompts). */
  readonly labels: Int32Array;
  readonly length: number;
  /** Set when the dataset was read from files. */
  corpus?: CorpusInfo;

  constructor(
    readonly seqLen: number,
    tokens: Int32Array,
    labels: Int32Array,
    /** How the windows were made (documents, tokens, padding, ...). */
    readonly stats: PackStats,
  ) {
    if (!Number.isInteger(seqLen) || seqLen < 1) throw new DataError(`seqLen must be a positive integer, got ${seqLen}`);
    if (tokens.length !== labels.length || tokens.length % seqLen)
      throw new DataError(`TextDataset: ${tokens.length} tokens and ${labels.length} labels do not form windows of ${seqLen}`);
    this.tokens = tokens;
    this.labels = labels;
    this.length = tokens.length / seqLen;
  }

  /**
   * Pack token sequences (arrays of ids, or `{ ids, labels }` with masked labels) into windows of `seqLen`.
   * With `eosId` every document ends in that separator; see `PackOptions` for one window per document.
   */
  static fromSequences(sequences: Iterable<ArrayLike<number> | TokenizedDocument>, opts: PackOptions): TextDataset {
    const p = packDocuments(sequences, opts);
    return new TextDataset(opts.seqLen, p.tokens, p.labels, p.stats);
  }

  /**
   * Read, tokenize (once: see `tokenizeCorpus` for the cache) and pack a corpus: text files (one document each),
   * directories (walked, filtered by `include`/`exclude` globs such as `**\/*.ts`, `*.md`) and JSONL files
   * (`{"text": ...}` per line, or `{"prompt": ..., "response": ...}` with the prompt masked out of the loss).
   */
  static async fromCorpus(sources: string | readonly string[], opts: TextCorpusOptions): Promise<TextDataset> {
    const { documents, info } = await tokenizeCorpus(sources, opts);
    const special = tokenizerSpecialIds(opts.tokenizer);
    const ds = TextDataset.fromSequences(documents, {
      seqLen: opts.seqLen,
      eosId: opts.eosId === undefined ? special.eosId : opts.eosId,
      bosId: opts.bosId ?? null,
      pack: opts.pack,
      padId: opts.padId,
      dropRemainder: opts.dropRemainder,
    });
    ds.corpus = info;
    return ds;
  }

  /** `fromCorpus` for JSONL files (whatever their extension). */
  static fromJsonl(files: string | readonly string[], opts: TextCorpusOptions): Promise<TextDataset> {
    return TextDataset.fromCorpus(files, { ...opts, format: 'jsonl' });
  }

  get(index: number): Example {
    if (!Number.isInteger(index) || index < 0 || index >= this.length)
      throw new DataError(`example ${index} is out of range (dataset of ${this.length})`);
    const a = index * this.seqLen;
    return { inputIds: this.tokens.subarray(a, a + this.seqLen), labels: this.labels.subarray(a, a + this.seqLen) };
  }

  /** A deterministic train/validation split of the windows (see `splitDataset`). */
  split(validationFraction: number, seed = 0): { train: SubsetDataset; validation: SubsetDataset } {
    return splitDataset(this, { validationFraction, seed });
  }
}
