import { describe, expect, it } from 'vitest';
import { repoSourceCorpus, syntheticCode } from './corpus';
import { DEMO_FACTS, demoFinetuneJsonl, demoPrompt } from './demo-corpus';

describe('embedded corpora', () => {
  it('generated code is deterministic, about the size asked, and code-like', () => {
    const a = syntheticCode(20_000, 5);
    expect(a).toBe(syntheticCode(20_000, 5));
    expect(a).not.toBe(syntheticCode(20_000, 6));
    expect(a.length).toBeGreaterThanOrEqual(20_000);
    expect(a.length).toBeLessThan(21_000);
    expect(a).toMatch(/export (function|interface|class) \w+/);
  });

  it('the demo fine-tuning set is prompt/response JSONL whose prompts fit the tiny model', () => {
    const lines = demoFinetuneJsonl().trim().split('\n').map((l) => JSON.parse(l) as { prompt: string; response: string });
    expect(lines).toHaveLength(DEMO_FACTS.length * 3);
    for (const l of lines) {
      expect(l.prompt).toMatch(/^Q: .*\nA:$/);
      expect(l.response).toMatch(/^ it .*\.\n$/);
      expect(new TextEncoder().encode(l.prompt + l.response).length + 2).toBeLessThanOrEqual(64); // + BOS, EOS
    }
    expect(lines.map((l) => l.prompt)).toContain(demoPrompt(DEMO_FACTS[0]![0]));
  });

  it('finds this repository sources from a checkout', () => {
    const c = repoSourceCorpus();
    expect(c).not.toBeNull();
    expect(c!.paths.some((p) => p.endsWith('/backend/src'))).toBe(true);
    expect(c!.exclude).toContain('**/*.test.ts');
  });
});
