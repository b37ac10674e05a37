import { testing } from '@rusty/backend';
import { describe, expect, it } from 'vitest';
import { LongestMatchTrie } from './longest-match-trie';

/** Every match as [pattern index, start, end], scanning as the added-token splitter does. */
function all(patterns: string[], text: string): [number, number, number][] {
  const trie = new LongestMatchTrie(patterns.map((pattern, i) => ({ pattern, value: i })));
  const out: [number, number, number][] = [];
  for (let at = 0, s: number; (s = trie.find(text, at)) >= 0; at = trie.matchEnd) out.push([trie.matchValue!, s, trie.matchEnd]);
  return out;
}

/** The definition, by brute force: the first position where any pattern starts; there the longest pattern, the
 *  first given of equal ones; then on after it. */
function reference(patterns: string[], text: string): [number, number, number][] {
  const out: [number, number, number][] = [];
  for (let i = 0; i < text.length; ) {
    let best = -1;
    patterns.forEach((p, k) => {
      if (p.length && text.startsWith(p, i) && (best < 0 || p.length > patterns[best]!.length)) best = k;
    });
    if (best < 0) i++;
    else {
      out.push([best, i, i + patterns[best]!.length]);
      i += patterns[best]!.length;
    }
  }
  return out;
}

describe('LongestMatchTrie', () => {
  it("reports leftmost-longest matches as the aho-corasick crate's LeftmostLongest mode does", () => {
    // the crate's own leftmost-longest test vectors (those without empty patterns): [patterns, text, matches]
    const cases: [string[], string, [number, number, number][]][] = [
      [['ab', 'abcd'], 'abcd', [[1, 0, 4]]],
      [['abcd', 'bcd', 'cd', 'b'], 'abcd', [[0, 0, 4]]],
      [['a', 'ab'], 'a', [[0, 0, 1]]],
      [['a', 'ab'], 'ab', [[1, 0, 2]]],
      [['ab', 'a'], 'a', [[1, 0, 1]]],
      [['ab', 'a'], 'ab', [[0, 0, 2]]],
      [['abcdefg', 'bcde', 'bcdef'], 'abcdef', [[2, 1, 6]]],
      [['abcdefg', 'bcdef', 'bcde'], 'abcdef', [[1, 1, 6]]],
      [['abcd', 'b', 'bce'], 'abce', [[2, 1, 4]]],
      [['a', 'abcdefghi', 'hz', 'abcdefgh'], 'abcdefghz', [[3, 0, 8]]],
      [['a', 'abab'], 'abab', [[1, 0, 4]]],
      [['abcd', 'b', 'ce'], 'abce', [[1, 1, 2], [2, 2, 4]]],
      [['a', 'ab'], 'xayabbbz', [[0, 1, 2], [1, 3, 5]]],
      // identical patterns: the first one given
      [['ab', 'ab'], 'abcd', [[0, 0, 2]]],
      // non-overlapping: the search goes on after a match, never inside it
      [['aa'], 'aaaaa', [[0, 0, 2], [0, 2, 4]]],
    ];
    for (const [patterns, text, want] of cases) expect(all(patterns, text), `${JSON.stringify(patterns)} in ${text}`).toEqual(want);
    expect(new LongestMatchTrie<number>([]).find('abc', 0)).toBe(-1);
    expect(new LongestMatchTrie([{ pattern: '', value: 0 }]).empty).toBe(true);
  });

  it('matches UTF-16 code units, astral characters included', () => {
    expect(all(['🚀x', '🚀', 'é'], 'a🚀x🚀é')).toEqual([[0, 1, 4], [1, 4, 6], [2, 6, 7]]);
  });

  it('agrees with the brute-force definition on many overlapping patterns and random texts', () => {
    const r = testing.rng(11);
    const alphabet = ['<', '>', 's', 'a', '/', '\u{1F680}'];
    const word = (n: number) => Array.from({ length: n }, () => alphabet[Math.floor(r() * alphabet.length)]).join('');
    for (let round = 0; round < 20; round++) {
      const patterns = Array.from({ length: 1 + Math.floor(r() * 60) }, () => word(1 + Math.floor(r() * 5)));
      for (let k = 0; k < 20; k++) {
        const text = word(Math.floor(r() * 40));
        expect(all(patterns, text), `${JSON.stringify(patterns)} in ${JSON.stringify(text)}`).toEqual(reference(patterns, text));
      }
    }
  });
});
