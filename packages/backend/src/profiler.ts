const CAPACITY = 4096;

/** Per-kernel GPU time from timestamp queries: one compute pass per dispatch while enabled. */
export class Profiler {
  readonly enabled: boolean;
  private querySet: GPUQuerySet | null = null;
  private resolveBuf: GPUBuffer | null = null;
  private names: string[] = [];
  private pending: Promise<void>[] = [];
  private totals = new Map<string, { count: number; ns: number }>();
  private staging: GPUBuffer | null = null;

  constructor(
    private device: GPUDevice,
    enabled: boolean,
  ) {
    this.enabled = enabled;
    if (enabled) {
      this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * CAPACITY });
      this.resolveBuf = device.createBuffer({ size: 16 * CAPACITY, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    }
  }

  full(): boolean {
    return this.names.length >= CAPACITY;
  }

  next(name: string): GPUComputePassTimestampWrites {
    const i = this.names.length;
    this.names.push(name);
    return { querySet: this.querySet!, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  resolve(encoder: GPUCommandEncoder): void {
    const n = this.names.length;
    if (!this.enabled || !n) return;
    encoder.resolveQuerySet(this.querySet!, 0, 2 * n, this.resolveBuf!, 0);
    this.staging = this.device.createBuffer({ size: 16 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    encoder.copyBufferToBuffer(this.resolveBuf!, 0, this.staging, 0, 16 * n);
  }

  afterSubmit(): void {
    const staging = this.staging;
    if (!staging) return;
    const names = this.names;
    this.names = [];
    this.staging = null;
    this.pending.push(
      staging.mapAsync(GPUMapMode.READ).then(() => {
        const t = new BigUint64Array(staging.getMappedRange());
        names.forEach((name, i) => {
          const ns = Number(t[2 * i + 1]! - t[2 * i]!);
          const e = this.totals.get(name) ?? { count: 0, ns: 0 };
          e.count++;
          e.ns += ns;
          this.totals.set(name, e);
        });
        staging.unmap();
        staging.destroy();
      }),
    );
  }

  /** Per-kernel totals (after `await ctx.sync()`), most expensive first. */
  async summary(): Promise<{ name: string; count: number; totalMs: number; meanUs: number }[]> {
    await Promise.all(this.pending);
    this.pending = [];
    return [...this.totals]
      .map(([name, e]) => ({ name, count: e.count, totalMs: e.ns / 1e6, meanUs: e.ns / 1e3 / e.count }))
      .sort((a, b) => b.totalMs - a.totalMs);
  }

  reset(): void {
    this.totals.clear();
  }
}
