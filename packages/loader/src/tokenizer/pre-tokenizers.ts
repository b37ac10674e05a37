import { z } from 'zod';
import { toByteLevel } from './byte-level';
import { compilePattern, componentType, parseComponent, patternSchema, unsupported } from './component';
import { GPT2_PATTERN, WORD, WS } from './regex';
import { charSpans, literalSpans, regexSpans, SPLIT_BEHAVIORS, splitSpans, type SplitBehavior } from './split';

/** A piece of text on its way to the model. `first`: it starts at the beginning of the input text. */
export interface Piece {
  s: string;
  first: boolean;
}

/** A pre-tokenizer: pieces in, finer pieces out (empty pieces are dropped). */
export type PreTokenizer = (pieces: Piece[]) => Piece[];

const SUPPORTED = [
  'ByteLevel',
  'Split',
  'Metaspace',
  'Sequence',
  'Digits',
  'Whitespace',
  'WhitespaceSplit',
  'Punctuation',
  'BertPreTokenizer',
  'CharDelimiterSplit',
];

const WHITE = new RegExp(`^[${WS}]$`, 'u');
const isWhitespace = (c: string) => WHITE.test(c);
const NUMERIC = /^\p{N}$/u;
const isNumeric = (c: string) => NUMERIC.test(c);
const PUNCT = /^[\p{P}!-/:-@[-`{-~]$/u;
const isPunctuation = (c: string) => PUNCT.test(c);
const WHITESPACE_PATTERN = new RegExp(`[${WORD}]+|[^${WORD}${WS}]+`, 'gu');

/** Split every piece with `fn`, which returns [offset within the piece, text] pairs. */
function splitEach(pieces: Piece[], fn: (s: string) => [number, string][]): Piece[] {
  const out: Piece[] = [];
  for (const p of pieces) for (const [off, s] of fn(p.s)) if (s.length) out.push({ s, first: p.first && off === 0 });
  return out;
}

const behaviorSchema = z.enum(SPLIT_BEHAVIORS as [SplitBehavior, ...SplitBehavior[]]);

/** Prefix handling of Metaspace (`add_prefix_space` is the older spelling of always/never). */
export function prependScheme(o: { prepend_scheme?: string | undefined; add_prefix_space?: boolean | undefined }): 'always' | 'first' | 'never' {
  if (o.prepend_scheme === 'always' || o.prepend_scheme === 'first' || o.prepend_scheme === 'never') return o.prepend_scheme;
  return o.add_prefix_space === false ? 'never' : 'always';
}

export const metaspaceSchema = z.object({
  replacement: z.string().refine((s) => [...s].length === 1, 'must be one character').default('\u2581'),
  prepend_scheme: z.enum(['always', 'first', 'never']).optional(),
  add_prefix_space: z.boolean().optional(),
  split: z.boolean().default(true),
});

/**
 * Build a pre-tokenizer from its tokenizer.json object (null when there is none).
 * @throws TokenizerError naming `where` for an unknown or malformed pre-tokenizer
 */
export function buildPreTokenizer(json: unknown, where: string): PreTokenizer | null {
  if (json === null || json === undefined) return null;
  const type = componentType(json, where);
  const at = `${where} (${type})`;
  switch (type) {
    case 'Sequence': {
      const { pretokenizers } = parseComponent(z.object({ pretokenizers: z.array(z.unknown()) }), json, at);
      const parts = pretokenizers.map((p, i) => buildPreTokenizer(p, `${where}.pretokenizers[${i}]`)).filter((p): p is PreTokenizer => !!p);
      return (pieces) => parts.reduce((acc, f) => f(acc), pieces);
    }
    case 'ByteLevel': {
      const o = parseComponent(z.object({ add_prefix_space: z.boolean().default(true), use_regex: z.boolean().default(true) }), json, at);
      return (pieces) => {
        const out: Piece[] = [];
        for (const p of pieces) {
          const s = o.add_prefix_space && !p.s.startsWith(' ') ? ' ' + p.s : p.s;
          if (!o.use_regex) {
            if (s.length) out.push({ s: toByteLevel(s), first: p.first });
            continue;
          }
          // Isolated split on the GPT-2 pattern, straight from its matches
          const re = GPT2_PATTERN;
          re.lastIndex = 0;
          let prev = 0;
          for (let m: RegExpExecArray | null; (m = re.exec(s)) !== null; ) {
            const start = m.index;
            if (!m[0].length) {
              re.lastIndex++;
              continue;
            }
            if (start > prev) out.push({ s: toByteLevel(s.slice(prev, start)), first: p.first && prev === 0 });
            out.push({ s: toByteLevel(m[0]), first: p.first && start === 0 });
            prev = start + m[0].length;
          }
          if (prev < s.length) out.push({ s: toByteLevel(s.slice(prev)), first: p.first && prev === 0 });
        }
        return out;
      };
    }
    case 'Split': {
      const o = parseComponent(z.object({ pattern: patternSchema, behavior: behaviorSchema, invert: z.boolean().default(false) }), json, at);
      if ('String' in o.pattern) {
        const lit = o.pattern.String;
        return (pieces) => splitEach(pieces, (s) => splitSpans(s, literalSpans(lit, s), o.behavior, o.invert));
      }
      const re = compilePattern(o.pattern, at);
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, regexSpans(re, s), o.behavior, o.invert));
    }
    case 'Metaspace': {
      const o = parseComponent(metaspaceSchema, json, at);
      const scheme = prependScheme(o);
      const rep = o.replacement;
      return (pieces) => {
        const out: Piece[] = [];
        for (const p of pieces) {
          let s = p.s.replaceAll(' ', rep);
          if (!s.startsWith(rep) && (scheme === 'always' || (scheme === 'first' && p.first))) s = rep + s;
          if (!o.split) {
            if (s.length) out.push({ s, first: p.first });
            continue;
          }
          for (const [off, sub] of splitSpans(s, literalSpans(rep, s), 'MergedWithNext')) out.push({ s: sub, first: p.first && off === 0 });
        }
        return out;
      };
    }
    case 'Digits': {
      const o = parseComponent(z.object({ individual_digits: z.boolean().default(false) }), json, at);
      const behavior: SplitBehavior = o.individual_digits ? 'Isolated' : 'Contiguous';
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, charSpans(isNumeric, s), behavior));
    }
    case 'Whitespace':
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, regexSpans(WHITESPACE_PATTERN, s), 'Removed', true));
    case 'WhitespaceSplit':
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, charSpans(isWhitespace, s), 'Removed'));
    case 'Punctuation': {
      const o = parseComponent(z.object({ behavior: behaviorSchema.default('Isolated') }), json, at);
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, charSpans(isPunctuation, s), o.behavior));
    }
    case 'BertPreTokenizer':
      return (pieces) =>
        splitEach(
          splitEach(pieces, (s) => splitSpans(s, charSpans(isWhitespace, s), 'Removed')),
          (s) => splitSpans(s, charSpans(isPunctuation, s), 'Isolated'),
        );
    case 'CharDelimiterSplit': {
      const o = parseComponent(z.object({ delimiter: z.string().refine((s) => [...s].length === 1, 'must be one character') }), json, at);
      return (pieces) => splitEach(pieces, (s) => splitSpans(s, charSpans((c) => c === o.delimiter, s), 'Removed'));
    }
    default:
      throw unsupported(where, 'pre-tokenizer', type, SUPPORTED);
  }
}
