import { attentionDecode, copyRows, empty, ShapeError, type Context, type DeviceTensor } from '@rusty/backend';
import { attention, noGrad, releaseRef, Tensor } from '@rusty/autograd';
import type { AttentionKernelOptions } from './attention';
import type { ModelConfig } from './config';

/**
 * Keys and values of every layer for `batch` sequences of up to `maxLen` positions, f32 [B, maxLen, Hkv, D].
 * `forward(ids, cache)` appends the new positions; attention then covers the cached prefix.
 */
export class KVCache {
  readonly k: DeviceTensor[] = [];
  readonly v: DeviceTensor[] = [];
  /** Positions filled so far. */
  length = 0;

  constructor(
    readonly ctx: Context,
    config: ModelConfig,
    readonly batch: number,
    readonly maxLen: number,
  ) {
    for (let i = 0; i < config.numHiddenLayers; i++) {
      this.k.push(empty(ctx, [batch, maxLen, config.numKeyValueHeads, config.headDim]));
      this.v.push(empty(ctx, [batch, maxLen, config.numKeyValueHeads, config.headDim]));
    }
  }

  /**
   * Store k/v [B, T, Hkv, D] at the current position and attend q [B, T, Hq, D] over the prefix: all of it, or
   * with `slidingWindow` only the last `slidingWindow` positions up to each query (older keys stay in the
   * cache but are masked, as HF's mask does). `stored`: k and v are already in the cache (see {@link storeTarget}).
   */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, opts: AttentionKernelOptions = {}, stored = false): Tensor {
    const [b, t] = q.shape as [number, number];
    this.checkRoom(b, t);
    const ctx = this.ctx;
    return noGrad(() => {
      if (!stored) copyRows(ctx, k.data, this.k[layer]!, t, 0, this.length, { src: v.data, dst: this.v[layer]! });
      if (this.length === 0) return attention(q, k, v, { causal: true, ...opts });
      const len = this.length + t;
      if (t === 1) return new Tensor(ctx, attentionDecode(ctx, q.data, this.k[layer]!, this.v[layer]!, len, opts));
      // several new positions after a prefix: gather the prefix contiguously, causal with an offset
      const [, , hkv, d] = this.k[layer]!.shape as [number, number, number, number];
      const kk = empty(ctx, [b, len, hkv, d]);
      const vv = empty(ctx, [b, len, hkv, d]);
      copyRows(ctx, this.k[layer]!, kk, len, 0, 0, { src: this.v[layer]!, dst: vv });
      const K = new Tensor(ctx, kk);
      const V = new Tensor(ctx, vv);
      const o = attention(q, K, V, { causal: true, qOffset: this.length, ...opts });
      K.dispose();
      V.dispose();
      return o;
    });
  }

  /** Where a layer's keys and values of `t` new positions of `b` sequences go (the cache's tensors and the first
   *  position), for a kernel that writes them itself (`ropePair`'s store); then {@link attend} with `stored`. */
  storeTarget(layer: number, b: number, t: number): { kCache: DeviceTensor; vCache: DeviceTensor; at: number } {
    this.checkRoom(b, t);
    return { kCache: this.k[layer]!, vCache: this.v[layer]!, at: this.length };
  }

  private checkRoom(b: number, t: number): void {
    if (b !== this.batch) throw new ShapeError(`KV cache holds ${this.batch} sequences, got a batch of ${b}`);
    if (this.length + t > this.maxLen)
      throw new ShapeError(`KV cache is full: ${this.length} + ${t} positions exceed its ${this.maxLen}`);
  }

  /** Called by the model after every layer has stored its positions. */
  advance(t: number): void {
    this.length += t;
  }

  /** Forget everything (the buffers stay for reuse). */
  reset(): void {
    this.length = 0;
  }

  dispose(): void {
    for (const t of [...this.k, ...this.v]) releaseRef(this.ctx, t.buffer);
    this.k.length = 0;
    this.v.length = 0;
  }
}
