import { exitCodeOfSignal } from '../errors';
import { checkResumeSteps, loadRunOptions, resumeOptions, summaryLines, type RunResult } from '../training';

const flagName = (k: string): string => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/**
 * `--resume`: the options the run was started with, with the flags in `keep` and the flags naming files taken
 * from the command line; other flags given again are reported as ignored.
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
  checkResumeSteps(r.opts.steps as number | undefined, saved.step, saved.exported);
  if (r.taken.length) process.stderr.write(`${cmd}: resuming with ${r.taken.map(flagName).join(', ')} from the command line\n`);
  if (r.ignored.length) process.stderr.write(`${cmd}: resuming with the run's saved settings; ignored: ${r.ignored.map(flagName).join(', ')}\n`);
  if ((r.opts.steps as number | undefined) === saved.step)
    process.stderr.write(`${cmd}: the run finished its ${saved.step} steps before its export was written; writing it now\n`);
  return r.opts;
}

/** After Ctrl-C or SIGTERM: where the checkpoint is, how to continue, and the summary so far; returns the exit code. */
export function reportInterrupted(cmd: 'train' | 'finetune', run: RunResult, out: string): number {
  process.stderr.write(
    `${cmd}: interrupted; checkpoint saved in ${run.fit.checkpoint ?? run.checkpointDir}\n` +
      `${cmd}: continue with: rusty ${cmd} --out ${out} --resume\n`,
  );
  process.stdout.write(summaryLines(cmd, run).join('\n') + '\n');
  return exitCodeOfSignal(run.fit.signal);
}
