import type { DeviceTensor } from '@rusty/backend';
import type { Tensor } from './tensor';

/** One recorded operation on the tape: its inputs and how to turn output gradients into input gradients. */
export interface Node {
  readonly name: string;
  readonly inputs: readonly Tensor[];
  readonly nOutputs: number;
  /**
   * Input gradients from output gradients (null where an output got none). Every returned tensor is owned
   * by the caller (retain one you pass through); `null` for inputs that need none.
   */
  backward(grads: readonly (DeviceTensor | null)[]): readonly (DeviceTensor | null | undefined)[];
  /** Release what the node saved; afterwards `backward` may not run. */
  free(): void;
  freed: boolean;
}
