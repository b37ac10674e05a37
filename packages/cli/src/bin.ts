#!/usr/bin/env node
import { main } from './main';

// Exit explicitly once stdout and stderr are flushed: the GPU runtime can keep handles open after the context
// is destroyed.
const code = await main(process.argv.slice(2));
process.exitCode = code;
process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
