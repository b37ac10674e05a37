import { RustyError } from '@rusty/backend';
import { devicesCommand } from './devices';

const HELP = `rusty - train and fine-tune Llama-family models on WebGPU

Usage: rusty <command> [options]

Commands:
  devices [--json]   show the WebGPU adapter, its features, limits and the fast paths in use

Options:
  --help, -h         show help (also: rusty <command> --help)
  --debug            print stack traces on errors

Environment:
  RUSTY_ADAPTER=<name>            pick an adapter by (part of) its name
  RUSTY_POWER_PREFERENCE=high-performance|low-power
  RUSTY_SAFE=1                    keep Dawn's validation and robustness on (slower, safer)
`;

const DEVICES_HELP = `rusty devices [--json]

Shows the adapter WebGPU offers, its optional features (shader-f16, subgroups, timestamp-query,
subgroup matrices), its limits and which of Rusty's fast paths are on.

Examples:
  rusty devices
  RUSTY_ADAPTER=nvidia rusty devices --json
`;

/** A flag or argument the user got wrong. */
export class UsageError extends RustyError {
  override readonly code = 'USAGE';
}

/** Run the CLI with `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes('--debug');
  const args = argv.filter((a) => a !== '--debug');
  try {
    const [cmd, ...rest] = args;
    if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
      process.stdout.write(HELP);
      return 0;
    }
    switch (cmd) {
      case 'devices': {
        if (rest.includes('--help') || rest.includes('-h')) {
          process.stdout.write(DEVICES_HELP);
          return 0;
        }
        const unknown = rest.filter((a) => a !== '--json');
        if (unknown.length) throw new UsageError(`devices: unknown option '${unknown[0]}' (see rusty devices --help)`);
        await devicesCommand({ json: rest.includes('--json') });
        return 0;
      }
      default:
        throw new UsageError(`unknown command '${cmd}' (see rusty --help)`);
    }
  } catch (e) {
    if (debug || !(e instanceof RustyError)) console.error(e);
    else console.error(`rusty: ${e.message}`);
    return e instanceof UsageError ? 2 : 1;
  }
}
