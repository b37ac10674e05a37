/** How the pieces a pattern matches relate to the text around them when a string is split. */
export type SplitBehavior = 'Removed' | 'Isolated' | 'MergedWithPrevious' | 'MergedWithNext' | 'Contiguous';

export const SPLIT_BEHAVIORS: readonly SplitBehavior[] = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

/** [start, end) in UTF-16 units, and whether the pattern matched it. */
type Span = [number, number, boolean];

function midPair(s: string, i: number): boolean {
  if (i <= 0 || i >= s.length) return false;
  const hi = s.charCodeAt(i - 1);
  const lo = s.charCodeAt(i);
  return hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff;
}

/** Matches of a global regex, as spans covering the whole string (gaps marked as non-matches). An empty match
 *  right after the previous match is dropped, as Oniguruma's iterator does. */
export function regexSpans(re: RegExp, s: string): Span[] {
  if (s.length === 0) return [[0, 0, false]];
  const out: Span[] = [];
  let prev = 0;
  let lastEnd = -1;
  re.lastIndex = 0;
  for (const m of s.matchAll(re)) {
    const start = m.index!;
    const end = start + m[0].length;
    if (start === end && start === lastEnd) continue;
    // V8 tries lookarounds between the two halves of a surrogate pair; Oniguruma never matches there
    if (start === end && midPair(s, start)) continue;
    if (prev !== start) out.push([prev, start, false]);
    out.push([start, end, true]);
    prev = end;
    lastEnd = end;
  }
  if (prev !== s.length) out.push([prev, s.length, false]);
  return out;
}

/** Every non-overlapping occurrence of a literal string, as spans covering the whole string. */
export function literalSpans(lit: string, s: string): Span[] {
  if (lit.length === 0 || s.length === 0) return [[0, s.length, false]];
  const out: Span[] = [];
  let prev = 0;
  for (let i = s.indexOf(lit); i >= 0; i = s.indexOf(lit, i + lit.length)) {
    if (prev !== i) out.push([prev, i, false]);
    out.push([i, i + lit.length, true]);
    prev = i + lit.length;
  }
  if (prev !== s.length) out.push([prev, s.length, false]);
  return out;
}

/** Each character for which `pred` holds is a match of its own. */
export function charSpans(pred: (c: string) => boolean, s: string): Span[] {
  if (s.length === 0) return [[0, 0, false]];
  const out: Span[] = [];
  let prev = 0;
  let i = 0;
  for (const c of s) {
    if (pred(c)) {
      if (prev !== i) out.push([prev, i, false]);
      out.push([i, i + c.length, true]);
      prev = i + c.length;
    }
    i += c.length;
  }
  if (prev !== s.length) out.push([prev, s.length, false]);
  return out;
}

/** Apply a split behaviour to spans and return the non-empty pieces with their start offsets. */
export function splitSpans(s: string, spans: Span[], behavior: SplitBehavior, invert = false): [number, string][] {
  if (invert) for (const sp of spans) sp[2] = !sp[2];
  let pieces: [number, number][] = [];
  switch (behavior) {
    case 'Isolated':
      pieces = spans.map(([a, b]) => [a, b]);
      break;
    case 'Removed':
      pieces = spans.filter((sp) => !sp[2]).map(([a, b]) => [a, b]);
      break;
    case 'MergedWithPrevious': {
      let prevMatch = false;
      for (const [a, b, m] of spans) {
        const last = pieces[pieces.length - 1];
        if (m && !prevMatch && last) last[1] = b;
        else pieces.push([a, b]);
        prevMatch = m;
      }
      break;
    }
    case 'MergedWithNext': {
      let nextMatch = false;
      for (let k = spans.length - 1; k >= 0; k--) {
        const [a, b, m] = spans[k]!;
        const last = pieces[pieces.length - 1];
        if (m && !nextMatch && last) last[0] = a;
        else pieces.push([a, b]);
        nextMatch = m;
      }
      pieces.reverse();
      break;
    }
    case 'Contiguous': {
      let prevMatch = false;
      for (const [a, b, m] of spans) {
        const last = pieces[pieces.length - 1];
        if (m === prevMatch && last) last[1] = b;
        else pieces.push([a, b]);
        prevMatch = m;
      }
      break;
    }
  }
  const out: [number, string][] = [];
  for (const [a, b] of pieces) if (b > a) out.push([a, s.slice(a, b)]);
  return out;
}
