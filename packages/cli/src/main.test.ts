import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from './main';

afterEach(() => vi.restoreAllMocks());

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  vi.spyOn(console, 'log').mockImplementation((...a) => void out.push(a.join(' ') + '\n'));
  vi.spyOn(console, 'error').mockImplementation((...a) => void err.push(a.join(' ') + '\n'));
  return { out, err };
}

describe('rusty CLI', () => {
  it('devices lists the adapter, features and limits', async () => {
    const { out } = capture();
    expect(await main(['devices'])).toBe(0);
    const text = out.join('');
    expect(text).toMatch(/^adapter\s+\S/m);
    expect(text).toContain('maxStorageBufferBindingSize');
    expect(text).toMatch(/(yes|no )\s+native f16/);
  });

  it('devices --json is machine-readable', async () => {
    const { out } = capture();
    expect(await main(['devices', '--json'])).toBe(0);
    const info = JSON.parse(out.join(''));
    expect(typeof info.limits.maxBufferSize).toBe('number');
    expect(info.features).toHaveProperty('shaderF16');
  });

  it('rejects unknown commands and flags with one line and exit code 2', async () => {
    const { err } = capture();
    expect(await main(['frobnicate'])).toBe(2);
    expect(await main(['devices', '--bogus'])).toBe(2);
    expect(err.join('')).toMatch(/unknown command 'frobnicate'/);
    expect(err.join('')).toMatch(/unknown option '--bogus'/);
    expect(err.join('')).not.toMatch(/\n\s+at /);
  });
});
