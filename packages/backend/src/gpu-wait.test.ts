import { afterEach, describe, expect, it, vi } from 'vitest';
import { waitGpu } from './gpu-wait';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('GPU waits', () => {
  it('say on stderr what they wait for once a wait passes 60 s, and nothing for a wait that ends sooner', async () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => (lines.push(String(s)), true));
    let resolve!: (v: number) => void;
    const slow = waitGpu('a buffer read', new Promise<number>((r) => (resolve = r)));
    await vi.advanceTimersByTimeAsync(59_000);
    expect(lines).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(lines).toEqual(['rusty: still waiting for the GPU after 60 s (a buffer read)\n']);
    resolve(7);
    await expect(slow).resolves.toBe(7);
    lines.length = 0;
    await expect(waitGpu('sync', Promise.resolve(1))).resolves.toBe(1);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(lines).toEqual([]);
  });
});
