import { z } from 'zod';
import { TokenizerError } from '../errors';
import { componentType, parseComponent, unsupported } from './component';

/** Ids and their token strings. */
export interface Encoding {
  ids: number[];
  tokens: string[];
}

/** A post-processor: the encodings of the sequence(s) in, the encodings with special tokens added out. */
export interface PostProcessor {
  process(encodings: Encoding[], addSpecialTokens: boolean): Encoding[];
  /** The special tokens a template puts before / after a single sequence (for bos/eos detection). */
  readonly singleAround?: { before: string[]; after: string[] };
}

const SUPPORTED = ['TemplateProcessing', 'ByteLevel', 'Sequence', 'BertProcessing', 'RobertaProcessing'];

const pieceSchema = z.union([
  z.object({ SpecialToken: z.object({ id: z.string(), type_id: z.number().int().default(0) }) }),
  z.object({ Sequence: z.object({ id: z.enum(['A', 'B']), type_id: z.number().int().default(0) }) }),
]);
const templateSchema = z.object({
  single: z.array(pieceSchema),
  pair: z.array(pieceSchema),
  special_tokens: z.record(z.string(), z.object({ id: z.string(), ids: z.array(z.number().int().nonnegative()), tokens: z.array(z.string()) })).default({}),
});
const tokenPair = z.tuple([z.string(), z.number().int().nonnegative()]);

/** Concatenate encodings (loops, not flatMap: the arrays can hold millions of ids). */
export function concat(encs: Encoding[]): Encoding {
  let n = 0;
  let m = 0;
  for (const e of encs) {
    n += e.ids.length;
    m += e.tokens.length;
  }
  const ids: number[] = new Array(n);
  const tokens: string[] = new Array(m);
  n = m = 0;
  for (const e of encs) {
    for (let i = 0; i < e.ids.length; i++) ids[n++] = e.ids[i]!;
    for (let i = 0; i < e.tokens.length; i++) tokens[m++] = e.tokens[i]!;
  }
  return { ids, tokens };
}

function template(json: unknown, where: string): PostProcessor {
  const o = parseComponent(templateSchema, json, where);
  for (const t of [...o.single, ...o.pair])
    if ('SpecialToken' in t && !o.special_tokens[t.SpecialToken.id])
      throw new TokenizerError(`${where}: the template uses special token '${t.SpecialToken.id}', which is missing from special_tokens`);
  for (const [k, v] of Object.entries(o.special_tokens))
    if (v.ids.length !== v.tokens.length) throw new TokenizerError(`${where}: special_tokens '${k}' has ${v.ids.length} ids but ${v.tokens.length} tokens`);
  const apply = (tpl: z.output<typeof pieceSchema>[], a: Encoding, b: Encoding | undefined): Encoding => {
    const parts: Encoding[] = [];
    for (const t of tpl) {
      if ('SpecialToken' in t) {
        const sp = o.special_tokens[t.SpecialToken.id]!;
        parts.push({ ids: sp.ids, tokens: sp.tokens });
      } else if (t.Sequence.id === 'A') parts.push(a);
      else if (b) parts.push(b);
    }
    return concat(parts);
  };
  const firstSeq = o.single.findIndex((t) => 'Sequence' in t);
  const lastSeq = o.single.length - 1 - [...o.single].reverse().findIndex((t) => 'Sequence' in t);
  const specials = (ts: typeof o.single) => ts.flatMap((t) => ('SpecialToken' in t ? o.special_tokens[t.SpecialToken.id]!.tokens : []));
  return {
    process(encs, add) {
      if (!add) return encs;
      return [encs.length > 1 ? apply(o.pair, encs[0]!, encs[1]) : apply(o.single, encs[0]!, undefined)];
    },
    singleAround: firstSeq < 0 ? undefined : { before: specials(o.single.slice(0, firstSeq)), after: specials(o.single.slice(lastSeq + 1)) },
  };
}

/** `cls A sep` / `cls A sep B sep` (Bert), `cls A sep` / `cls A sep sep B sep` (Roberta). */
function clsSep(json: unknown, where: string, roberta: boolean): PostProcessor {
  const o = parseComponent(z.object({ cls: tokenPair, sep: tokenPair }), json, where);
  const cls: Encoding = { ids: [o.cls[1]], tokens: [o.cls[0]] };
  const sep: Encoding = { ids: [o.sep[1]], tokens: [o.sep[0]] };
  return {
    process(encs, add) {
      if (!add) return encs;
      const [a, b] = encs;
      if (!b) return [concat([cls, a!, sep])];
      return [concat(roberta ? [cls, a!, sep, sep, b, sep] : [cls, a!, sep, b, sep])];
    },
    singleAround: { before: [o.cls[0]], after: [o.sep[0]] },
  };
}

/**
 * Build a post-processor from its tokenizer.json object (null when there is none).
 * @throws TokenizerError naming `where` for an unknown or malformed post-processor
 */
export function buildPostProcessor(json: unknown, where: string): PostProcessor | null {
  if (json === null || json === undefined) return null;
  const type = componentType(json, where);
  const at = `${where} (${type})`;
  switch (type) {
    case 'TemplateProcessing':
      return template(json, at);
    case 'ByteLevel':
      return { process: (encs) => encs };
    case 'BertProcessing':
      return clsSep(json, at, false);
    case 'RobertaProcessing':
      return clsSep(json, at, true);
    case 'Sequence': {
      const { processors } = parseComponent(z.object({ processors: z.array(z.unknown()) }), json, at);
      const parts = processors.map((p, i) => buildPostProcessor(p, `${where}.processors[${i}]`)).filter((p): p is PostProcessor => !!p);
      return {
        process: (encs, add) => parts.reduce((acc, p) => p.process(acc, add), encs),
        singleAround: parts.find((p) => p.singleAround)?.singleAround,
      };
    }
    default:
      throw unsupported(where, 'post-processor', type, SUPPORTED);
  }
}
