// Every supported architecture through the built CLI, as a user runs it: pretrain a small model from an HF
// config.json of that architecture (`rusty train --model-config`), inspect it, fine-tune it with LoRA on every
// projection and merge (`rusty finetune --targets all --merge`), then check that the merged directory and
// base + adapter generate the same greedy tokens.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syntheticCode } from './corpus';
import { cliRunner, ensureBuilt, ROOT } from './test/run-cli';

const FIXTURES = resolve(ROOT, '..', 'shared', 'fixtures');
let work: string;
const { rusty } = cliRunner({
  cwd: () => work,
  env: () => ({ ...process.env, RUSTY_PROGRESS: 'plain', RUSTY_CACHE_DIR: join(work, 'cache'), NO_COLOR: '1' }),
});

beforeAll(() => {
  ensureBuilt();
  work = mkdtempSync(join(tmpdir(), 'rusty-arch-'));
  writeFileSync(join(work, 'code.ts'), syntheticCode(8_000, 5));
}, 600_000);
afterAll(() => {
  if (work && !process.env.RUSTY_E2E_KEEP) rmSync(work, { recursive: true, force: true });
});

const ARCHS: [string, string][] = [
  ['mistral-tiny', 'MistralForCausalLM'],
  ['qwen2-tiny', 'Qwen2ForCausalLM'],
  ['qwen3-tiny', 'Qwen3ForCausalLM'],
  ['gemma3-tiny', 'Gemma3ForCausalLM'],
];
const small = ['--seq-len', '16', '--batch-size', '2', '--log-every', '1'];

describe('every architecture through the CLI', () => {
  for (const [fixture, cls] of ARCHS) {
    it(`${cls}: train --model-config, inspect, finetune --targets all --merge, generate`, async () => {
      const dir = join(work, fixture);
      mkdirSync(dir);
      // the fixture's config, with room for the default byte-level tokenizer's 259 ids
      const cfg = { ...JSON.parse(readFileSync(join(FIXTURES, fixture, 'config.json'), 'utf8')), vocab_size: 264 };
      writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
      const t = await rusty(['train', '--model-config', join(dir, 'config.json'), '--data', 'code.ts', '--out', join(dir, 'base'), '--steps', '3', ...small]);
      expect(t.code, t.stderr).toBe(0);
      const saved = JSON.parse(readFileSync(join(dir, 'base', 'config.json'), 'utf8'));
      expect(saved).toMatchObject({ architectures: [cls], model_type: cfg.model_type, vocab_size: 264, hidden_size: 64 });

      const ins = await rusty(['inspect', join(dir, 'base')]);
      expect(ins.code, ins.stderr).toBe(0);
      expect(ins.stdout).toMatch(new RegExp(`architecture +${cls} \\(${cfg.model_type}\\)`));

      const f = await rusty(['finetune', '--model', join(dir, 'base'), '--data', 'code.ts', '--out', join(dir, 'lora'), '--targets', 'all',
        '--r', '4', '--alpha', '8', '--lr', '0.02', '--steps', '3', '--merge', ...small]);
      expect(f.code, f.stderr).toBe(0);
      const adapter = JSON.parse(readFileSync(join(dir, 'lora', 'adapter_config.json'), 'utf8'));
      expect([...adapter.target_modules].sort()).toEqual(['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj']);
      expect(JSON.parse(readFileSync(join(dir, 'lora', 'merged', 'config.json'), 'utf8'))).toMatchObject({ architectures: [cls] });

      const gen = ['--prompt', 'export function', '-n', '12', '--temperature', '0'];
      const a = await rusty(['generate', '--model', join(dir, 'base'), '--adapter', join(dir, 'lora'), ...gen]);
      const m = await rusty(['generate', '--model', join(dir, 'lora', 'merged'), ...gen]);
      expect(a.code, a.stderr).toBe(0);
      expect(m.code, m.stderr).toBe(0);
      expect(m.stdout).toBe(a.stdout);
    }, 300_000);
  }

  it('refuses an unsupported architecture before loading anything, naming the field', async () => {
    const cfg = { ...JSON.parse(readFileSync(join(FIXTURES, 'qwen3-tiny', 'config.json'), 'utf8')), num_experts: 8, vocab_size: 264 };
    writeFileSync(join(work, 'moe.json'), JSON.stringify(cfg));
    const r = await rusty(['train', '--model-config', 'moe.json', '--data', 'code.ts', '--out', 'moe', '--steps', '1', ...small]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/moe\.json: field 'num_experts' is 8; Mixture-of-Experts models are not supported/);
  });
});
