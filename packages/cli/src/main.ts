import { helpText, type CommandSpec } from './args';
import { benchCommand, benchSpec } from './commands/bench';
import { demoCommand, demoSpec } from './commands/demo';
import { devicesMain, devicesSpec } from './commands/devices';
import { evalCommand, evalSpec } from './commands/eval';
import { finetuneCommand, finetuneSpec } from './commands/finetune';
import { generateCommand, generateSpec } from './commands/generate';
import { inspectCommand, inspectSpec } from './commands/inspect';
import { trainCommand, trainSpec } from './commands/train';
import { describeError, exitCodeOf, UsageError } from './errors';

export { UsageError } from './errors';

interface Command {
  spec: CommandSpec<any>;
  run(argv: string[]): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  demo: { spec: demoSpec, run: demoCommand },
  train: { spec: trainSpec, run: trainCommand },
  finetune: { spec: finetuneSpec, run: finetuneCommand },
  generate: { spec: generateSpec, run: generateCommand },
  eval: { spec: evalSpec, run: evalCommand },
  inspect: { spec: inspectSpec, run: inspectCommand },
  devices: { spec: devicesSpec, run: devicesMain },
  bench: { spec: benchSpec, run: benchCommand },
};

function mainHelp(): string {
  const w = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return `rusty - train and fine-tune Llama, Mistral, Qwen2, Qwen3 and Gemma 3 models on WebGPU

Usage: rusty <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([n, c]) => `  ${n.padEnd(w)}  ${c.spec.summary}`)
  .join('\n')}

Options:
  -h, --help      show help (also: rusty <command> --help, rusty help <command>)
  --version       print the version
  --debug         print stack traces on errors

Examples:
  rusty demo                                             # train, fine-tune and sample, nothing to download
  rusty train --data ./src --include "**/*.ts" --out code-model
  rusty finetune --model ./SmolLM2-135M --data ./data.jsonl --out my-lora
  rusty generate --model ./SmolLM2-135M --adapter my-lora --prompt "Hello"
  rusty inspect ./SmolLM2-135M

Environment:
  RUSTY_ADAPTER=<name>            pick an adapter by (part of) its name
  RUSTY_POWER_PREFERENCE=high-performance|low-power
  RUSTY_SAFE=1                    keep Dawn's validation and robustness on (slower, safer)
  RUSTY_PROGRESS=bar|plain|none   how training shows progress (default: a bar on a terminal, lines otherwise)
  RUSTY_CACHE_DIR=<dir>           where tokenized corpora are cached (default ~/.cache/rusty/tokens)
`;
}

const VERSION = '0.1.0';

/** Run the CLI with `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const dash = argv.indexOf('--');
  const before = dash >= 0 ? argv.slice(0, dash) : argv;
  const debug = before.includes('--debug');
  // --debug also lets the graphics driver's own notices through (see createContext)
  if (debug) process.env.RUSTY_DEBUG = '1';
  const args = [...before.filter((a) => a !== '--debug'), ...(dash >= 0 ? argv.slice(dash) : [])];
  try {
    const [cmd, ...rest] = args;
    if (!cmd || cmd === '--help' || cmd === '-h') {
      process.stdout.write(mainHelp());
      return 0;
    }
    if (cmd === '--version' || cmd === '-V') {
      process.stdout.write(`rusty ${VERSION}\n`);
      return 0;
    }
    if (cmd === 'help') {
      const sub = rest[0];
      if (!sub) process.stdout.write(mainHelp());
      else if (COMMANDS[sub]) process.stdout.write(helpText(COMMANDS[sub].spec));
      else throw new UsageError(`unknown command '${sub}' (see rusty --help)`);
      return 0;
    }
    const c = COMMANDS[cmd];
    if (!c) throw new UsageError(`unknown command '${cmd}' (see rusty --help)`);
    const restBeforeDash = rest.indexOf('--') >= 0 ? rest.slice(0, rest.indexOf('--')) : rest;
    if (restBeforeDash.includes('--help') || restBeforeDash.includes('-h')) {
      process.stdout.write(helpText(c.spec));
      return 0;
    }
    return await c.run(rest);
  } catch (e) {
    if (debug) console.error(e);
    else console.error(`rusty: ${describeError(e)}`);
    return exitCodeOf(e);
  }
}
