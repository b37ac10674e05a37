import { BufferPool, fmtBytes, type GpuBuffer, type MemoryStats } from './buffer-pool';
import { BufferWatches } from './buffer-watch';
import { ConfigError, DeviceError, OutOfMemoryError, RustyError, ShaderError } from './errors';
import type { SpeedToggles } from './gpu-provider';
import { codeHash, kernelBaseKey, kernelSource, type KernelDef, type ParamSpec } from './kernel';
import { waitGpu } from './gpu-wait';
import { Profiler } from './profiler';
import { makeSubBuffer, offsetOf, releaseTarget, rootOf, type SubBuffer } from './sub-buffer';

export interface ContextOptions {
  /** Substring of the adapter's name/vendor/description to pick (Node: passed to Dawn). Env: RUSTY_ADAPTER. */
  adapter?: string;
  /** Env: RUSTY_POWER_PREFERENCE. */
  powerPreference?: GPUPowerPreference;
  /** Speed toggles (Node/Dawn). `false` turns all off; default all on unless env RUSTY_SAFE=1. */
  speed?: boolean | Partial<SpeedToggles>;
  /** Features to leave off even where the adapter has them (to test portable paths). */
  disableFeatures?: readonly OptionalFeature[];
  /** Time every dispatch with timestamp queries (one pass per dispatch; slower). */
  profile?: boolean;
  /** Submit after this many dispatches (lavapipe crashed on one pass of 12,000). Default 4096. */
  maxDispatchesPerSubmit?: number;
  /**
   * Treat storage bindings as limited to this many bytes (below the device's
   * `maxStorageBufferBindingSize`; rounded down to a multiple of 4): kernels that split big tensors into
   * bindings (`ctx.maxBinding`) then do so at small sizes. For tests of that chunking.
   */
  maxBindingSize?: number;
}

/**
 * A byte range of a buffer bound to one storage binding: `offset` a multiple of the device's
 * `minStorageBufferOffsetAlignment` (`ctx.bindingAlignment`), `size` a positive multiple of 4, at most
 * `ctx.maxBinding`, and `offset + size <= buffer.size`. The kernel sees the range as its whole array.
 */
export interface BufferSlice {
  readonly buffer: GpuBuffer;
  readonly offset: number;
  readonly size: number;
}

/** What one storage binding of a dispatch takes: a whole buffer (bound from offset 0, up to
 *  `ctx.maxBinding` bytes) or a {@link BufferSlice}. */
export type BufferBinding = GpuBuffer | BufferSlice;

export type OptionalFeature = 'shader-f16' | 'subgroups' | 'timestamp-query' | 'chromium-experimental-subgroup-matrix';

export interface ContextInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** True for CPU software adapters (lavapipe, SwiftShader, WARP). */
  isSoftware: boolean;
  features: { shaderF16: boolean; subgroups: boolean; timestampQuery: boolean; subgroupMatrix: boolean };
  /** The adapter's subgroup-matrix (tensor core) configurations, empty without the feature. */
  subgroupMatrixConfigs: SubgroupMatrixConfig[];
  /** The adapter's subgroup sizes (0 where it does not say). */
  subgroupSizes: { min: number; max: number };
  /** The WGSL language extensions the implementation offers (`navigator.gpu.wgslLanguageFeatures`), e.g.
   *  `buffer_view`; absent where unknown. */
  wgslFeatures?: string[];
  /** Every limit of the device (the adapter's maxima were requested). */
  limits: Record<string, number>;
  speed: SpeedToggles;
}

/** One subgroup-matrix configuration: an [M, K] x [K, N] product of `componentType` elements accumulated in
 *  `resultComponentType` (NVIDIA through Vulkan: f16 -> f32 at 16x16x16 and 16x8x16; Apple 8x8x8). */
export interface SubgroupMatrixConfig {
  M: number;
  N: number;
  K: number;
  componentType: string;
  resultComponentType: string;
}

/** A compiled kernel: pipeline and the layout signature that its bind groups share. */
export interface Kernel {
  readonly name: string;
  readonly key: string;
  readonly pipeline: GPUComputePipeline;
  readonly layoutSig: string;
  readonly layout: GPUBindGroupLayout;
  readonly params: readonly ParamSpec[];
  readonly nBindings: number;
}

/** Counters of the context's work since it was created (take differences for a step or a region). */
export interface DispatchStats {
  /** Dispatches encoded. */
  dispatches: number;
  /** Command buffers submitted. */
  submits: number;
}

const SLOT = 256;
const RING_SLOTS = 4096;

/** The GPU runtime: device, buffer pool, pipeline and bind-group caches, batched command encoding. */
export class Context {
  readonly info: ContextInfo;
  readonly profiler: Profiler;
  readonly stats: DispatchStats = { dispatches: 0, submits: 0 };
  private pool: BufferPool;
  /** Compiled kernels by `kernelBaseKey` (everything but the code), each list told apart by its exact code
   *  text: a hit costs a string comparison (a pointer compare for the same string object), not a hash of
   *  the code, and two different codes never share a pipeline. */
  private kernels = new Map<string, { code: string; k: Kernel }[]>();
  private layouts = new Map<string, GPUBindGroupLayout>();
  private bindGroups = new Map<string, GPUBindGroup>();
  private bindGroupsOf = new Map<number, string[]>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private pendingIds = new Set<number>();
  private pendingDispatches = 0;
  private ring: GPUBuffer;
  private ringCpu = new ArrayBuffer(SLOT * RING_SLOTS);
  private ringView = new DataView(this.ringCpu);
  private ringUsed = 0;
  private maxPerSubmit: number;
  private readonly ownMaxPerSubmit: number;
  private submitCaps: number[] = [];
  private maxBind: number;
  private error: RustyError | null = null;
  private destroyed = false;
  /** {@link watchWrites}' watches and {@link onRelease}'s hooks. */
  private watched = new BufferWatches();

  constructor(
    readonly device: GPUDevice,
    info: ContextInfo,
    opts: ContextOptions,
  ) {
    this.info = info;
    this.maxPerSubmit = this.ownMaxPerSubmit = opts.maxDispatchesPerSubmit ?? 4096;
    const devMax = info.limits.maxStorageBufferBindingSize ?? 134217728;
    const cap = opts.maxBindingSize !== undefined ? Math.min(devMax, opts.maxBindingSize) : devMax;
    if (!(cap >= 4)) throw new DeviceError(`maxBindingSize ${opts.maxBindingSize} must be at least 4 bytes`);
    this.maxBind = cap - (cap % 4);
    this.pool = new BufferPool(device, info.limits.maxBufferSize ?? 2 ** 30, (b) => this.forgetBuffer(b));
    this.ring = device.createBuffer({ size: SLOT * RING_SLOTS, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.profiler = new Profiler(device, info.features.timestampQuery && !!opts.profile);
    device.addEventListener('uncapturederror', (ev) => {
      const e = (ev as GPUUncapturedErrorEvent).error;
      this.error ??=
        e instanceof GPUOutOfMemoryError
          ? new OutOfMemoryError(`GPU out of memory: ${e.message}. ${OOM_HINT}`)
          : new DeviceError(`GPU error: ${e.message}`);
    });
    void device.lost.then((l) => {
      if (!this.destroyed) this.error ??= new DeviceError(`GPU device lost (${l.reason}): ${l.message}`);
    });
  }

  /** Bytes of GPU storage buffers live, pooled and at their peaks (see {@link MemoryStats}). */
  get memory(): MemoryStats {
    return { ...this.pool.stats };
  }

  /** Start `memory.peak` and `memory.peakReserved` over from what is held now (as PyTorch's
   *  `torch.cuda.reset_peak_memory_stats`). */
  resetPeak(): void {
    this.pool.resetPeak();
  }

  /** Limit on one storage binding in bytes, a multiple of 4 (tensors larger than this are bound in chunks):
   *  the device's `maxStorageBufferBindingSize`, or the context's `maxBindingSize` option if smaller. */
  get maxBinding(): number {
    return this.maxBind;
  }

  /** Alignment of a {@link BufferSlice}'s offset: the device's `minStorageBufferOffsetAlignment`. */
  get bindingAlignment(): number {
    return this.info.limits.minStorageBufferOffsetAlignment ?? 256;
  }

  /** A storage buffer of at least `bytes` bytes from the pool. Contents are undefined. */
  alloc(bytes: number): GpuBuffer {
    this.check();
    return this.pool.acquire(bytes);
  }

  /** Return a buffer to the pool; work already encoded that uses it still sees it intact. */
  release(buf: GpuBuffer): void {
    this.watched.released(buf);
    const b = releaseTarget(buf);
    if (b) this.pool.release(b);
  }

  /**
   * A buffer that is the byte range [offset, offset + bytes) of `arena` (a buffer from `alloc`): ops bind, read,
   * write and copy it like any buffer (see `sub-buffer.ts`). `offset` a multiple of {@link bindingAlignment},
   * `bytes` of 4. Releasing it never pools it; the arena returns to the pool once it and all its sub-buffers
   * are released.
   */
  subBuffer(arena: GpuBuffer, offset: number, bytes: number): GpuBuffer {
    return makeSubBuffer(arena, offset, bytes, this.bindingAlignment);
  }

  /** Destroy pooled (released) buffers. */
  trimPool(): void {
    this.pool.trim();
  }

  /** Write bytes into a buffer, ordered after everything encoded so far. */
  write(buf: GpuBuffer, data: ArrayBufferView, byteOffset = 0): void {
    this.check();
    this.assertLive(buf);
    if (byteOffset + data.byteLength > buf.size)
      throw new OutOfMemoryError(`write of ${data.byteLength} bytes at ${byteOffset} overruns a ${buf.size}-byte buffer`);
    let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.byteLength % 4) {
      const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      padded.set(bytes);
      bytes = padded;
    }
    // The buffer is used by work encoded but not submitted yet: submit that work first, so this write lands
    // after it. (Copying small writes in-stream instead, f92d6a8, saved one submit per step but made an H200 Llama
    // training step 38 -> 44-51 ms: bisected on 2026-11-24, docs/PERFORMANCE.md.)
    if (this.pendingIds.has(rootOf(buf).id)) this.flush();
    if (this.watched.size) this.watched.touched(buf);
    this.device.queue.writeBuffer(buf.gpu, offsetOf(buf) + byteOffset, bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Read bytes back (a sync point: submits pending work). */
  async read(buf: GpuBuffer, byteLength = buf.size, byteOffset = 0): Promise<ArrayBuffer> {
    this.check();
    this.assertLive(buf);
    const n = Math.ceil(byteLength / 4) * 4;
    const staging = this.device.createBuffer({ size: Math.max(n, 4), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.endPass();
    this.enc().copyBufferToBuffer(buf.gpu, offsetOf(buf) + byteOffset, staging, 0, n);
    this.flush();
    try {
      await waitGpu('a buffer read', staging.mapAsync(GPUMapMode.READ));
    } catch (e) {
      this.check();
      throw new DeviceError(`reading a buffer back failed: ${(e as Error).message}`, { cause: e });
    }
    const out = staging.getMappedRange().slice(0, byteLength);
    staging.unmap();
    staging.destroy();
    this.check();
    return out;
  }

  /** Encode a buffer-to-buffer copy (offsets and size multiples of 4). */
  copy(src: GpuBuffer, dst: GpuBuffer, bytes: number, srcOffset = 0, dstOffset = 0): void {
    this.check();
    this.endPass();
    this.enc().copyBufferToBuffer(src.gpu, offsetOf(src) + srcOffset, dst.gpu, offsetOf(dst) + dstOffset, bytes);
    this.pendingIds.add(rootOf(src).id).add(rootOf(dst).id);
    if (this.watched.size) this.watched.touched(dst);
  }

  /**
   * Call `onChange` once, at the first event after which `buf`'s bytes may differ from now: a `write` or `copy`
   * into it, a dispatch that binds it (or any buffer of the same root) read-write, or its release. For caches
   * derived from a buffer's contents (`prepareF16Images`). Conservative: any write into the root buffer counts.
   * Returns a function that removes the watch.
   */
  watchWrites(buf: GpuBuffer, onChange: () => void): () => void {
    return this.watched.add(buf, onChange);
  }

  /**
   * Call `fn` once, when `buf` itself is released (`release(buf)`, before it goes back to the pool): for GPU state
   * kept on a buffer's behalf (the optimizers' segment tables), so that it goes when its owner goes. Returns a
   * function that removes the hook.
   */
  onRelease(buf: GpuBuffer, fn: () => void): () => void {
    return this.watched.onRelease(buf, fn);
  }

  /** Compile (or fetch from the cache) a kernel. Compile errors surface at the next sync point; use
   *  `compile` to get them at once. */
  kernel(def: KernelDef): Kernel {
    const base = kernelBaseKey(def);
    const hit = this.cachedKernel(base, def.code);
    if (hit) return hit;
    const key = `${base}|#${codeHash(def.code)}`;
    const sig = (def.params?.length ? 'u' : '') + def.bindings.map((b) => (b.access === 'read' ? 'r' : 'w')).join('');
    const layout = this.layoutFor(sig);
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ label: def.name, code: kernelSource(def) });
    const pipeline = this.device.createComputePipeline({
      label: def.name,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: def.entryPoint ?? 'main', constants: def.constants as Record<string, number> },
    });
    void this.device.popErrorScope().then((err) => {
      if (err) this.error = new ShaderError(`kernel '${def.name}' failed to compile: ${err.message}`);
    });
    const k: Kernel = { name: def.name, key, pipeline, layoutSig: sig, layout, params: def.params ?? [], nBindings: def.bindings.length };
    let list = this.kernels.get(base);
    if (!list) this.kernels.set(base, (list = []));
    list.push({ code: def.code, k });
    return k;
  }

  private cachedKernel(base: string, code: string): Kernel | undefined {
    const list = this.kernels.get(base);
    if (list) for (let i = 0; i < list.length; i++) if (list[i]!.code === code) return list[i]!.k;
    return undefined;
  }

  /** Compile a kernel and wait for the compiler: a WGSL error becomes a `ShaderError` with its messages. */
  async compile(def: KernelDef): Promise<Kernel> {
    const base = kernelBaseKey(def);
    const hit = this.cachedKernel(base, def.code);
    if (hit) return hit;
    // the module's errors come back here, not as an uncaptured error that would fail the context's next op
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ label: def.name, code: kernelSource(def) });
    const info = await module.getCompilationInfo();
    const scoped = await this.device.popErrorScope();
    const errs = info.messages.filter((m) => m.type === 'error');
    if (errs.length || scoped)
      throw new ShaderError(
        `kernel '${def.name}' failed to compile:\n` +
          (errs.length ? errs.map((m) => `  line ${m.lineNum}:${m.linePos}: ${m.message}`).join('\n') : `  ${scoped!.message}`),
      );
    this.device.pushErrorScope('validation');
    const k = this.kernel(def);
    const err = await this.device.popErrorScope();
    if (err) {
      const list = this.kernels.get(base)!;
      list.splice(list.findIndex((e) => e.k === k), 1);
      throw new ShaderError(`kernel '${def.name}' failed to build a pipeline: ${err.message}`);
    }
    return k;
  }

  /**
   * Encode one dispatch. `buffers` bind in order to bindings 1..n, each a whole buffer or a
   * {@link BufferSlice} (a byte range: aligned offset, size a multiple of 4 up to `maxBinding`); `params` fill
   * the uniform struct in the order of the kernel's `params`. `workgroups` is x or [x, y, z].
   */
  dispatch(
    k: Kernel,
    buffers: readonly BufferBinding[],
    workgroups: number | readonly number[],
    params?: ArrayLike<number>,
  ): void {
    if (this.error) this.check();
    if (buffers.length !== k.nBindings)
      throw new DeviceError(`kernel '${k.name}' takes ${k.nBindings} buffers, got ${buffers.length}`);
    const hasU = k.params.length > 0;
    if (hasU && this.ringUsed + SLOT > this.ringCpu.byteLength) this.flush();
    let key = k.layoutSig;
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i]!;
      // A slice has no `gpu`; its (buffer, offset, size) is validated when its bind group is made (the key
      // names all three and a buffer id's size never changes, so a cached bind group was valid).
      const g = (b as GpuBuffer).gpu === undefined ? (b as BufferSlice).buffer : (b as GpuBuffer);
      if (g.released) throw new DeviceError(`kernel '${k.name}': buffer ${i} was already released`);
      if (this.watched.size && k.layoutSig[k.layoutSig.length - buffers.length + i] === 'w') this.watched.touched(g);
      // a sub-buffer by its range of the pool buffer (its own id is new for every view: the same range viewed
      // again, as decoding steps do, finds its bind group)
      const root = (g as SubBuffer).root;
      const id = root ? root.id + '@' + (g as SubBuffer).offset + '+' + g.size : g.id;
      key += g === b ? ':' + id : ':' + id + '@' + (b as BufferSlice).offset + '+' + (b as BufferSlice).size;
      this.pendingIds.add(rootOf(g).id);
    }
    let bg = this.bindGroups.get(key);
    if (!bg) bg = this.makeBindGroup(key, k, hasU, buffers);
    const wx = typeof workgroups === 'number' ? workgroups : workgroups[0]!;
    const wy = typeof workgroups === 'number' ? 1 : (workgroups[1] ?? 1);
    const wz = typeof workgroups === 'number' ? 1 : (workgroups[2] ?? 1);
    const pass = this.profiler.enabled ? this.profiledPass(k.name) : (this.pass ??= this.enc().beginComputePass());
    pass.setPipeline(k.pipeline);
    if (hasU) {
      const off = this.ringUsed;
      const v = this.ringView;
      const ps = k.params;
      for (let i = 0; i < ps.length; i++) {
        const x = params ? params[i]! : 0;
        const t = ps[i]!.charCodeAt(0);
        if (t === 102 /* f */) v.setFloat32(off + 4 * i, x, true);
        else if (t === 105 /* i */) v.setInt32(off + 4 * i, x, true);
        else v.setUint32(off + 4 * i, x, true);
      }
      this.ringUsed += SLOT;
      pass.setBindGroup(0, bg, [off]);
    } else pass.setBindGroup(0, bg);
    if (wx > 0 && wy > 0 && wz > 0) pass.dispatchWorkgroups(wx, wy, wz);
    if (this.profiler.enabled) pass.end();
    this.stats.dispatches++;
    if (++this.pendingDispatches >= this.maxPerSubmit) this.flush();
  }

  /**
   * Submit on its own after at most `n` dispatches until the returned function is called (the smallest of the caps
   * held at a time applies, then `ContextOptions.maxDispatchesPerSubmit` again). Small caps let the GPU start on a
   * long run of work while the host is still encoding it, which pays where a read-back ends each run (a decoding
   * step).
   */
  capDispatchesPerSubmit(n: number): () => void {
    if (!Number.isInteger(n) || n < 1) throw new ConfigError(`a cap of dispatches per submit must be a positive integer, got ${n}`);
    this.submitCaps.push(n);
    this.maxPerSubmit = Math.min(this.ownMaxPerSubmit, ...this.submitCaps);
    if (this.pendingDispatches >= this.maxPerSubmit) this.flush();
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.submitCaps.splice(this.submitCaps.indexOf(n), 1);
      this.maxPerSubmit = Math.min(this.ownMaxPerSubmit, ...this.submitCaps);
    };
  }

  /** Dispatches after which the context submits on its own now (see {@link capDispatchesPerSubmit}). */
  get dispatchesPerSubmit(): number {
    return this.maxPerSubmit;
  }

  /** Submit everything encoded so far. */
  flush(): void {
    if (!this.encoder) return;
    this.endPass();
    if (this.ringUsed) this.device.queue.writeBuffer(this.ring, 0, this.ringCpu, 0, this.ringUsed);
    this.profiler.resolve(this.encoder);
    this.device.queue.submit([this.encoder.finish()]);
    this.profiler.afterSubmit();
    this.stats.submits++;
    this.encoder = null;
    this.ringUsed = 0;
    this.pendingDispatches = 0;
    this.pendingIds.clear();
  }

  /** Submit and wait until the GPU has finished; throws a pending GPU error. */
  async sync(): Promise<void> {
    this.check();
    this.flush();
    await waitGpu('sync', this.device.queue.onSubmittedWorkDone());
    this.check();
  }

  /** Release the device. The context is unusable afterwards. */
  destroy(): void {
    if (this.destroyed) return;
    this.flush();
    this.destroyed = true;
    this.pool.trim();
    this.device.destroy();
  }

  /** Throw the first GPU error seen (out of memory, validation, device lost). */
  check(): void {
    if (this.destroyed) throw new DeviceError('this context was destroyed');
    if (this.error) {
      const e = this.error;
      this.error = null;
      throw e;
    }
  }

  private enc(): GPUCommandEncoder {
    return (this.encoder ??= this.device.createCommandEncoder());
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }

  private profiledPass(name: string): GPUComputePassEncoder {
    this.endPass();
    if (this.profiler.full()) this.flush();
    return this.enc().beginComputePass({ timestampWrites: this.profiler.next(name) });
  }

  private layoutFor(sig: string): GPUBindGroupLayout {
    let l = this.layouts.get(sig);
    if (l) return l;
    const entries: GPUBindGroupLayoutEntry[] = [];
    let i = 0;
    for (const c of sig) {
      const visibility = GPUShaderStage.COMPUTE;
      if (c === 'u') entries.push({ binding: 0, visibility, buffer: { type: 'uniform', hasDynamicOffset: true } });
      else entries.push({ binding: ++i, visibility, buffer: { type: c === 'r' ? 'read-only-storage' : 'storage' } });
      if (c === 'u') i = 0;
    }
    l = this.device.createBindGroupLayout({ entries });
    this.layouts.set(sig, l);
    return l;
  }

  private makeBindGroup(key: string, k: Kernel, hasU: boolean, buffers: readonly BufferBinding[]): GPUBindGroup {
    const entries: GPUBindGroupEntry[] = [];
    if (hasU) entries.push({ binding: 0, resource: { buffer: this.ring, offset: 0, size: SLOT } });
    const maxB = this.maxBinding;
    const bufs: GpuBuffer[] = [];
    buffers.forEach((b, i) => {
      if ((b as GpuBuffer).gpu !== undefined) {
        const g = b as GpuBuffer;
        bufs.push(g);
        entries.push({ binding: i + 1, resource: { buffer: g.gpu, offset: offsetOf(g), size: Math.min(g.size, maxB) } });
      } else {
        const s = b as BufferSlice;
        this.checkSlice(k, i, s);
        bufs.push(s.buffer);
        entries.push({ binding: i + 1, resource: { buffer: s.buffer.gpu, offset: offsetOf(s.buffer) + s.offset, size: s.size } });
      }
    });
    this.checkArenaUse(k, hasU, bufs);
    const bg = this.device.createBindGroup({ layout: k.layout, entries });
    this.bindGroups.set(key, bg);
    for (const b of bufs) {
      // under the pool buffer's id: destroying it forgets the bind groups of its sub-buffers too
      const id = rootOf(b).id;
      let l = this.bindGroupsOf.get(id);
      if (!l) this.bindGroupsOf.set(id, (l = []));
      l.push(key);
    }
    return bg;
  }

  /** WebGPU refuses one buffer bound read-only and writable in the same dispatch, even as disjoint ranges: say so
   *  for two sub-buffers of one arena (checked when a bind group is made, not per dispatch). */
  private checkArenaUse(k: Kernel, hasU: boolean, bufs: readonly GpuBuffer[]): void {
    const sig = hasU ? k.layoutSig.slice(1) : k.layoutSig;
    const access = new Map<number, string>();
    bufs.forEach((b, i) => {
      const id = rootOf(b).id;
      const prev = access.get(id);
      if (prev !== undefined && prev !== sig[i])
        throw new DeviceError(
          `kernel '${k.name}': buffer ${i} and another binding are ranges of one arena buffer, one read-only and one ` +
            `writable; WebGPU forbids that in one dispatch (write into a tensor outside the arena)`,
        );
      access.set(id, sig[i]!);
    });
  }

  private checkSlice(k: Kernel, i: number, s: BufferSlice): void {
    const align = this.bindingAlignment;
    const { offset, size } = s;
    const what = `kernel '${k.name}': binding ${i + 1} (buffer ${i}) slice at byte offset ${offset}, size ${size}`;
    if (!Number.isInteger(offset) || offset < 0 || offset % align !== 0)
      throw new DeviceError(
        `${what}: the offset must be a non-negative multiple of this device's minStorageBufferOffsetAlignment (${align})`,
      );
    if (!Number.isInteger(size) || size <= 0 || size % 4 !== 0)
      throw new DeviceError(`${what}: the size must be a positive multiple of 4 bytes`);
    if (size > this.maxBinding)
      throw new DeviceError(`${what}: the size is over the storage binding limit (${this.maxBinding} bytes)`);
    if (offset + size > s.buffer.size)
      throw new DeviceError(`${what}: the range ends past the ${s.buffer.size}-byte buffer`);
  }

  private forgetBuffer(b: GpuBuffer): void {
    if (this.pendingIds.has(b.id)) this.flush();
    for (const k of this.bindGroupsOf.get(b.id) ?? []) this.bindGroups.delete(k);
    this.bindGroupsOf.delete(b.id);
  }

  private assertLive(buf: GpuBuffer): void {
    if (buf.released) throw new DeviceError('buffer was already released');
  }
}

const OOM_HINT = 'Try a smaller batch or sequence length, gradient checkpointing, or 16-bit weights.';

export { fmtBytes };
// createContext lives in create-context.ts (adapter and device selection); re-exported for the callers here
export { createContext } from './create-context';
