import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEMO_CORPUS_BYTES, DEMO_CORPUS_SHA256, DEMO_FACTS, DEMO_PARTS, demoCorpus } from './demo-corpus';

describe('the demo corpus', () => {
  it('is pinned: the text rusty demo pretrains on has the recorded SHA-256', () => {
    const text = demoCorpus();
    expect(createHash('sha256').update(text).digest('hex')).toBe(DEMO_CORPUS_SHA256);
    expect(text.length).toBeGreaterThanOrEqual(DEMO_CORPUS_BYTES);
    expect(text.length).toBeLessThan(DEMO_CORPUS_BYTES + 1000);
  });

  it('is code whose doc comments state what every part does, the facts the fine-tuning asks about among them', () => {
    const text = demoCorpus();
    expect(text).toMatch(/^export (function|interface|class) \w+/m);
    for (const [part, fact] of DEMO_PARTS) expect(text).toContain(`the ${part}: it ${fact}.`);
    expect(DEMO_FACTS.length).toBe(4);
    for (const f of DEMO_FACTS) expect(DEMO_PARTS).toContainEqual(f);
  });
});
