import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MetricsWriter, readMetrics } from './metrics';

describe('MetricsWriter', () => {
  it('appends JSON lines; a resumed run drops the lines of steps after its checkpoint', () => {
    const f = join(mkdtempSync(join(tmpdir(), 'rusty-metrics-')), 'sub', 'm.jsonl');
    const w = new MetricsWriter(f);
    for (let s = 1; s <= 5; s++) w.write({ kind: 'train', step: s, loss: 1 / s });
    w.write({ kind: 'eval', step: 4, loss: 0.3 });
    w.close();
    expect(readMetrics(f).length).toBe(6);
    writeFileSync(f, readMetrics(f).map((l) => JSON.stringify(l)).join('\n') + '\n{"broken\n');
    const w2 = new MetricsWriter(f, { keepUpToStep: 3 });
    w2.write({ kind: 'train', step: 4, loss: 0.25 });
    w2.close();
    expect(readMetrics(f).map((l) => l.step)).toEqual([1, 2, 3, 4]);
  });
});
