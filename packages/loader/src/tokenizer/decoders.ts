import { z } from 'zod';
import { CHAR_TO_BYTE, lossyUtf8 } from './byte-level';
import { compilePattern, componentType, parseComponent, patternSchema, unsupported } from './component';
import { metaspaceSchema, prependScheme } from './pre-tokenizers';

/** A decoder step: token strings in, token strings out; the tokenizer joins the final list. */
export type Decoder = (tokens: string[]) => string[];

const SUPPORTED = ['ByteLevel', 'Metaspace', 'ByteFallback', 'Fuse', 'Strip', 'Replace', 'Sequence', 'BPEDecoder'];

const encoder = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Byte-level tokens back to text: each token's characters map to bytes (a token with a character outside
 *  the alphabet contributes its own UTF-8 bytes), and the bytes decode leniently. */
function byteLevel(tokens: string[]): string[] {
  const bytes: number[] = [];
  for (const t of tokens) {
    const mark = bytes.length;
    let ok = true;
    for (const c of t) {
      const b = CHAR_TO_BYTE.get(c);
      if (b === undefined) {
        ok = false;
        break;
      }
      bytes.push(b);
    }
    if (!ok) {
      bytes.length = mark;
      for (const b of encoder.encode(t)) bytes.push(b);
    }
  }
  return [lossyUtf8.decode(Uint8Array.from(bytes))];
}

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

/** `<0xNN>` tokens back to bytes; a run of them that is not valid UTF-8 becomes one U+FFFD per byte. */
function byteFallback(tokens: string[]): string[] {
  const out: string[] = [];
  let run: number[] = [];
  const flush = () => {
    if (!run.length) return;
    try {
      out.push(strictUtf8.decode(Uint8Array.from(run)));
    } catch {
      for (let i = 0; i < run.length; i++) out.push('\ufffd');
    }
    run = [];
  };
  for (const t of tokens) {
    const m = t.length === 6 ? BYTE_TOKEN.exec(t) : null;
    if (m) run.push(parseInt(m[1]!, 16));
    else {
      flush();
      out.push(t);
    }
  }
  flush();
  return out;
}

/**
 * Build a decoder from its tokenizer.json object (null when there is none: tokens are then joined with spaces).
 * @throws TokenizerError naming `where` for an unknown or malformed decoder
 */
export function buildDecoder(json: unknown, where: string): Decoder | null {
  if (json === null || json === undefined) return null;
  const type = componentType(json, where);
  const at = `${where} (${type})`;
  switch (type) {
    case 'ByteLevel':
      return byteLevel;
    case 'ByteFallback':
      return byteFallback;
    case 'Fuse':
      return (tokens) => [tokens.join('')];
    case 'Metaspace': {
      const o = parseComponent(metaspaceSchema, json, at);
      const strip = prependScheme(o) !== 'never';
      return (tokens) => tokens.map((t, i) => (i === 0 && strip ? t.replaceAll(o.replacement, '') : t.replaceAll(o.replacement, ' ')));
    }
    case 'Strip': {
      const o = parseComponent(z.object({ content: z.string(), start: z.number().int().nonnegative(), stop: z.number().int().nonnegative() }), json, at);
      return (tokens) =>
        tokens.map((t) => {
          const chars = [...t];
          let a = 0;
          while (a < o.start && a < chars.length && chars[a] === o.content) a++;
          let b = chars.length;
          for (let k = 0; k < o.stop && b > 0 && chars[b - 1] === o.content; k++) b--;
          return a >= b ? '' : chars.slice(a, b).join('');
        });
    }
    case 'Replace': {
      const { pattern, content } = parseComponent(z.object({ pattern: patternSchema, content: z.string() }), json, at);
      const re = compilePattern(pattern, at);
      return (tokens) => tokens.map((t) => t.replace(re, () => content));
    }
    case 'BPEDecoder': {
      const { suffix } = parseComponent(z.object({ suffix: z.string().default('</w>') }), json, at);
      return (tokens) => tokens.map((t, i) => t.replaceAll(suffix, i === tokens.length - 1 ? '' : ' '));
    }
    case 'Sequence': {
      const { decoders } = parseComponent(z.object({ decoders: z.array(z.unknown()) }), json, at);
      const parts = decoders.map((d, i) => buildDecoder(d, `${where}.decoders[${i}]`)).filter((d): d is Decoder => !!d);
      return (tokens) => parts.reduce((acc, d) => d(acc), tokens);
    }
    default:
      throw unsupported(where, 'decoder', type, SUPPORTED);
  }
}
