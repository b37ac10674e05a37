import { describe, expect, it } from 'vitest';
import { describeError, OOM_HINT } from './errors';
import { fmtCount, fmtDuration, Progress } from './progress';
import { lineChartSvg, lossCurveSvg, niceTicks, smooth } from './svg';
import { OutOfMemoryError, ShapeError } from '@rusty/backend';

describe('svg', () => {
  it('nice ticks are round numbers covering the range', () => {
    expect(niceTicks(0, 10, 5)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(niceTicks(1.83, 5.51, 6)).toEqual([2, 3, 4, 5]);
    expect(niceTicks(2.05, 2.31, 5)).toEqual([2.1, 2.2, 2.3]);
    expect(niceTicks(-0.3, 0.3, 6)).toEqual([-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3]);
    expect(niceTicks(3, 3)).toEqual([3]);
  });

  it('smoothing is a bias-corrected moving average', () => {
    const s = smooth([[1, 4], [2, 2], [3, NaN], [4, 2]], 0.5);
    expect(s.map((p) => p[0])).toEqual([1, 2, 4]);
    expect(s[0]![1]).toBeCloseTo(4);
    expect(s[1]![1]).toBeCloseTo((0.25 * 4 + 0.5 * 2) / 0.75);
  });

  it('a loss curve has axes, labels, a polyline per series and evaluation dots', () => {
    const records = [
      ...Array.from({ length: 20 }, (_, i) => ({ kind: 'train', step: i + 1, loss: 5 - i * 0.1 })),
      { kind: 'eval', step: 10, loss: 4.2 },
      { kind: 'eval', step: 20, loss: 3.4 },
    ];
    const svg = lossCurveSvg(records, 'run <1> & co');
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg" width="720" height="420"/);
    expect(svg).toContain('run &lt;1&gt; &amp; co');
    expect(svg.match(/<polyline/g)).toHaveLength(3); // raw, smoothed, evaluations
    expect(svg.match(/<circle/g)?.length).toBeGreaterThanOrEqual(2);
    expect(svg).toContain('>optimizer step</text>');
    expect(svg).toContain('cross-entropy loss');
    expect(svg).toContain('>validation loss</text>');
    // every coordinate inside the picture
    for (const m of svg.matchAll(/points="([^"]+)"/g))
      for (const pt of m[1]!.split(' ')) {
        const [x, y] = pt.split(',').map(Number);
        expect(x).toBeGreaterThanOrEqual(0);
        expect(x).toBeLessThanOrEqual(720);
        expect(y).toBeGreaterThanOrEqual(0);
        expect(y).toBeLessThanOrEqual(420);
      }
  });

  it('copes with a single point and with no data', () => {
    expect(lossCurveSvg([{ kind: 'train', step: 1, loss: 2 }], 't')).toContain('<circle');
    expect(lineChartSvg([], {})).toContain('</svg>');
  });
});

class FakeStream {
  out = '';
  isTTY: boolean;
  columns = 100;
  constructor(tty: boolean) {
    this.isTTY = tty;
  }
  write(s: string): boolean {
    this.out += s;
    return true;
  }
}

describe('progress', () => {
  it('formats durations and counts', () => {
    expect(fmtDuration(3.21)).toBe('3.2s');
    expect(fmtDuration(75)).toBe('1m15s');
    expect(fmtDuration(3725)).toBe('1h02m');
    expect(fmtCount(950)).toBe('950');
    expect(fmtCount(12345)).toBe('12.3k');
    expect(fmtCount(4.5e6)).toBe('4.50M');
  });

  it('plain mode prints a line every N steps and at the end', () => {
    const s = new FakeStream(false);
    const p = new Progress({ label: 'train', total: 10, every: 4, stream: s as unknown as NodeJS.WriteStream });
    expect(p.mode).toBe('plain');
    for (let i = 1; i <= 10; i++) p.update({ step: i, loss: 5 - i / 10, tokens: 100 });
    p.finish();
    const lines = s.out.trim().split('\n');
    expect(lines.map((l) => /step (\d+)\/10/.exec(l)?.[1])).toEqual(['1', '5', '9', '10']);
    expect(lines[3]).toMatch(/^train step 10\/10 {2}loss 4\.0000 {2}.*tok\/s {2}elapsed/);
    expect(lines[1]).toMatch(/ETA /);
  });

  it('bar mode redraws one line and keeps logged lines above it', () => {
    const s = new FakeStream(true);
    const p = new Progress({ label: 'train', total: 4, stream: s as unknown as NodeJS.WriteStream, mode: 'bar' });
    p.update({ step: 1, loss: 3 });
    p.log('validation: loss 2.9');
    p.update({ step: 4, loss: 2 });
    p.finish();
    expect(s.out).toContain('\r\x1b[2Ktrain [');
    expect(s.out).toContain('\r\x1b[2Kvalidation: loss 2.9\n');
    expect(s.out).toMatch(/4\/4 {2}loss 2\.0000/);
    expect(s.out.endsWith('\n')).toBe(true);
  });
});

describe('error lines', () => {
  it('one line, with a hint for out-of-memory', () => {
    expect(describeError(new ShapeError('x.safetensors: tensor a has shape [1]\nmore'))).toBe('x.safetensors: tensor a has shape [1] more');
    const oom = describeError(new OutOfMemoryError('GPU out of memory: allocation failed. Try a smaller batch or sequence length, gradient checkpointing, or 16-bit weights.'));
    expect(oom).toBe(`out of GPU memory: allocation failed; ${OOM_HINT}`);
    expect(describeError(new RangeError('Array buffer allocation failed'))).toMatch(/^out of host memory/);
    expect(describeError(Object.assign(new Error('ENOENT: x'), { code: 'ENOENT', path: 'a/b' }))).toBe('a/b: no such file or directory');
    expect(describeError(new TypeError('x is undefined'))).toMatch(/^internal error: x is undefined \(run again with --debug/);
  });
});
