import { DataError } from '../errors';
import { Rng } from '../rng';

/** Label value that the loss ignores (PyTorch's `ignore_index`, HF's convention for masked positions). */
export const IGNORE_INDEX = -100;

/**
 * One training example: a window of `seqLen` token ids and its labels in HF's convention (the same ids, not
 * shifted: the model's `loss` shifts them; positions that must not be learned are `IGNORE_INDEX`).
 */
export interface Example {
  inputIds: Int32Array;
  labels: Int32Array;
}

/** Random access to fixed-length examples. */
export interface Dataset {
  /** Number of examples. */
  readonly length: number;
  /** Tokens per example. */
  readonly seqLen: number;
  /** Example `index` (0 <= index < length). The arrays may be views into the dataset's storage: do not modify them. */
  get(index: number): Example;
}

/** The examples of `dataset` at `indices`, in that order. */
export class SubsetDataset implements Dataset {
  readonly length: number;
  readonly seqLen: number;
  constructor(
    readonly dataset: Dataset,
    readonly indices: Uint32Array,
  ) {
    for (const i of indices) if (i >= dataset.length) throw new DataError(`subset index ${i} is out of range (dataset of ${dataset.length})`);
    this.length = indices.length;
    this.seqLen = dataset.seqLen;
  }

  get(index: number): Example {
    if (!Number.isInteger(index) || index < 0 || index >= this.length)
      throw new DataError(`example ${index} is out of range (subset of ${this.length})`);
    return this.dataset.get(this.indices[index]!);
  }
}

/** Options of `splitDataset`. */
export interface SplitOptions {
  /** Share of examples for validation, in [0, 1). */
  validationFraction?: number;
  /** Or an exact number of validation examples. */
  validationSize?: number;
  /** Seed of the random assignment (the same seed and dataset give the same split). Default 0. */
  seed?: number;
}

/**
 * Split a dataset into train and validation subsets: a seeded random choice of `round(fraction * length)`
 * examples (at least 1 when the fraction is > 0 and there are 2+ examples) for validation, the rest for
 * training; both keep the dataset's order. Deterministic for a seed.
 */
export function splitDataset(dataset: Dataset, opts: SplitOptions): { train: SubsetDataset; validation: SubsetDataset } {
  const n = dataset.length;
  let nVal: number;
  if (opts.validationSize !== undefined) {
    nVal = opts.validationSize;
    if (!Number.isInteger(nVal) || nVal < 0 || nVal >= Math.max(n, 1))
      throw new DataError(`validationSize ${nVal} must be an integer in [0, ${n}) for a dataset of ${n} examples`);
  } else {
    const f = opts.validationFraction ?? 0.1;
    if (!(f >= 0 && f < 1)) throw new DataError(`validationFraction must be in [0, 1), got ${f}`);
    nVal = Math.round(f * n);
    if (f > 0 && nVal === 0 && n >= 2) nVal = 1;
    if (nVal >= n) nVal = n - 1;
  }
  const perm = new Rng(opts.seed ?? 0).permutation(n);
  const val = perm.slice(0, nVal).sort();
  const train = perm.slice(nVal).sort();
  return { train: new SubsetDataset(dataset, train), validation: new SubsetDataset(dataset, val) };
}
