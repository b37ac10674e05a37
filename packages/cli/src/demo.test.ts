// `rusty demo` end to end at the CPU size (--size tiny, also on a GPU), as a user runs it: the base model learns
// its shipped corpus, the fine-tuned model answers every taught question exactly, and the demo's LoRA run can be
// resumed from another directory. The slowest test of the suite (a few minutes on lavapipe) and the only full
// demo run in CI.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CORPUS_SHA256, DEMO_FACTS, demoAnswer, demoPrompt } from './demo-corpus';
import { cliRunner, ensureBuilt } from './test/run-cli';

let work: string;
const env = (): NodeJS.ProcessEnv => ({ ...process.env, RUSTY_PROGRESS: 'plain', RUSTY_CACHE_DIR: join(work, 'cache'), NO_COLOR: '1' });
const { rusty } = cliRunner({ cwd: () => work, env });
const show = (s: string): string => JSON.stringify(s).slice(1, -1);

beforeAll(() => {
  ensureBuilt();
  work = mkdtempSync(join(tmpdir(), 'rusty-demo-'));
}, 600_000);
afterAll(() => {
  if (work && !process.env.RUSTY_E2E_KEEP) rmSync(work, { recursive: true, force: true });
});

describe('rusty demo', () => {
  it('at the CPU size: the base model learns the corpus, the fine-tuned one gives every taught answer exactly; its LoRA run resumes', async () => {
    const r = await rusty(['demo', '--out', 'demo', '--size', 'tiny', '--log-every', '100']);
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;
    expect(r.stderr).toContain(`train: data: the demo corpus (generated TypeScript-like code, sha256 ${DEMO_CORPUS_SHA256.slice(0, 12)}`);
    // the base model learned its corpus (a byte-level model: uniform guessing is perplexity 259)
    const ppl = Number(/validation \d+\.\d+, perplexity (\d+\.\d+)/.exec(out)?.[1]);
    expect(ppl).toBeLessThan(4.5);
    // after fine-tuning, each question gets its taught answer, exactly (and then the end of the sequence)
    const after = out.slice(out.indexOf('4. Samples after fine-tuning'));
    for (const [subject, fact] of DEMO_FACTS) {
      const block = after.slice(after.indexOf(`   ${show(demoPrompt(subject))}\n`));
      const taught = /^ {5}taught: (.*)$/m.exec(block)?.[1];
      const got = /^ {5}after: {2}(.*)$/m.exec(block)?.[1];
      expect(taught).toBe(show(demoAnswer(fact)));
      expect(got, `${subject}\n${out}`).toBe(taught);
    }
    expect(out).toMatch(new RegExp(`taught answers reproduced exactly: ${DEMO_FACTS.length} of ${DEMO_FACTS.length}`));

    // the demo's LoRA run resumes (two more steps) from another directory: its base model and data are found
    const ft = JSON.parse(readFileSync(join(work, 'demo', 'lora', 'checkpoints', 'run.json'), 'utf8')) as { options: { steps: number; model: string } };
    expect(ft.options.model).toBe(join(work, 'demo', 'base'));
    mkdirSync(join(work, 'elsewhere'));
    const res = await rusty(['finetune', '--out', join(work, 'demo', 'lora'), '--resume', '--steps', String(ft.options.steps + 2), '--log-every', '1'], undefined, join(work, 'elsewhere'));
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain(`resumed from the checkpoint of step ${ft.options.steps}`);
    expect(res.stdout).toContain(`finetune: finished step ${ft.options.steps + 2}`);
  }, 600_000);
});
