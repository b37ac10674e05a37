import { RustyError } from '@rusty/backend';

/** A safetensors file, shard index or checkpoint directory that cannot be read or written: the message
 *  names the file (and tensor, where one is involved) and the problem. */
export class SafetensorsError extends RustyError {
  override readonly code = 'SAFETENSORS';
}

/** A tokenizer file that cannot be loaded (unsupported model or component, malformed JSON), or input that
 *  cannot be encoded or decoded; the message names the file or component and the problem. */
export class TokenizerError extends RustyError {
  override readonly code = 'TOKENIZER';
}
