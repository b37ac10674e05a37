import { TokenizerError } from '../errors';
import { BYTE_TO_CHAR, lossyUtf8 } from './byte-level';
import { Tokenizer, type DecodeOptions, type EncodeOptions } from './tokenizer';

/** Options of `ByteTokenizer`. */
export interface ByteTokenizerOptions {
  /** Special tokens, given ids 256, 257, ... Default `<|bos|>`, `<|eos|>`, `<|pad|>`. */
  specials?: readonly string[];
  /** Token put before each sequence by `encode` (default the first special; null for none). */
  bos?: string | null;
  /** Token put after each sequence by `encode` (default none). */
  eos?: string | null;
  /** The padding token (default `<|pad|>` when it is among the specials). */
  pad?: string | null;
}

const DEFAULT_SPECIALS = ['<|bos|>', '<|eos|>', '<|pad|>'] as const;
const encoder = new TextEncoder();

/** The tokenizer.json of a byte tokenizer: byte-level BPE without merges (id = byte value) plus specials. */
function byteTokenizerJSON(specials: readonly string[], bos: string | null, eos: string | null): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  BYTE_TO_CHAR.forEach((c, b) => (vocab[c] = b));
  const tpl = (seq: 'A' | 'B', typeId: number) => [
    ...(bos && seq === 'A' ? [{ SpecialToken: { id: bos, type_id: typeId } }] : []),
    { Sequence: { id: seq, type_id: typeId } },
    ...(eos ? [{ SpecialToken: { id: eos, type_id: typeId } }] : []),
  ];
  const specialTokens: Record<string, unknown> = {};
  for (const s of [bos, eos]) if (s) specialTokens[s] = { id: s, ids: [256 + specials.indexOf(s)], tokens: [s] };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, i) => ({ id: 256 + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
    post_processor: { type: 'TemplateProcessing', single: tpl('A', 0), pair: [...tpl('A', 0), ...tpl('B', 1)], special_tokens: specialTokens },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

/**
 * A tokenizer for training from scratch: the 256 byte values are ids 0..255 (id = byte of the UTF-8 text) and
 * special tokens follow from 256. `encode` adds `bos` (and `eos` if set) like a post-processor template, and
 * special token strings in the text are matched as special tokens. `toJSON()` gives an equivalent Hugging Face
 * tokenizer.json (byte-level BPE without merges), which `Tokenizer.fromJSON` and HF `tokenizers` load to the
 * same ids. Plain text takes a fast path (no pre-tokenization work).
 */
export class ByteTokenizer extends Tokenizer {
  readonly specials: readonly string[];
  private readonly bos: string | null;
  private readonly eos: string | null;

  constructor(opts: ByteTokenizerOptions = {}) {
    const specials = [...(opts.specials ?? DEFAULT_SPECIALS)];
    if (new Set(specials).size !== specials.length || specials.some((s) => !s.length))
      throw new TokenizerError(`ByteTokenizer: special tokens must be distinct and non-empty (got ${JSON.stringify(specials)})`);
    const bos = opts.bos === undefined ? (specials[0] ?? null) : opts.bos;
    const eos = opts.eos ?? null;
    for (const [role, s] of [['bos', bos], ['eos', eos], ['pad', opts.pad ?? null]] as const)
      if (s !== null && !specials.includes(s)) throw new TokenizerError(`ByteTokenizer: the ${role} token '${s}' is not among the specials`);
    const pad = opts.pad === undefined ? (specials.includes('<|pad|>') ? '<|pad|>' : undefined) : (opts.pad ?? undefined);
    super(byteTokenizerJSON(specials, bos, eos), 'ByteTokenizer', { bos: bos ?? undefined, eos: eos ?? specials.find((s) => s === '<|eos|>'), pad });
    this.specials = specials;
    this.bos = bos;
    this.eos = eos;
  }

  private plain(text: string): boolean {
    for (const s of this.specials) if (text.includes(s)) return false;
    return true;
  }

  override encode(text: string, opts: EncodeOptions = {}): number[] {
    if (typeof text !== 'string' || !this.plain(text) || (opts.pair !== undefined && !this.plain(opts.pair))) return super.encode(text, opts);
    const add = opts.addSpecialTokens ?? true;
    const bosId = add && this.bos ? [this.bosTokenId!] : [];
    const eosId = add && this.eos ? [this.tokenToId(this.eos)!] : [];
    const ids = [...bosId, ...encoder.encode(text), ...eosId];
    if (opts.pair !== undefined) ids.push(...encoder.encode(opts.pair), ...eosId);
    return ids;
  }

  override decode(ids: ArrayLike<number>, opts: DecodeOptions = {}): string {
    let bytesOnly = true;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!(Number.isInteger(id) && id >= 0 && id < 256)) {
        bytesOnly = false;
        break;
      }
    }
    return bytesOnly ? lossyUtf8.decode(Uint8Array.from(ids)) : super.decode(ids, opts);
  }
}
