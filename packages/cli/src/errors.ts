import { OutOfMemoryError, RustyError } from '@rusty/backend';

/** A flag or argument the user got wrong (exit code 2). */
export class UsageError extends RustyError {
  override readonly code = 'USAGE';
}

/** A file or directory the command needs that is missing or unreadable. */
export class InputError extends RustyError {
  override readonly code = 'INPUT';
}

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;
/** Stopped by Ctrl-C (128 + SIGINT), after saving a checkpoint. */
export const EXIT_INTERRUPTED = 130;
/** Stopped by SIGTERM (128 + 15), after saving a checkpoint. */
export const EXIT_TERMINATED = 143;

/** The exit code of a run stopped by `signal` (130 for SIGINT, 143 for SIGTERM). */
export const exitCodeOfSignal = (signal: string | undefined): number => (signal === 'SIGTERM' ? EXIT_TERMINATED : EXIT_INTERRUPTED);

/** The model's weights alone do not fit the adapter: a smaller batch cannot help, a smaller model can. */
export class ModelTooLargeError extends OutOfMemoryError {}

export const OOM_HINT =
  'try a smaller --batch-size or --seq-len (with --gradient-accumulation to keep the effective batch), --gradient-checkpointing, or 16-bit frozen weights (rusty finetune --mixed-precision bf16)';

export const MODEL_SIZE_HINT =
  "the model's weights alone do not fit: make the model smaller (a lower --hidden-size, --intermediate-size or --layers, or a smaller --model), or keep frozen weights in 16 bits (rusty finetune --mixed-precision bf16)";

const FS_CODES: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  ENOSPC: 'no space left on the device',
  EROFS: 'read-only file system',
  EMFILE: 'too many open files',
};

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** True for host (JavaScript) allocation failures. */
function isHostOom(e: unknown): boolean {
  return e instanceof RangeError && /allocation failed|Invalid typed array length|Array buffer allocation|Invalid array length/i.test(e.message);
}

/** The one line the CLI prints for an error (without the `rusty: ` prefix). */
export function describeError(e: unknown): string {
  if (e instanceof OutOfMemoryError) {
    const msg = oneLine(e.message).replace(/\s*Try a smaller batch[^.]*\.?$/, '').replace(/[.\s]+$/, '');
    return `out of GPU memory: ${msg.replace(/^GPU out of memory:\s*/, '')}; ${e instanceof ModelTooLargeError ? MODEL_SIZE_HINT : OOM_HINT}`;
  }
  if (e instanceof RustyError) return oneLine(e.message);
  if (isHostOom(e)) return `out of host memory (${(e as Error).message}); ${OOM_HINT}`;
  const err = e as NodeJS.ErrnoException;
  if (err && typeof err.code === 'string' && FS_CODES[err.code]) return `${err.path ?? err.syscall ?? 'file'}: ${FS_CODES[err.code]}`;
  const msg = err instanceof Error ? err.message : String(e);
  if (/out of memory|OutOfMemory/i.test(msg)) return `out of GPU memory: ${oneLine(msg)}; ${OOM_HINT}`;
  return `internal error: ${oneLine(msg)} (run again with --debug for the stack trace)`;
}

/** The exit code for an error. */
export function exitCodeOf(e: unknown): number {
  return e instanceof UsageError ? EXIT_USAGE : EXIT_ERROR;
}
