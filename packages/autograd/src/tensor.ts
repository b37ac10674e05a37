import {
  download,
  empty,
  numel,
  ShapeError,
  upload,
  RustyError,
  type Context,
  type DType,
  type DeviceTensor,
} from '@rusty/backend';
import type { Node } from './node';
import { isGradEnabled, track, untrack } from './scope';
import { releaseRef, retain, viewAs } from './storage';
import { randn as randnValues } from './random';

/** Safety net: storage of tensors that were never disposed goes back to the pool when they are collected. */
const finalizer = new FinalizationRegistry<{ ctx: Context; buf: DeviceTensor['buffer'] }>(({ ctx, buf }) => {
  try {
    releaseRef(ctx, buf);
  } catch {
    // the context may be gone
  }
});

export interface TensorOptions {
  dtype?: DType;
  requiresGrad?: boolean;
}

/** A tensor was used after `dispose()`, or backward ran through a freed graph. */
export class AutogradError extends RustyError {
  override readonly code = 'AUTOGRAD';
}

/**
 * An n-dimensional array in GPU storage with reverse-mode autodiff. Row-major and contiguous; `reshape` is a
 * view of the same storage. Operations are eager and asynchronous: results exist on the GPU once the context
 * submits; `toArray()` waits for them.
 */
export class Tensor {
  readonly isTensor = true;
  private _grad: Tensor | null = null;
  /** `zeroGrad` keeps the gradient's storage for the next backward (steady buffers, cached bind groups) and
   *  only marks it stale: it reads as null until backward writes it again. */
  private _gradStale = false;
  /** The operation that produced this tensor (null for leaves). */
  node: Node | null;
  /** Which output of `node` this is. */
  outputIndex: number;
  private _data: DeviceTensor | null;
  private _requiresGrad: boolean;
  /** A name for messages and state dicts (optional). */
  name?: string;

  /** Wrap storage the tensor now owns (one reference). Prefer the factories. */
  constructor(
    readonly ctx: Context,
    data: DeviceTensor,
    requiresGrad = false,
    node: Node | null = null,
    outputIndex = 0,
    tracked = true,
  ) {
    this._data = data;
    this._requiresGrad = requiresGrad || node !== null;
    this.node = node;
    this.outputIndex = outputIndex;
    finalizer.register(this, { ctx, buf: data.buffer }, this);
    if (tracked) track(this);
  }

  /**
   * PyTorch's `F.cross_entropy` over the last dim: logits [..., V], integer targets [...] (a Tensor or numbers),
   * mean over targets that are not `ignoreIndex` (-100). No label shift. (Installed by the ops module.)
   */
  static crossEntropyLoss: (
    logits: Tensor,
    targets: Tensor | ArrayLike<number>,
    opts?: { ignoreIndex?: number; labelSmoothing?: number },
  ) => Tensor;

  static fromArray(ctx: Context, data: ArrayLike<number>, shape: readonly number[], opts: TensorOptions = {}): Tensor {
    return new Tensor(ctx, upload(ctx, data, shape, opts.dtype ?? 'f32'), opts.requiresGrad ?? false);
  }

  static full(ctx: Context, shape: readonly number[], value: number, opts: TensorOptions = {}): Tensor {
    return Tensor.fromArray(ctx, new Float32Array(numel(shape)).fill(value), shape, opts);
  }

  static zeros(ctx: Context, shape: readonly number[], opts: TensorOptions = {}): Tensor {
    return Tensor.full(ctx, shape, 0, opts);
  }

  static ones(ctx: Context, shape: readonly number[], opts: TensorOptions = {}): Tensor {
    return Tensor.full(ctx, shape, 1, opts);
  }

  /** Normal samples with a seed (generated on the CPU, reproducible across adapters). */
  static randn(ctx: Context, shape: readonly number[], opts: TensorOptions & { seed?: number; std?: number; mean?: number } = {}): Tensor {
    const v = randnValues(numel(shape), opts.seed ?? 0, opts.std ?? 1, opts.mean ?? 0);
    return Tensor.fromArray(ctx, v, shape, opts);
  }

  /** Storage (throws if disposed). */
  get data(): DeviceTensor {
    if (!this._data) throw new AutogradError(`tensor${this.name ? ` '${this.name}'` : ''} was used after dispose()`);
    return this._data;
  }

  get shape(): readonly number[] {
    return this.data.shape;
  }

  get dtype(): DType {
    return this.data.dtype;
  }

  get size(): number {
    return numel(this.data.shape);
  }

  get rank(): number {
    return this.data.shape.length;
  }

  get disposed(): boolean {
    return this._data === null;
  }

  get requiresGrad(): boolean {
    return this._requiresGrad;
  }

  set requiresGrad(v: boolean) {
    if (!v && this.node) throw new AutogradError('requiresGrad can only be turned off on leaf tensors (use detach())');
    this._requiresGrad = v;
  }

  get isLeaf(): boolean {
    return this.node === null;
  }

  /** Read the values back (waits for the GPU). 16-bit storage decodes to f32 exactly. */
  async toArray(): Promise<Float32Array | Int32Array | Uint32Array> {
    return download(this.ctx, this.data);
  }

  /** The single value of a one-element tensor. */
  async item(): Promise<number> {
    if (this.size !== 1) throw new ShapeError(`item() needs a one-element tensor, got shape [${this.shape.join(', ')}]`);
    return (await this.toArray())[0]!;
  }

  /** A tensor sharing this storage, cut from the graph. */
  detach(): Tensor {
    retain(this.data.buffer);
    return new Tensor(this.ctx, viewAs(this.data, this.shape), false);
  }

  /** Keep this tensor out of the enclosing `tidy` scopes. */
  keep(): this {
    untrack(this);
    return this;
  }

  /** Release the storage (the graph keeps what backward still needs). Idempotent. */
  dispose(): void {
    if (!this._data) return;
    this._grad?.dispose();
    this._grad = null;
    releaseRef(this.ctx, this._data.buffer);
    finalizer.unregister(this);
    this._data = null;
    untrack(this);
  }

  /** Gradient accumulated by `backward()` (leaves that require grad); null when there is none. */
  get grad(): Tensor | null {
    return this._gradStale ? null : this._grad;
  }

  set grad(g: Tensor | null) {
    if (this._grad && this._grad !== g) this._grad.dispose();
    this._grad = g;
    this._gradStale = false;
  }

  /**
   * Forget the accumulated gradient (`.grad` reads null, like PyTorch's `zero_grad(set_to_none=True)`). Its
   * storage is kept for the next backward unless `release` is set.
   */
  zeroGrad(release = false): void {
    if (release) this.grad = null;
    else if (this._grad) this._gradStale = true;
  }

  /** @internal The gradient buffer to accumulate into: `fresh` when it holds a stale value to overwrite. */
  gradSlot(): { grad: Tensor | null; fresh: boolean } {
    const g = this._grad && !this._grad.disposed ? this._grad : null;
    return { grad: g, fresh: this._gradStale };
  }

  /** @internal Mark the kept gradient buffer as written. */
  markGradWritten(): void {
    this._gradStale = false;
  }

  /** Replace the storage with another of the same shape (optimizers, loading weights). Keeps `grad`. The tensor
   *  takes over one reference of `data`'s buffer: pass a new buffer, or `retain` one that another tensor still
   *  owns (`x.assign(other.data)` alone lets `other`'s dispose or collection free this tensor's storage). */
  assign(data: DeviceTensor): void {
    if (data.shape.length !== this.shape.length || data.shape.some((d, i) => d !== this.shape[i]))
      throw new ShapeError(`assign: shape [${data.shape.join(', ')}] does not match [${this.shape.join(', ')}]`);
    releaseRef(this.ctx, this.data.buffer);
    finalizer.unregister(this);
    finalizer.register(this, { ctx: this.ctx, buf: data.buffer }, this);
    this._data = data;
  }

  /** Reverse-mode autodiff from this tensor: gradients accumulate into the `.grad` of leaves. */
  backward(grad?: Tensor): void {
    runBackward(this, grad);
  }

  toString(): string {
    return `Tensor(${this.dtype}[${this.shape.join(', ')}]${this.requiresGrad ? ', requiresGrad' : ''})`;
  }
}

/** A new tensor for an op's output: records `node` when grad mode is on and any input requires grad. */
export function makeOutput(ctx: Context, data: DeviceTensor, node: Node | null, index = 0): Tensor {
  return new Tensor(ctx, data, false, isGradEnabled() ? node : null, index);
}

/** Allocate an uninitialised f32 tensor. */
export function emptyTensor(ctx: Context, shape: readonly number[], dtype: DType = 'f32'): Tensor {
  return new Tensor(ctx, empty(ctx, shape, dtype));
}

// Set by engine.ts (avoids an import cycle).
let runBackward: (t: Tensor, grad?: Tensor) => void = () => {
  throw new Error('engine not loaded');
};
export function setBackwardRunner(fn: typeof runBackward): void {
  runBackward = fn;
}
