// The page's own typed error (bad training data); everything else the page shows comes from the packages'
// RustyError subclasses (ConfigError, SafetensorsError, TokenizerError, ShapeError, OutOfMemoryError, ...).
import { RustyError } from '@rusty/backend';

/** Training data that cannot be used (malformed JSONL, no text); the message names the input and line. */
export class DataError extends RustyError {
  override readonly code = 'DATA';
}

/** A one-line message for any failure, with the error's type as the packages name it. */
export function describeError(e: unknown): { kind: string; message: string } {
  if (e instanceof RustyError) return { kind: e.constructor.name, message: e.message };
  if (e instanceof Error) return { kind: e.name || 'Error', message: e.message };
  return { kind: 'Error', message: String(e) };
}
