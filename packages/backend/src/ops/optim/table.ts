import type { GpuBuffer } from '../../buffer-pool';
import type { Context } from '../../context';
import { ConfigError, ShapeError } from '../../errors';

/** Elements one workgroup of a multi-tensor optimizer kernel updates (a chunk never spans two segments). */
export const OPTIM_CHUNK = 4096;

/** Per-tensor hyper-parameters of a multi-tensor step (a PyTorch param group's `lr` and `weight_decay`). */
export interface SegmentHyper {
  lr: number;
  /** AdamW: decoupled decay; SGD: L2 penalty added to the gradient. Default 0. */
  weightDecay?: number;
}

/** One tensor's place in a flat arena (element offset and length) and its hyper-parameters. Offsets that are
 *  multiples of 64 elements (256 bytes) keep the multi-tensor kernels' memory accesses aligned. */
export interface ArenaSegment extends SegmentHyper {
  offset: number;
  length: number;
}

/**
 * Where the tensors of a multi-tensor step live in their arenas, on the GPU: per-segment `lr`/`weightDecay`
 * and a list of chunks of at most `OPTIM_CHUNK` elements, one workgroup each. Built once per arena layout.
 */
export interface SegmentTable {
  readonly buffer: GpuBuffer;
  readonly segments: number;
  readonly chunks: number;
  /** One past the last element a segment covers: arena tensors need at least this many elements. */
  readonly extent: number;
  /** Total elements the segments cover (what one step reads and writes per arena). */
  readonly covered: number;
}

function checkHyper(h: SegmentHyper, i: number, op: string): void {
  if (!Number.isFinite(h.lr)) throw new ConfigError(`${op}: segment ${i} has a non-finite lr ${h.lr}`);
  if (!Number.isFinite(h.weightDecay ?? 0))
    throw new ConfigError(`${op}: segment ${i} has a non-finite weightDecay ${h.weightDecay}`);
}

function chunkCount(offset: number, length: number): number {
  return length ? Math.floor((offset + length - 1) / OPTIM_CHUNK) - Math.floor(offset / OPTIM_CHUNK) + 1 : 0;
}

/**
 * Build the GPU table of a flat-arena multi-tensor step. Segments must not overlap (gaps are fine and are left
 * untouched); their order is free. Throws `ShapeError` for negative or non-integer offsets/lengths and overlaps.
 */
export function createSegmentTable(ctx: Context, segments: readonly ArenaSegment[]): SegmentTable {
  const op = 'createSegmentTable';
  const order = segments.map((_, i) => i);
  segments.forEach((s, i) => {
    if (!Number.isInteger(s.offset) || s.offset < 0 || !Number.isInteger(s.length) || s.length < 0)
      throw new ShapeError(`${op}: segment ${i} has an invalid offset ${s.offset} or length ${s.length}`);
    checkHyper(s, i, op);
  });
  order.sort((a, b) => segments[a]!.offset - segments[b]!.offset);
  let end = 0;
  let prev = -1;
  let covered = 0;
  let chunks = 0;
  for (const i of order) {
    const s = segments[i]!;
    if (s.length === 0) continue;
    if (s.offset < end)
      throw new ShapeError(
        `${op}: segment ${i} [${s.offset}, ${s.offset + s.length}) overlaps segment ${prev} ` +
          `[${segments[prev]!.offset}, ${end})`,
      );
    end = s.offset + s.length;
    prev = i;
    covered += s.length;
    chunks += chunkCount(s.offset, s.length);
  }
  if (end > 2 ** 32 - OPTIM_CHUNK) throw new ShapeError(`${op}: segments reach element ${end}, past the 32-bit index range`);
  const words = new Uint32Array(2 * segments.length + 3 * chunks);
  const f = new Float32Array(words.buffer);
  segments.forEach((s, i) => {
    f[2 * i] = s.lr;
    f[2 * i + 1] = s.weightDecay ?? 0;
  });
  let w = 2 * segments.length;
  for (const i of order) {
    const s = segments[i]!;
    // chunk boundaries at multiples of OPTIM_CHUNK in the arena: with aligned segment offsets every warp's
    // accesses start on a cache-line boundary
    const end = s.offset + s.length;
    for (let a = s.offset; a < end; ) {
      const b = Math.min(end, (Math.floor(a / OPTIM_CHUNK) + 1) * OPTIM_CHUNK);
      words[w++] = a;
      words[w++] = b - a;
      words[w++] = i;
      a = b;
    }
  }
  const buffer = ctx.alloc(Math.max(4, words.byteLength));
  if (words.byteLength) ctx.write(buffer, words);
  return { buffer, segments: segments.length, chunks, extent: end, covered };
}

/**
 * Rewrite every segment's `lr` and `weightDecay` (one small upload; it submits pending work first if that work
 * uses the table). For a schedule that scales all lrs alike, pass `lrScale` to the step instead: no upload.
 */
export function updateSegmentTable(ctx: Context, table: SegmentTable, hypers: readonly SegmentHyper[]): void {
  const op = 'updateSegmentTable';
  if (hypers.length !== table.segments)
    throw new ShapeError(`${op}: the table has ${table.segments} segments, got ${hypers.length} hyper-parameter sets`);
  const f = new Float32Array(2 * hypers.length);
  hypers.forEach((h, i) => {
    checkHyper(h, i, op);
    f[2 * i] = h.lr;
    f[2 * i + 1] = h.weightDecay ?? 0;
  });
  if (f.length) ctx.write(table.buffer, f);
}

/** Return the table's buffer to the pool. */
export function releaseSegmentTable(ctx: Context, table: SegmentTable): void {
  ctx.release(table.buffer);
}
