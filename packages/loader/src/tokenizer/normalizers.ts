import { z } from 'zod';
import { toByteLevel } from './byte-level';
import { compilePattern, componentType, parseComponent, patternSchema, unsupported } from './component';
import { WS } from './regex';

/** A normalizer: text in, normalized text out (applied to each piece between added tokens). */
export type Normalizer = (s: string) => string;

const SUPPORTED = ['Sequence', 'Prepend', 'Replace', 'NFC', 'NFD', 'NFKC', 'NFKD', 'Lowercase', 'Strip', 'StripAccents', 'BertNormalizer', 'ByteLevel'];

const LEADING_WS = new RegExp(`^[${WS}]+`, 'u');
const TRAILING_WS = new RegExp(`[${WS}]+$`, 'u');
const MARKS = /\p{M}/gu;

/** Lowercase each character on its own (no final-sigma rule), as Rust's `char::to_lowercase` does. */
export function lowercase(s: string): string {
  return s.replace(/\u03a3/g, '\u03c3').toLowerCase();
}

function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b920 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

const CONTROL = /[\p{Cc}\p{Cf}\p{Cn}\p{Co}]/u;
const WHITE = new RegExp(`[${WS}]`, 'u');

function bertNormalizer(o: { clean_text: boolean; handle_chinese_chars: boolean; strip_accents: boolean | null; lowercase: boolean }): Normalizer {
  return (s) => {
    if (o.clean_text) {
      let out = '';
      for (const c of s) {
        if (c === '\0' || c === '\ufffd') continue;
        if (c === '\t' || c === '\n' || c === '\r' || WHITE.test(c)) out += ' ';
        else if (!CONTROL.test(c)) out += c;
      }
      s = out;
    }
    if (o.handle_chinese_chars) {
      let out = '';
      for (const c of s) out += isCjk(c.codePointAt(0)!) ? ` ${c} ` : c;
      s = out;
    }
    if (o.strip_accents ?? o.lowercase) s = s.normalize('NFD').replace(/\p{Mn}/gu, '');
    if (o.lowercase) s = lowercase(s);
    return s;
  };
}

/**
 * Build a normalizer from its tokenizer.json object (null when there is none).
 * @throws TokenizerError naming `where` for an unknown or malformed normalizer
 */
export function buildNormalizer(json: unknown, where: string): Normalizer | null {
  if (json === null || json === undefined) return null;
  const type = componentType(json, where);
  const at = `${where} (${type})`;
  switch (type) {
    case 'Sequence': {
      const { normalizers } = parseComponent(z.object({ normalizers: z.array(z.unknown()) }), json, at);
      const parts = normalizers.map((n, i) => buildNormalizer(n, `${where}.normalizers[${i}]`)).filter((n): n is Normalizer => !!n);
      return (s) => parts.reduce((acc, f) => f(acc), s);
    }
    case 'Prepend': {
      const { prepend } = parseComponent(z.object({ prepend: z.string() }), json, at);
      return (s) => (s.length ? prepend + s : s);
    }
    case 'Replace': {
      const { pattern, content } = parseComponent(z.object({ pattern: patternSchema, content: z.string() }), json, at);
      const re = compilePattern(pattern, at);
      return (s) => s.replace(re, () => content);
    }
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD':
      return (s) => s.normalize(type);
    case 'Lowercase':
      return lowercase;
    case 'Strip': {
      const o = parseComponent(z.object({ strip_left: z.boolean().default(true), strip_right: z.boolean().default(true) }), json, at);
      return (s) => {
        if (o.strip_left) s = s.replace(LEADING_WS, '');
        if (o.strip_right) s = s.replace(TRAILING_WS, '');
        return s;
      };
    }
    case 'StripAccents':
      return (s) => s.replace(MARKS, '');
    case 'BertNormalizer':
      return bertNormalizer(
        parseComponent(
          z.object({
            clean_text: z.boolean().default(true),
            handle_chinese_chars: z.boolean().default(true),
            strip_accents: z.boolean().nullable().default(null),
            lowercase: z.boolean().default(true),
          }),
          json,
          at,
        ),
      );
    case 'ByteLevel':
      return toByteLevel;
    default:
      throw unsupported(where, 'normalizer', type, SUPPORTED);
  }
}
