// The page's fine-tuning defaults and built-in preset are those of the CLI, which owns them: this reads the
// CLI's flag table (`rusty finetune`) and size presets (`rusty train`) and fails when the page's copy drifts.
import { describe, expect, it } from 'vitest';
import { finetuneSpec } from '../../../packages/cli/src/commands/finetune';
import { PRESETS } from '../../../packages/cli/src/presets';
import { FINETUNE_DEFAULTS, TINY_PRESET } from './options';

const camel = (s: string) => s.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

describe('options', () => {
  it('every fine-tuning option of the page has the default of the same rusty finetune flag', () => {
    const flags = finetuneSpec.flags as Record<string, { default?: unknown }>;
    const byCamel = new Map(Object.entries(flags).map(([k, f]) => [camel(k), f.default]));
    for (const [k, v] of Object.entries(FINETUNE_DEFAULTS)) {
      expect(byCamel.has(k), `rusty finetune has no --${k}`).toBe(true);
      expect(v, k).toEqual(byCamel.get(k) ?? (typeof v === 'boolean' ? false : undefined));
    }
  });

  it('the built-in start is rusty train\'s tiny preset', () => {
    expect(TINY_PRESET).toEqual(PRESETS.tiny);
  });
});
