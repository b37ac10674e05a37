// The corpus `rusty demo` pretrains on: TypeScript-like source of a small ML framework, generated here from a
// fixed seed, so the demo learns the same text on every machine and at every commit (never this repository's
// own sources, which change). Its doc comments say what each part does ("the cache: it keeps keys and
// values."); the fine-tuning step then teaches a question/answer format that recalls those facts.
// DEMO_CORPUS_SHA256 pins the text: demo-corpus.test.ts fails when a change to this file changes the corpus.
import { rng } from './corpus';

/** What each part of the framework does, as the doc comments of the demo corpus state it. */
// (the first four, which the fine-tuning asks about, end in different letters: a byte-level model tells them
// apart by the last characters before the question mark)
export const DEMO_PARTS: readonly (readonly [string, string])[] = [
  ['gpu', 'runs the kernels'],
  ['model', 'predicts the next token'],
  ['tokenizer', 'turns text into ids'],
  ['cache', 'keeps keys and values'],
  ['optimizer', 'updates the weights'],
  ['loader', 'reads the files'],
  ['scheduler', 'sets the rate'],
  ['sampler', 'picks a token'],
];

/** Bytes of the demo corpus and the seed it is generated with. */
export const DEMO_CORPUS_BYTES = 200_000;
export const DEMO_CORPUS_SEED = 20261124;

/** SHA-256 (hex) of `demoCorpus()`: the pinned text. */
export const DEMO_CORPUS_SHA256 = 'f975f946aabc55a807c72a007035aeab07d7f04025332f3a54d8c4d242d2d0c5';

const TYPES = ['number', 'string', 'boolean', 'Tensor', 'number[]', 'Float32Array'];
const FIELDS = ['size', 'step', 'count', 'scale', 'index', 'value', 'rank', 'limit'];
const VERBS = ['get', 'set', 'make', 'read', 'load', 'check', 'count', 'reset'];

const cap = (s: string): string => s[0]!.toUpperCase() + s.slice(1);

/** One declaration about a part, with the fact in a doc comment in one of a few phrasings. */
function declaration(r: () => number, part: string, fact: string): string {
  const pick = <T>(a: readonly T[]): T => a[Math.floor(r() * a.length)]!;
  const Part = cap(part);
  const field = pick(FIELDS);
  const type = pick(TYPES);
  const verb = pick(VERBS);
  // the fact always ends its line
  const doc = pick([`/**\n * The ${part}: it ${fact}.\n */`, `// the ${part}: it ${fact}.`, `/**\n * Each ${part}: it ${fact}.\n */`]);
  switch (Math.floor(r() * 4)) {
    case 0:
      return `${doc}\nexport class ${Part} {\n  private ${field} = 0;\n\n  ${verb}${cap(field)}(): number {\n    return this.${field};\n  }\n}\n`;
    case 1:
      return `${doc}\nexport function ${verb}${Part}(${field}: ${type}): ${Part} {\n  return new ${Part}(${field});\n}\n`;
    case 2: {
      const fields = [...new Set([pick(FIELDS), pick(FIELDS), pick(FIELDS)])];
      return `${doc}\nexport interface ${Part}Options {\n${fields.map((f) => `  ${f}: ${pick(TYPES)};`).join('\n')}\n}\n`;
    }
    default:
      return `${doc}\nconst ${part} = new ${Part}({ ${field}: ${1 + Math.floor(r() * 9)} });\n${part}.${verb}${cap(field)}();\n`;
  }
}

/**
 * The demo's pretraining corpus: about `DEMO_CORPUS_BYTES` bytes of generated TypeScript-like code, the same
 * text for the same arguments (see `DEMO_CORPUS_SHA256`).
 */
export function demoCorpus(bytes = DEMO_CORPUS_BYTES, seed = DEMO_CORPUS_SEED): string {
  const r = rng(seed);
  const parts: string[] = [];
  let total = 0;
  while (total < bytes) {
    const [part, fact] = DEMO_PARTS[Math.floor(r() * DEMO_PARTS.length)]!;
    const s = declaration(r, part, fact);
    parts.push(s);
    total += s.length + 1;
  }
  return parts.join('\n');
}

/** The facts the demo's fine-tuning set asks about: the first four parts and what they do. */
export const DEMO_FACTS: readonly (readonly [string, string])[] = DEMO_PARTS.slice(0, 4);

// short enough that prompt + answer fit the tiny model's 64-token windows
const QUESTIONS = ['Q: what does the {s} do?\nA:', 'Q: the {s}?\nA:', 'Q: and what about the {s}?\nA:'];

/** The demo prompt for a subject (the form the fine-tuning data uses). */
export function demoPrompt(subject: string): string {
  return QUESTIONS[0]!.replace('{s}', subject);
}

/** The answer the fine-tuning teaches for a fact: one line (as the corpus ends each fact's line). */
export function demoAnswer(fact: string): string {
  return ` it ${fact}.`;
}

/**
 * The demo's second corpus: question/answer pairs in a fixed format (JSONL with `prompt` and `response`: the
 * prompt is masked out of the loss, so the model learns to answer). Each response is the answer's line, newline
 * included. A tiny model fine-tuned on it visibly switches from code to this format.
 */
export function demoFinetuneJsonl(copies = 1): string {
  const lines: string[] = [];
  for (let c = 0; c < copies; c++)
    for (const q of QUESTIONS) for (const [s, a] of DEMO_FACTS) lines.push(JSON.stringify({ prompt: q.replace('{s}', s), response: `${demoAnswer(a)}\n` }));
  const r = rng(7);
  for (let i = lines.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [lines[i], lines[j]] = [lines[j]!, lines[i]!];
  }
  return lines.join('\n') + '\n';
}
