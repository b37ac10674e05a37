import { RustyError } from '@rusty/backend';

/** A dataset or data file that cannot be read, parsed or packed: the message names the file (and line) and the problem. */
export class DataError extends RustyError {
  override readonly code = 'DATA';
}

/** A checkpoint directory that cannot be written or read back, or that does not match the run resuming from it. */
export class CheckpointError extends RustyError {
  override readonly code = 'CHECKPOINT';
}

/** A training loop misconfiguration or a failure inside a training step. */
export class TrainerError extends RustyError {
  override readonly code = 'TRAINER';
}

/** A directory another live run holds (its run lock names the process). */
export class RunLockError extends RustyError {
  override readonly code = 'RUN_LOCK';
}
