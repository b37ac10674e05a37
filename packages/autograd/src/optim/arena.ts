/**
 * Multi-tensor optimizer storage: the small f32 parameters of a group live in flat arenas, one per role (the
 * parameters, their gradients and each optimizer slot: AdamW's m and v), every tensor at the same element
 * offset in all of them, so that one dispatch (`adamwStepMulti` with a segment table) steps them all instead of
 * one dispatch per tensor (a LoRA run of a 1.1B Llama trains 308 small tensors).
 *
 * The tensors stay ordinary tensors: their storage is a sub-buffer of the arena (`ctx.subBuffer`), which every op
 * binds, reads and writes as usual. Before each step {@link makeResident} moves in whatever is not in its place
 * (the first step; a parameter or gradient replaced since, e.g. by `assign`, `zeroGrad(true)` or a state dict):
 * one copy of that tensor, once. The backward pass then accumulates gradients straight into the arena (a leaf
 * keeps its gradient buffer across steps), so a steady training step copies nothing.
 */
import {
  createSegmentTable,
  fill,
  releaseSegmentTable,
  type ArenaPiece,
  type Context,
  type DeviceTensor,
  type GpuBuffer,
  type SegmentTable,
} from '@rusty/backend';
import { releaseRef } from '../storage';
import { Tensor } from '../tensor';

/** `maxElements`: tensors of at most this many elements go into arenas; larger ones keep one dispatch each (it
 *  moves enough bytes to fill the GPU, and moving them would double their memory for a moment). */
export const arenaTuning = { maxElements: 1 << 20 };

/** Tensors of one group that share arenas (at most one storage binding each), and where each one sits. */
export interface ArenaPack {
  readonly params: readonly Tensor[];
  /** Element offsets, the same in every arena: multiples of 64 elements and of the binding alignment. */
  readonly offsets: readonly number[];
  /** Bytes each tensor's sub-buffer spans (its size rounded up to the alignment). */
  readonly spans: readonly number[];
  /** Elements every arena holds. */
  readonly extent: number;
  /** One arena per role: 'param', 'grad' and each optimizer slot. */
  readonly arenas: ReadonlyMap<string, GpuBuffer>;
  /** Per tensor (in `params` order), the sub-buffer its storage was last moved into, by role (a different buffer
   *  now: it has moved out since). */
  readonly homes: Record<string, GpuBuffer | undefined>[];
  /** The segment table of the last step, for the tensors `tableKey` names, with weight decay `tableWd`. */
  table: SegmentTable | null;
  tableKey: string;
  tableWd: number;
}

/**
 * Split `params` into packs of arena tensors (f32, at most `arenaTuning.maxElements` elements; each pack's arenas
 * fit one storage binding) and the rest, stepped one tensor at a time. Allocates the arenas.
 */
export function packArenas(ctx: Context, params: readonly Tensor[], slots: readonly string[]): { packs: ArenaPack[]; rest: Tensor[] } {
  const align = Math.max(256, ctx.bindingAlignment);
  const rest: Tensor[] = [];
  const groups: { params: Tensor[]; offsets: number[]; spans: number[]; bytes: number }[] = [];
  let cur: (typeof groups)[number] | null = null;
  for (const p of params) {
    const span = Math.ceil((p.size * 4) / align) * align;
    if (p.dtype !== 'f32' || p.size === 0 || p.size > arenaTuning.maxElements || span > ctx.maxBinding) {
      rest.push(p);
      continue;
    }
    if (!cur || cur.bytes + span > ctx.maxBinding) groups.push((cur = { params: [], offsets: [], spans: [], bytes: 0 }));
    cur.params.push(p);
    cur.offsets.push(cur.bytes / 4);
    cur.spans.push(span);
    cur.bytes += span;
  }
  const packs = groups.map((g): ArenaPack => {
    const arenas = new Map<string, GpuBuffer>();
    for (const role of ['param', 'grad', ...slots]) arenas.set(role, ctx.alloc(g.bytes));
    const pk: ArenaPack = {
      params: g.params,
      offsets: g.offsets,
      spans: g.spans,
      extent: g.bytes / 4,
      arenas,
      homes: g.params.map(() => ({})),
      table: null,
      tableKey: '',
      tableWd: NaN,
    };
    pk.params.forEach((p, j) => slotOf.set(p, { pk, j }));
    return pk;
  });
  return { packs, rest };
}

/** Where each arena tensor sits (for {@link gradPieces}). */
const slotOf = new WeakMap<Tensor, { pk: ArenaPack; j: number }>();

/**
 * The gradients of `params` for passes over all of them (`gradNorm` in `clipGradNorm`, `unscaleAndCheck` in a
 * GradScaler), in order: a gradient that lives in a pack's gradient arena as a piece of that arena, so that the
 * pass reads all the pieces of one arena in one dispatch (bit-identical to one dispatch per gradient), any other
 * as its tensor.
 */
export function gradPieces(params: readonly Tensor[]): (DeviceTensor | ArenaPiece)[] {
  const out: (DeviceTensor | ArenaPiece)[] = [];
  for (const p of params) {
    const g = p.grad;
    if (!g) continue;
    const s = slotOf.get(p);
    if (s && g.data.buffer === s.pk.homes[s.j]!.grad && !s.pk.arenas.get('grad')!.released)
      out.push({ arena: arenaTensor(s.pk, 'grad'), offset: s.pk.offsets[s.j]!, length: p.size });
    else out.push(g.data);
  }
  return out;
}

/** Give the arenas and tables back (tensors still stored in them keep them alive until they are released). */
export function releasePacks(ctx: Context, packs: readonly ArenaPack[]): void {
  for (const pk of packs) {
    for (const b of pk.arenas.values()) ctx.release(b);
    if (pk.table) releaseSegmentTable(ctx, pk.table);
    pk.table = null;
  }
}

/** The f32 tensor spanning a pack's arena of `role` (what the multi-tensor kernels bind). */
export function arenaTensor(pk: ArenaPack, role: string): DeviceTensor {
  return { buffer: pk.arenas.get(role)!, dtype: 'f32', shape: [pk.extent] };
}

/**
 * Make tensor `j` of a pack live in its arena slots: its parameter, its gradient (which must exist and be f32)
 * and its optimizer state in `state` (created zeroed when absent). What is elsewhere is copied in and its old
 * storage released; what is in place costs one comparison.
 */
export function makeResident(ctx: Context, pk: ArenaPack, j: number, state: Map<Tensor, Record<string, DeviceTensor>>, slots: readonly string[]): void {
  const p = pk.params[j]!;
  const home = pk.homes[j]!;
  const g = p.grad!;
  const s = state.get(p);
  // the steady state: everything in place, nothing allocated
  if (p.data.buffer === home.param && g.data.buffer === home.grad && s && slots.every((n) => s[n]?.buffer === home[n])) return;
  const bytes = p.size * 4;
  const moveIn = (role: string, from: GpuBuffer | null): DeviceTensor => {
    const b = ctx.subBuffer(pk.arenas.get(role)!, pk.offsets[j]! * 4, pk.spans[j]!);
    if (from) ctx.copy(from, b, bytes);
    home[role] = b;
    return { buffer: b, dtype: 'f32', shape: [...p.shape] };
  };
  if (p.data.buffer !== home.param) p.assign(moveIn('param', p.data.buffer));
  if (g.data.buffer !== home.grad) p.grad = new Tensor(ctx, moveIn('grad', g.data.buffer), false, null, 0, false);
  const st = s ?? {};
  if (!s) state.set(p, st);
  for (const n of slots) {
    const t = st[n];
    if (t && t.buffer === home[n]) continue;
    if (t) {
      st[n] = moveIn(n, t.buffer);
      releaseRef(ctx, t.buffer);
    } else st[n] = fill(ctx, p.shape, 0, 'f32', { out: moveIn(n, null) });
  }
}

/**
 * The segment table of the pack's tensors `included` (indices, ascending), each with lr 1 (the step passes the
 * group's lr as `lrScale`: 1 * lr is exact, so every tensor sees the lr the one-tensor kernel would) and the
 * group's weight decay. Rebuilt only when the set or the weight decay changes.
 */
export function tableFor(ctx: Context, pk: ArenaPack, included: readonly number[], weightDecay: number): SegmentTable {
  const key = included.length === pk.params.length ? 'all' : included.join(',');
  if (pk.table && pk.tableKey === key && Object.is(pk.tableWd, weightDecay)) return pk.table;
  if (pk.table) releaseSegmentTable(ctx, pk.table);
  pk.table = createSegmentTable(
    ctx,
    included.map((j) => ({ offset: pk.offsets[j]!, length: pk.params[j]!.size, lr: 1, weightDecay })),
  );
  pk.tableKey = key;
  pk.tableWd = weightDecay;
  return pk.table;
}
