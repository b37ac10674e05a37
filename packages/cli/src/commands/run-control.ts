import { EXIT_INTERRUPTED } from '../errors';
import { checkResumeSteps, loadRunOptions, resumeOptions, summaryLines, type RunResult } from '../training';

/**
 * `--resume`: the options the run was started with, with the flags in `keep` taken from the command line;
 * other flags given again are reported as ignored.
 */
export async function resumedOptions<T extends Record<string, unknown>>(
  cmd: 'train' | 'finetune',
  out: string,
  cli: T,
  onCommandLine: Set<string>,
  keep: readonly string[],
): Promise<T> {
  const saved = await loadRunOptions(out, cmd);
  const r = resumeOptions(saved.options, cli, onCommandLine, keep);
  checkResumeSteps(r.opts.steps as number | undefined, saved.step);
  if (r.ignored.length)
    process.stderr.write(
      `${cmd}: resuming with the run's saved settings; ignored: ${r.ignored.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ')}\n`,
    );
  return r.opts;
}

/** After Ctrl-C: where the checkpoint is, how to continue, and the summary so far. */
export function reportInterrupted(cmd: 'train' | 'finetune', run: RunResult, out: string): number {
  process.stderr.write(
    `${cmd}: interrupted; checkpoint saved in ${run.fit.checkpoint ?? run.checkpointDir}\n` +
      `${cmd}: continue with: rusty ${cmd} --out ${out} --resume\n`,
  );
  process.stdout.write(summaryLines(cmd, run).join('\n') + '\n');
  return EXIT_INTERRUPTED;
}
