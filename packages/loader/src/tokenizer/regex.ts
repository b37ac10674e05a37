import { TokenizerError } from '../errors';

/** Oniguruma's `\s` (Unicode White_Space), as the body of a JS character class. Unlike JS `\s` it includes
 *  U+0085 and excludes U+FEFF. */
export const WS = '\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** Oniguruma's (and Rust regex's) Unicode `\w`, as the body of a character class. */
export const WORD = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';
const DIGIT = '\\p{Nd}';
const HEX = '0-9A-Fa-f';

/** The GPT-2 pre-tokenization pattern that the ByteLevel pre-tokenizer uses (with Oniguruma's `\s`). */
export const GPT2_PATTERN = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  'gu',
);

const POSIX: Record<string, string> = {
  alpha: '\\p{Alphabetic}',
  digit: DIGIT,
  alnum: '\\p{Alphabetic}\\p{Nd}',
  space: WS,
  upper: '\\p{Lu}',
  lower: '\\p{Ll}',
  punct: '\\p{P}',
  xdigit: HEX,
  word: WORD,
};

function propertyName(name: string, where: string): string {
  for (const candidate of [name, `Script=${name}`]) {
    try {
      new RegExp(`\\p{${candidate}}`, 'u');
      return candidate;
    } catch {
      // try the next spelling
    }
  }
  throw new TokenizerError(`${where}: unknown Unicode property \\p{${name}} in the regex`);
}

function caseVariants(c: string): string {
  const lo = c.toLowerCase();
  const up = c.toUpperCase();
  let out = c;
  for (const v of [lo, up]) if ([...v].length === 1 && !out.includes(v)) out += v;
  return out;
}

const SYNTAX = new Set('^$\\.*+?()[]{}|/');

/**
 * Translate an Oniguruma pattern (what Hugging Face `tokenizers` compiles for `{"Regex": ...}`) into an
 * equivalent JavaScript RegExp with flags `gu`: `\s`, `\w`, `\d`, `\h` get their Unicode Oniguruma meanings,
 * `(?i:...)` groups are expanded case by case (Node 20 has no inline modifiers), `.`, `^`, `$` keep Ruby's
 * line semantics, `\p{Han}` becomes `\p{Script=Han}`, literal braces and brackets are escaped.
 * @throws TokenizerError naming `where` for constructs JavaScript cannot express (possessive quantifiers,
 *   atomic groups, nested classes, `\G`, ...)
 */
export function translateRegex(pattern: string, where: string): RegExp {
  let out = '';
  let flags = 'gu';
  let inClass = false;
  const ciStack: boolean[] = [false];
  let afterQuant = false;
  const fail = (what: string): never => {
    throw new TokenizerError(`${where}: the regex ${JSON.stringify(pattern)} uses ${what}, which is not supported`);
  };
  const ci = () => ciStack[ciStack.length - 1]!;
  const chars = [...pattern];
  let i = 0;
  const literal = (c: string): string => {
    if (ci() && c.toLowerCase() !== c.toUpperCase()) {
      const v = caseVariants(c);
      return inClass ? v : `[${v}]`;
    }
    if (SYNTAX.has(c) || (inClass && c === '-')) return `\\${c}`;
    return c;
  };
  while (i < chars.length) {
    const c = chars[i]!;
    const quantOk = afterQuant;
    afterQuant = false;
    if (c === '\\') {
      const e = chars[i + 1];
      if (e === undefined) fail('a trailing backslash');
      i += 2;
      switch (e) {
        case 's':
          out += inClass ? WS : `[${WS}]`;
          continue;
        case 'd':
          out += inClass ? DIGIT : `[${DIGIT}]`;
          continue;
        case 'w':
          out += inClass ? WORD : `[${WORD}]`;
          continue;
        case 'h':
          out += inClass ? HEX : `[${HEX}]`;
          continue;
        case 'S':
        case 'D':
        case 'W':
        case 'H':
          if (inClass) fail(`\\${e} inside a character class`);
          out += `[^${{ S: WS, D: DIGIT, W: WORD, H: HEX }[e]}]`;
          continue;
        case 'p':
        case 'P': {
          if (chars[i] !== '{') fail(`\\${e} without braces`);
          const close = chars.indexOf('}', i);
          if (close < 0) fail(`an unterminated \\${e}{`);
          let name = chars.slice(i + 1, close).join('');
          let neg = e === 'P';
          if (name.startsWith('^')) {
            neg = !neg;
            name = name.slice(1);
          }
          out += `\\${neg ? 'P' : 'p'}{${propertyName(name, where)}}`;
          i = close + 1;
          continue;
        }
        case 'A':
          if (inClass) fail('\\A inside a class');
          out += '^';
          continue;
        case 'z':
          if (inClass) fail('\\z inside a class');
          out += '$';
          continue;
        case 'Z':
          if (inClass) fail('\\Z inside a class');
          out += '(?=\\n?$)';
          continue;
        case 'x':
          if (chars[i] === '{') {
            const close = chars.indexOf('}', i);
            if (close < 0) fail('an unterminated \\x{');
            out += `\\u{${chars.slice(i + 1, close).join('')}}`;
            i = close + 1;
          } else out += '\\x';
          continue;
        case 'u':
        case 'n':
        case 'r':
        case 't':
        case 'f':
        case 'v':
        case '0':
        case 'b':
        case 'B':
        case 'k':
          out += `\\${e}`;
          continue;
        default:
          if (/[1-9]/.test(e)) {
            out += `\\${e}`;
            continue;
          }
          if (/[A-Za-z]/.test(e)) fail(`the escape \\${e}`);
          out += literal(e);
          afterQuant = false;
          continue;
      }
    }
    if (inClass) {
      if (c === ']') {
        inClass = false;
        out += ']';
      } else if (c === '[') {
        const m = /^\[:(\^?)([a-z]+):\]/.exec(chars.slice(i, i + 12).join(''));
        if (!m || !POSIX[m[2]!] || m[1]) fail('a nested character class');
        out += POSIX[m![2]!]!;
        i += m![0].length;
        continue;
      } else if (c === '&' && chars[i + 1] === '&') fail('class intersection (&&)');
      else if (c === '-') out += '-';
      else out += literal(c);
      i++;
      continue;
    }
    switch (c) {
      case '[':
        inClass = true;
        out += '[';
        i++;
        if (chars[i] === '^') {
          out += '^';
          i++;
        }
        if (chars[i] === ']') {
          out += '\\]';
          i++;
        }
        continue;
      case '(': {
        if (chars[i + 1] !== '?') {
          ciStack.push(ci());
          out += '(';
          i++;
          continue;
        }
        const rest = chars.slice(i + 2, i + 6).join('');
        if (rest.startsWith(':') || rest.startsWith('=') || rest.startsWith('!') || rest.startsWith('<=') || rest.startsWith('<!')) {
          ciStack.push(ci());
          out += '(?';
          i += 2;
          continue;
        }
        if (rest.startsWith('<')) {
          ciStack.push(ci());
          out += '(?<';
          i += 3;
          continue;
        }
        if (rest.startsWith('#')) {
          const close = chars.indexOf(')', i);
          i = close < 0 ? chars.length : close + 1;
          continue;
        }
        if (rest.startsWith('>')) fail('an atomic group (?>...)');
        const m = /^([imx]*)(?:-([imx]*))?([:)])/.exec(chars.slice(i + 2, i + 12).join(''));
        if (!m) fail(`the group syntax (?${rest}`);
        const on = m![1]!;
        const off = m![2] ?? '';
        const opt = `the inline option (?${on}${off ? '-' + off : ''}${m![3]}`;
        if (/x/.test(on + off) || off.includes('m')) fail(opt);
        if (on.includes('m')) {
          if (out !== '' || m![3] !== ')') fail(opt);
          flags += 's';
        }
        i += 2 + m![0].length;
        const value = on.includes('i') ? true : off.includes('i') ? false : ci();
        if (m![3] === ':') {
          ciStack.push(value);
          out += '(?:';
        } else ciStack[ciStack.length - 1] = value;
        continue;
      }
      case ')':
        if (ciStack.length > 1) ciStack.pop();
        out += ')';
        i++;
        continue;
      case '{': {
        const m = /^\{(\d*)(,(\d*))?\}/.exec(chars.slice(i, i + 24).join(''));
        if (m && (m[1] || m[3])) {
          out += `{${m[1] || '0'}${m[2] ? ',' + (m[3] ?? '') : ''}}`;
          i += m[0].length;
          afterQuant = true;
        } else {
          out += '\\{';
          i++;
        }
        continue;
      }
      case '}':
        out += '\\}';
        i++;
        continue;
      case ']':
        out += '\\]';
        i++;
        continue;
      case '*':
      case '+':
      case '?':
        if (quantOk && c === '+') fail('a possessive quantifier');
        if (quantOk && c === '?') {
          out += '?';
          i++;
          continue;
        }
        out += c;
        afterQuant = true;
        i++;
        continue;
      case '.':
        out += flags.includes('s') ? '[^]' : '[^\\n]';
        i++;
        continue;
      case '^':
        out += '(?<![^\\n])';
        i++;
        continue;
      case '$':
        out += '(?![^\\n])';
        i++;
        continue;
      case '|':
        out += '|';
        i++;
        continue;
      default:
        out += literal(c);
        i++;
    }
  }
  if (inClass) fail('an unterminated character class');
  try {
    return new RegExp(out, flags);
  } catch (e) {
    throw new TokenizerError(`${where}: the regex ${JSON.stringify(pattern)} cannot be compiled: ${(e as Error).message}`);
  }
}

/** A literal string as a global RegExp. */
export function literalRegex(s: string): RegExp {
  return new RegExp(s.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&'), 'gu');
}
