/**
 * A small glob matcher for include/exclude patterns over `/`-separated relative paths:
 * `*` (any run of characters except `/`), `?` (one character except `/`), `**` (any number of whole path
 * segments, including none), `[abc]` / `[a-z]` / `[!a]` classes and `{a,b}` alternatives.
 * A pattern without `/` matches the file name at any depth (gitignore style: `*.md` matches `docs/a.md`);
 * a pattern with `/` is anchored at the root (`src/*.ts` matches `src/a.ts`, not `src/x/a.ts`).
 */
export function globToRegExp(pattern: string): RegExp {
  let p = pattern.replace(/\\/g, '/').replace(/^\.\//, '');
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  let re = '';
  let i = 0;
  let braces = 0;
  while (i < p.length) {
    const c = p[i]!;
    if (c === '*') {
      if (p[i + 1] === '*') {
        // '**' as a whole segment: zero or more segments
        const atStart = i === 0 || p[i - 1] === '/';
        const atEnd = i + 2 === p.length || p[i + 2] === '/';
        if (atStart && atEnd) {
          if (i + 2 === p.length) re += '.*';
          else re += '(?:[^/]*/)*';
          i += i + 2 === p.length ? 2 : 3;
          continue;
        }
        re += '[^/]*';
        i += 2;
        continue;
      }
      re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = p.indexOf(']', i + 2);
      if (end < 0) re += '\\[';
      else {
        let cls = p.slice(i + 1, end);
        if (cls.startsWith('!')) cls = '^' + cls.slice(1);
        re += '[' + cls.replace(/\\/g, '\\\\') + ']';
        i = end;
      }
    } else if (c === '{') {
      braces++;
      re += '(?:';
    } else if (c === '}' && braces > 0) {
      braces--;
      re += ')';
    } else if (c === ',' && braces > 0) re += '|';
    else re += c.replace(/[.+^$()|\\]/g, '\\$&');
    i++;
  }
  return new RegExp(`^${anchored ? '' : '(?:.*/)?'}${re}$`);
}

/** Does the relative path `path` match `pattern` (see `globToRegExp`)? */
export function matchGlob(path: string, pattern: string | RegExp): boolean {
  const re = typeof pattern === 'string' ? globToRegExp(pattern) : pattern;
  return re.test(path.replace(/\\/g, '/').replace(/^\.\//, ''));
}

/** Filter relative paths by include patterns (none: everything) and exclude patterns. */
export function filterPaths(paths: readonly string[], include: readonly string[] = [], exclude: readonly string[] = []): string[] {
  const inc = include.map(globToRegExp);
  const exc = exclude.map(globToRegExp);
  return paths.filter((p) => (!inc.length || inc.some((r) => matchGlob(p, r))) && !exc.some((r) => matchGlob(p, r)));
}
