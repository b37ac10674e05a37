/**
 * The byte-level alphabet of GPT-2 style tokenizers: each byte maps to one printable character (printable
 * Latin-1 bytes to themselves, the others to U+0100 onwards), so that any UTF-8 text becomes a string over 256
 * visible characters (a space becomes 'Ġ', a newline 'Ċ').
 */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const out: string[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out[b] = String.fromCharCode(printable ? b : next++);
  }
  return out;
})();

/** The inverse of `BYTE_TO_CHAR`. */
export const CHAR_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_CHAR.map((c, b) => [c, b]));

const isAscii = /^[\x21-\x7e]*$/;

/** UTF-8 bytes of `s` spelled in the byte-level alphabet. */
export function toByteLevel(s: string): string {
  if (isAscii.test(s)) return s; // printable ASCII maps to itself
  let out = '';
  for (let i = 0; i < s.length; i++) {
    let cp = s.charCodeAt(i);
    if (cp < 0x80) {
      out += BYTE_TO_CHAR[cp];
      continue;
    }
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < s.length) {
      const lo = s.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      }
    }
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd; // a lone surrogate encodes as U+FFFD, as TextEncoder does
    if (cp < 0x800) out += BYTE_TO_CHAR[0xc0 | (cp >> 6)]! + BYTE_TO_CHAR[0x80 | (cp & 63)]!;
    else if (cp < 0x10000) out += BYTE_TO_CHAR[0xe0 | (cp >> 12)]! + BYTE_TO_CHAR[0x80 | ((cp >> 6) & 63)]! + BYTE_TO_CHAR[0x80 | (cp & 63)]!;
    else
      out +=
        BYTE_TO_CHAR[0xf0 | (cp >> 18)]! +
        BYTE_TO_CHAR[0x80 | ((cp >> 12) & 63)]! +
        BYTE_TO_CHAR[0x80 | ((cp >> 6) & 63)]! +
        BYTE_TO_CHAR[0x80 | (cp & 63)]!;
  }
  return out;
}

/** Lenient UTF-8 decoding (each maximal invalid sequence becomes U+FFFD), like Rust's `from_utf8_lossy`. */
export const lossyUtf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
