/**
 * Leftmost-longest search for a set of strings, as an Aho-Corasick automaton in `LeftmostLongest` mode reports
 * matches (what Hugging Face `tokenizers` uses to find added tokens): scanning from the left, the first position
 * where some pattern starts wins, and of the patterns starting there the longest; the search resumes after it.
 * Of identical patterns the first one given wins.
 *
 * A trie over UTF-16 code units: the root's children sit in a table indexed by code unit (so a position where no
 * pattern starts costs one array read), every other edge in one open-addressing hash table keyed by
 * (node, code unit). Finding the match at a position walks the trie as far as the text follows it, so the cost is
 * bounded by the length of the longest pattern, however many patterns there are.
 */
export class LongestMatchTrie<T> {
  /** Code unit -> child of the root (0: none; node 0 is the root). */
  private readonly rootNext: Int32Array | null;
  private readonly keyNode: Int32Array;
  private readonly keyUnit: Uint16Array;
  private readonly child: Int32Array;
  private readonly mask: number;
  /** Node -> index of the pattern ending there, or -1. */
  private readonly ends: Int32Array;
  private readonly values: T[] = [];
  /** End (exclusive) of the last match `find` returned. */
  matchEnd = 0;
  /** Value of the last match `find` returned. */
  matchValue: T | undefined = undefined;

  constructor(patterns: readonly { pattern: string; value: T }[]) {
    let units = 0;
    for (const p of patterns) units += p.pattern.length;
    this.ends = new Int32Array(units + 1).fill(-1);
    let cap = 16;
    while (cap < units * 2) cap *= 2;
    this.mask = cap - 1;
    this.keyNode = new Int32Array(cap).fill(-1);
    this.keyUnit = new Uint16Array(cap);
    this.child = new Int32Array(cap);
    this.rootNext = units ? new Int32Array(65536) : null;
    let nodes = 1;
    for (const { pattern, value } of patterns) {
      if (!pattern.length) continue;
      const root = this.rootNext!;
      const c0 = pattern.charCodeAt(0);
      let node = root[c0]!;
      if (!node) root[c0] = node = nodes++;
      for (let i = 1; i < pattern.length; i++) {
        const c = pattern.charCodeAt(i);
        const h = this.slot(node, c);
        if (this.keyNode[h] === -1) {
          this.keyNode[h] = node;
          this.keyUnit[h] = c;
          this.child[h] = nodes++;
        }
        node = this.child[h]!;
      }
      if (this.ends[node] === -1) {
        this.ends[node] = this.values.length;
        this.values.push(value);
      }
    }
  }

  /** No pattern at all (the search always fails). */
  get empty(): boolean {
    return this.values.length === 0;
  }

  private slot(node: number, unit: number): number {
    let h = (Math.imul(node, 0x9e3779b1) ^ Math.imul(unit, 0x85ebca77)) & this.mask;
    while (this.keyNode[h] !== -1 && (this.keyNode[h] !== node || this.keyUnit[h] !== unit)) h = (h + 1) & this.mask;
    return h;
  }

  /**
   * The start of the leftmost-longest match in `s` at or after `from` (its end and value in `matchEnd` and
   * `matchValue`), or -1 when there is none.
   */
  find(s: string, from: number): number {
    const root = this.rootNext;
    if (!root) return -1;
    const n = s.length;
    const keyNode = this.keyNode;
    const keyUnit = this.keyUnit;
    const mask = this.mask;
    for (let i = from; i < n; i++) {
      let node = root[s.charCodeAt(i)]!;
      if (!node) continue;
      let best = this.ends[node]!;
      let bestEnd = i + 1;
      for (let j = i + 1; j < n; j++) {
        const c = s.charCodeAt(j);
        let h = (Math.imul(node, 0x9e3779b1) ^ Math.imul(c, 0x85ebca77)) & mask;
        let k: number;
        while ((k = keyNode[h]!) !== -1 && (k !== node || keyUnit[h] !== c)) h = (h + 1) & mask;
        if (k === -1) break;
        node = this.child[h]!;
        const e = this.ends[node]!;
        if (e >= 0) {
          best = e;
          bestEnd = j + 1;
        }
      }
      if (best >= 0) {
        this.matchEnd = bestEnd;
        this.matchValue = this.values[best];
        return i;
      }
    }
    return -1;
  }
}
