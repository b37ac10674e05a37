// The fine-tuning option form: one input per `rusty finetune` flag (same names and defaults), read back and
// validated with the CLI's rules; errors are ConfigErrors naming the flag.
import { ConfigError } from '@rusty/backend';
import { ALL_TARGETS, FINETUNE_DEFAULTS, type FinetuneOptions } from './options';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

const FIELDS: [keyof FinetuneOptions, string, 'int' | 'num' | 'choice' | 'list' | 'bool', string[]?][] = [
  ['r', 'LoRA rank (r)', 'int'],
  ['alpha', 'alpha', 'num'],
  ['targets', 'targets', 'list'],
  ['seqLen', 'seq-len', 'int'],
  ['steps', 'steps', 'int'],
  ['batchSize', 'batch-size', 'int'],
  ['gradientAccumulation', 'gradient-accumulation', 'int'],
  ['lr', 'lr', 'num'],
  ['lrSchedule', 'lr-schedule', 'choice', ['cosine', 'constant']],
  ['warmup', 'warmup (default 5%)', 'int'],
  ['weightDecay', 'weight-decay', 'num'],
  ['gradClip', 'grad-clip', 'num'],
  ['pack', 'pack', 'choice', ['auto', 'yes', 'no']],
  ['seed', 'seed', 'int'],
  ['gradientCheckpointing', 'gradient-checkpointing', 'bool'],
];

/** Fill `box` with an input per option, holding the defaults. */
export function buildOptionsForm(box: HTMLElement): void {
  for (const [key, label, kind, choices] of FIELDS) {
    const l = document.createElement('label');
    l.textContent = label;
    let input: HTMLInputElement | HTMLSelectElement;
    const v = FINETUNE_DEFAULTS[key];
    if (kind === 'choice') {
      input = document.createElement('select');
      for (const c of choices!) input.append(new Option(c, c, c === v, c === v));
    } else {
      input = document.createElement('input');
      if (kind === 'bool') {
        input.type = 'checkbox';
        input.checked = !!v;
      } else if (kind === 'list') {
        input.type = 'text';
        input.value = (v as string[]).join(',');
        input.title = `comma-separated, or "all" (${ALL_TARGETS.join(',')})`;
      } else {
        input.type = 'number';
        input.step = 'any';
        input.value = v === undefined ? '' : String(v);
      }
    }
    input.id = `opt-${key}`;
    l.append(input);
    box.append(l);
  }
}

/** The options as entered, validated like the CLI's flags (a ConfigError names the flag). */
export function readOptions(): FinetuneOptions {
  const o = { ...FINETUNE_DEFAULTS } as Record<string, unknown>;
  for (const [key, label, kind] of FIELDS) {
    const el = $<HTMLInputElement>(`opt-${key}`);
    if (kind === 'bool') o[key] = el.checked;
    else if (kind === 'choice') o[key] = el.value;
    else if (kind === 'list') {
      const items = el.value.split(',').map((s) => s.trim()).filter(Boolean);
      if (!items.length) throw new ConfigError(`--${label}: must not be empty`);
      o[key] = items;
    } else if (key === 'warmup' && el.value.trim() === '') o[key] = undefined;
    else {
      const n = Number(el.value);
      const name = `--${label.split(' ')[0]}`;
      if (!Number.isFinite(n)) throw new ConfigError(`${name}: must be a number`);
      if (kind === 'int' && !Number.isInteger(n)) throw new ConfigError(`${name}: must be an integer`);
      const min = ['r', 'steps', 'batchSize', 'gradientAccumulation'].includes(key) ? 1 : key === 'seqLen' ? 2 : 0;
      if (n < min) throw new ConfigError(`${name}: must be >= ${min}`);
      if ((key === 'lr' || key === 'alpha') && n <= 0) throw new ConfigError(`${name}: must be > 0`);
      o[key] = n;
    }
  }
  return o as unknown as FinetuneOptions;
}

/** Show a run's options (a resumed run). */
export function applyOptions(o: Partial<FinetuneOptions>): void {
  for (const [key, , kind] of FIELDS) {
    if (!(key in o)) continue;
    const el = $<HTMLInputElement>(`opt-${key}`);
    const v = o[key];
    if (kind === 'bool') el.checked = !!v;
    else if (kind === 'list') el.value = (v as string[]).join(',');
    else el.value = v === undefined ? '' : String(v);
  }
}
