import { DataError } from '../errors';
import { Rng } from '../rng';
import type { Dataset } from './dataset';

/** A batch of examples, row-major `[batch, seqLen]`. `labels` follow HF (not shifted; `-100` ignored). */
export interface Batch {
  inputIds: Int32Array;
  labels: Int32Array;
  /** Rows in this batch (the last batch of an epoch may be smaller unless `dropLast`). */
  batch: number;
  seqLen: number;
  /** Dataset indices of the rows. */
  indices: Uint32Array;
  /** Epoch and batch position (0-based) this batch came from. */
  epoch: number;
  position: number;
}

export interface DataLoaderOptions {
  /** Reshuffle the examples every epoch (seeded). Default false. */
  shuffle?: boolean;
  /** Seed of the shuffling. Default 0. */
  seed?: number;
  /** Leave out the last batch of an epoch when it is smaller than `batchSize`. Default false. */
  dropLast?: boolean;
  /** Batches assembled ahead of use while the caller waits on the GPU (0 turns it off). Default 2. */
  prefetch?: number;
}

/** Where a DataLoader stands: enough to continue with exactly the same batches (part of a checkpoint). */
export interface DataLoaderState {
  epoch: number;
  /** Batches already taken in this epoch. */
  position: number;
  seed: number;
  /** RNG state the current epoch's order was drawn from. */
  rngState: number;
  shuffle: boolean;
  batchSize: number;
  datasetLength: number;
}

/**
 * Batches of a dataset, epoch after epoch: `for (const b of loader)` (or `for await`) runs the rest of the
 * current epoch (starting the next one when the current is finished); `next()` gives one batch at a time and
 * rolls into the next epoch by itself; `reset()` starts the next epoch (a new shuffle). The order depends only
 * on the seed and the epoch, and `state()` / `setState()` save and restore the position exactly.
 */
export class DataLoader implements Iterable<Batch>, AsyncIterable<Batch> {
  readonly shuffle: boolean;
  readonly seed: number;
  readonly dropLast: boolean;
  readonly prefetch: number;
  private _epoch = 0;
  private _position = 0;
  private rng: Rng;
  private epochRngState: number;
  private order: Uint32Array;
  private queue: Batch[] = [];
  private filling = false;

  constructor(
    readonly dataset: Dataset,
    readonly batchSize: number,
    opts: DataLoaderOptions = {},
  ) {
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new DataError(`batchSize must be a positive integer, got ${batchSize}`);
    if (!dataset.length) throw new DataError('the dataset is empty');
    this.shuffle = opts.shuffle ?? false;
    this.seed = opts.seed ?? 0;
    this.dropLast = opts.dropLast ?? false;
    this.prefetch = opts.prefetch ?? 2;
    if (this.dropLast && dataset.length < batchSize)
      throw new DataError(`dropLast with batchSize ${batchSize} leaves no batch of a dataset of ${dataset.length} examples`);
    this.rng = new Rng(this.seed);
    this.epochRngState = this.rng.state;
    this.order = this.drawOrder();
  }

  /** Batches per epoch. */
  get length(): number {
    const n = this.dataset.length;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  get epoch(): number {
    return this._epoch;
  }

  /** Batches already taken in the current epoch. */
  get position(): number {
    return this._position;
  }

  private drawOrder(): Uint32Array {
    const n = this.dataset.length;
    if (this.shuffle) return this.rng.permutation(n);
    const o = new Uint32Array(n);
    for (let i = 0; i < n; i++) o[i] = i;
    return o;
  }

  /** Start the next epoch: a new order (when shuffling), position 0. */
  reset(): void {
    this._epoch++;
    this._position = 0;
    this.epochRngState = this.rng.state;
    this.order = this.drawOrder();
    this.queue = [];
  }

  private assemble(position: number): Batch {
    const { seqLen } = this.dataset;
    const start = position * this.batchSize;
    const rows = Math.min(this.batchSize, this.dataset.length - start);
    const inputIds = new Int32Array(rows * seqLen);
    const labels = new Int32Array(rows * seqLen);
    const indices = this.order.slice(start, start + rows);
    for (let r = 0; r < rows; r++) {
      const ex = this.dataset.get(indices[r]!);
      if (ex.inputIds.length !== seqLen || ex.labels.length !== seqLen)
        throw new DataError(`example ${indices[r]} has ${ex.inputIds.length} ids and ${ex.labels.length} labels, expected ${seqLen}`);
      inputIds.set(ex.inputIds, r * seqLen);
      labels.set(ex.labels, r * seqLen);
    }
    return { inputIds, labels, batch: rows, seqLen, indices, epoch: this._epoch, position };
  }

  /** Fill the prefetch queue (within the current epoch) in the background. */
  private schedulePrefetch(): void {
    if (this.prefetch <= 0 || this.filling) return;
    this.filling = true;
    setImmediate(() => {
      this.filling = false;
      const epoch = this._epoch;
      while (this.queue.length < this.prefetch) {
        const pos = this._position + this.queue.length;
        if (pos >= this.length || epoch !== this._epoch) break;
        this.queue.push(this.assemble(pos));
      }
    });
  }

  /** True when the current epoch has no batch left. */
  get exhausted(): boolean {
    return this._position >= this.length;
  }

  /** The next batch, starting the next epoch first when the current one is finished. */
  next(): Batch {
    if (this.exhausted) this.reset();
    const head = this.queue[0];
    let b: Batch;
    if (head && head.epoch === this._epoch && head.position === this._position) b = this.queue.shift()!;
    else {
      this.queue = [];
      b = this.assemble(this._position);
    }
    this._position++;
    this.schedulePrefetch();
    return b;
  }

  /** The rest of the current epoch (the next epoch, when the current one is finished). */
  *[Symbol.iterator](): Iterator<Batch> {
    if (this.exhausted) this.reset();
    const epoch = this._epoch;
    while (!this.exhausted && this._epoch === epoch) yield this.next();
  }

  /** The same as the sync iterator, yielding to the event loop between batches so prefetching can run. */
  async *[Symbol.asyncIterator](): AsyncIterator<Batch> {
    if (this.exhausted) this.reset();
    const epoch = this._epoch;
    while (!this.exhausted && this._epoch === epoch) {
      yield this.next();
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Epoch, position and RNG state (see `setState`). */
  state(): DataLoaderState {
    return {
      epoch: this._epoch,
      position: this._position,
      seed: this.seed,
      rngState: this.epochRngState,
      shuffle: this.shuffle,
      batchSize: this.batchSize,
      datasetLength: this.dataset.length,
    };
  }

  /** Continue from a saved state: the following batches are exactly those the saved loader would have given. */
  setState(s: DataLoaderState): void {
    if (s.datasetLength !== this.dataset.length || s.batchSize !== this.batchSize || s.shuffle !== this.shuffle)
      throw new DataError(
        `data-loader state is for ${s.datasetLength} examples in batches of ${s.batchSize}${s.shuffle ? ' (shuffled)' : ''}, ` +
          `this loader has ${this.dataset.length} in batches of ${this.batchSize}${this.shuffle ? ' (shuffled)' : ''}`,
      );
    if (!Number.isInteger(s.position) || s.position < 0 || s.position > this.length)
      throw new DataError(`data-loader position ${s.position} is outside an epoch of ${this.length} batches`);
    this.rng = Rng.fromState(s.rngState);
    this.epochRngState = s.rngState;
    this.order = this.drawOrder();
    this._epoch = s.epoch;
    this._position = s.position;
    this.queue = [];
  }
}
