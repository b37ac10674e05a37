import { z } from 'zod';
import { TokenizerError } from '../errors';
import { literalRegex, translateRegex } from './regex';

/**
 * Validate one component of a tokenizer.json against its schema.
 * @param where e.g. `tokenizer.json: pre_tokenizer.pretokenizers[1] (Split)`, used in the error message
 */
export function parseComponent<T extends z.ZodType>(schema: T, json: unknown, where: string): z.output<T> {
  const r = schema.safeParse(json);
  if (r.success) return r.data;
  const i = r.error.issues[0]!;
  const path = i.path.length ? `'${i.path.map(String).join('.')}': ` : '';
  throw new TokenizerError(`${where}: ${path}${i.message}`);
}

/** The `type` of a component object. */
export function componentType(json: unknown, where: string): string {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new TokenizerError(`${where}: expected an object with a "type"`);
  const t = (json as { type?: unknown }).type;
  if (typeof t !== 'string') throw new TokenizerError(`${where}: missing "type"`);
  return t;
}

export function unsupported(where: string, kind: string, type: string, supported: readonly string[]): TokenizerError {
  return new TokenizerError(`${where}: ${kind} type '${type}' is not supported (supported: ${supported.join(', ')})`);
}

/** `{"String": "..."}` or `{"Regex": "..."}`, as used by Split, Replace. */
export const patternSchema = z.union([z.object({ String: z.string() }), z.object({ Regex: z.string() })]);

/** A global RegExp for a pattern object (`String` taken literally, `Regex` translated from Oniguruma). */
export function compilePattern(p: z.output<typeof patternSchema>, where: string): RegExp {
  return 'String' in p ? literalRegex(p.String) : translateRegex(p.Regex, where);
}
