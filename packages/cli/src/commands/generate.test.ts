// The summary line of `rusty generate`: the rate after the first token, and from 3 tokens on the rate after the
// first decoding step (the step that builds the decoding kernels).
import { describe, expect, it } from 'vitest';
import { generateSummary } from './generate';

describe('generateSummary', () => {
  it('gives the rate after the first token and after the first decoding step', () => {
    // 128 tokens in 4.0 s: token 1 at 0.5 s, token 2 at 2.0 s (kernel builds), 126 more in 2.0 s
    expect(generateSummary({ tokens: 128, seconds: 4, firstTokenSeconds: 0.5, secondTokenSeconds: 2 })).toBe(
      'generate: 128 tokens in 4.0s (first token 0.5s, then 36.3 tokens/s; 63.0 tokens/s after the first decoding step, which builds its kernels)',
    );
  });

  it('leaves out what a short run cannot measure', () => {
    expect(generateSummary({ tokens: 2, seconds: 1, firstTokenSeconds: 0.5, secondTokenSeconds: 1 })).toBe('generate: 2 tokens in 1.0s (first token 0.5s, then 2.0 tokens/s)');
    expect(generateSummary({ tokens: 1, seconds: 0.5, firstTokenSeconds: 0.5, secondTokenSeconds: NaN })).toBe('generate: 1 tokens in 0.5s (first token 0.5s)');
  });
});
