import { EXIT_INTERRUPTED } from '../errors';
import { summaryLines, type RunResult } from '../training';

/** After Ctrl-C: where the checkpoint is, how to continue, and the summary so far. */
export function reportInterrupted(cmd: 'train' | 'finetune', run: RunResult, out: string): number {
  process.stderr.write(
    `${cmd}: interrupted; checkpoint saved in ${run.fit.checkpoint ?? run.checkpointDir}\n` +
      `${cmd}: continue with: rusty ${cmd} --out ${out} --resume\n`,
  );
  process.stdout.write(summaryLines(cmd, run).join('\n') + '\n');
  return EXIT_INTERRUPTED;
}
