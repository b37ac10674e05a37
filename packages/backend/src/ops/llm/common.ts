/** Shared pieces of the LLM kernels: launch shapes, generated WGSL helpers (vectorised loads and stores,
 *  workgroup reductions) and argument checks. Internal to `ops/llm`. */
import type { BufferBinding, Context, Kernel } from '../../context';
import type { DType } from '../../dtype';
import { isHalf, storageBytes } from '../../dtype';
import { fmtShape as fmt } from '../../checks';
import { ShapeError } from '../../errors';
import { formatOf } from '../../format';
import { cachedKernel } from '../../kernel-cache';
import { constPrelude, type KernelDef } from '../../kernel';
import { numel, type DeviceTensor } from '../../tensor';

// Argument checks and the workgroup grid are the backend's shared ones (checks.ts, grid.ts), under the names
// the llm ops use.
export { assertFloat as checkFloat, checkBindable, checkOut, fmtShape as fmt, sameShape } from '../../checks';
export { grid2d as grid } from '../../grid';

/** Largest workgroup this device runs (at most 1024). */
export function maxWorkgroup(ctx: Context): number {
  const l = ctx.info.limits;
  return Math.min(1024, l.maxComputeInvocationsPerWorkgroup ?? 256, l.maxComputeWorkgroupSizeX ?? 256);
}

export function pow2ceil(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, n)));
}

/** Launch-shape defaults per kernel family: `target` values per thread to aim for, `max` per thread held in
 *  registers (longer rows stream), `wg` the largest workgroup, `swg` the workgroup when streaming. Measured on
 *  an H200 (bench/llm-bench.ts): row kernels with a 32k row do best at 512 threads x up to 64 values. */
const SHAPES: Record<string, { target: number; max: number; wg: number; swg: number }> = {
  rmsnorm: { target: 16, max: 32, wg: 1024, swg: 1024 },
  // with int8 limbs (a decoding step's one row): more threads, so that each turns fewer units into limbs
  rmsnorm_limbs: { target: 4, max: 32, wg: 1024, swg: 1024 },
  rmsnorm_bwd: { target: 8, max: 16, wg: 1024, swg: 1024 },
  ce: { target: 16, max: 64, wg: 512, swg: 512 },
  emb_bwd: { target: 8, max: 16, wg: 1024, swg: 1024 },
};

/**
 * Launch shape of a workgroup-per-row kernel of `family` over rows of `units` vector units: `wg` threads,
 * each holding `nv` units in registers (thread t owns units t, t + wg, ...). `nv` 0 means the row is too long
 * to hold and the kernel streams it (reads it again in a second pass).
 */
export function rowShape(ctx: Context, units: number, family: keyof typeof SHAPES & string): { wg: number; nv: number } {
  const o = { ...SHAPES[family]!, ...llmTuning.shapes[family] };
  const maxWg = Math.min(maxWorkgroup(ctx), o.wg);
  const wg = Math.min(maxWg, Math.max(32, pow2ceil(Math.ceil(units / o.target))));
  const nv = Math.max(1, Math.ceil(units / wg));
  if (nv <= o.max) return { wg, nv };
  return { wg: Math.min(maxWorkgroup(ctx), o.swg), nv: 0 };
}


/** WGSL text: constants, the vector alias `V` (f32 or vec2f) and loaders/storers for the given bindings.
 *  `ld_<name>(e) -> V` reads elements e (and e+1 when VEC = 2; e even) of a read binding (or of an f32 rw
 *  binding, dtype 'rw'); `st_<name>(e, v)` writes them to an f32 rw binding; `hsum`/`hmax` reduce a V. */
export function vecPrelude(
  consts: Record<string, number | boolean>,
  vec: 1 | 2,
  reads: readonly (readonly [string, DType | 'rw'])[],
  writes: readonly string[],
): string {
  const out: string[] = [constPrelude({ ...consts, VEC: vec })];
  if (vec === 1) {
    out.push('alias V = f32;');
    out.push('fn hsum(v: V) -> f32 { return v; }');
    out.push('fn hmax(v: V) -> f32 { return v; }');
  } else {
    out.push('alias V = vec2f;');
    out.push('fn hsum(v: V) -> f32 { return v.x + v.y; }');
    out.push('fn hmax(v: V) -> f32 { return max(v.x, v.y); }');
  }
  for (const [name, dtype] of reads) {
    const f = dtype === 'rw' ? null : formatOf(dtype);
    let body: string;
    if (vec === 1) body = `return ${f ? `read_${name}(e)` : `${name}[e]`};`;
    else if (!f || f.wgsl.word === 'f32') body = `return vec2f(${name}[e], ${name}[e + 1u]);`;
    else if (f.perWord === 2) body = `let w = ${name}[e >> 1u]; return ${f.wgsl.unpack('w')};`;
    else throw new Error(`no vector loader for ${dtype}`);
    out.push(`fn ld_${name}(e: u32) -> V { ${body} }`);
  }
  for (const name of writes) {
    if (vec === 1) out.push(`fn st_${name}(e: u32, v: V) { ${name}[e] = v; }`);
    else out.push(`fn st_${name}(e: u32, v: V) { ${name}[e] = v.x; ${name}[e + 1u] = v.y; }`);
  }
  return out.join('\n') + '\n';
}

/**
 * Tuning knobs, for benchmarks and experiments: subgroup reductions on/off, and launch-shape overrides per
 * kernel family (`rmsnorm`, `rmsnorm_bwd`, `ce`, `emb_bwd`, `emb_sort`), over the
 * defaults in `SHAPES`. Kernel cache keys include every choice.
 */
export const llmTuning = {
  subgroups: true,
  /** Read 16-bit inputs a u32 word (two values) per load where rows allow it. */
  vec2: true,
  shapes: {} as Record<string, { target?: number; max?: number; wg?: number; swg?: number }>,
};

/** WGSL for row kernels: the entry-point builtins struct `BI` (t[, sid, nsg]; keep workgroup_id out of it, a
 *  struct with a non-uniform member is non-uniform as a whole) with `init_bi(b)`,
 *  and workgroup reductions `wg_sum`, `wg_max`, `wg_sum2` (vec2f) over `WG` threads, through subgroup
 *  operations where the device has them (one barrier pair instead of log2(WG) steps) or a tree in workgroup
 *  memory. Both are deterministic (fixed order). Call them from uniform control flow with every thread. */
export function reduceCode(ctx: Context): { code: string; enables: string[]; tag: string } {
  const sg = llmTuning.subgroups && ctx.info.features.subgroups;
  if (sg) return { code: REDUCE_SG, enables: ['subgroups'], tag: 'sg' };
  return { code: REDUCE_TREE, enables: [], tag: 'tree' };
}

/** The workgroup reductions: name, value type, workgroup array, subgroup op, and how two values combine. */
const REDUCERS: readonly [string, string, string, string, (a: string, b: string) => string][] = [
  ['wg_sum', 'f32', 'red_', 'subgroupAdd', (a, b) => `${a} + ${b}`],
  ['wg_sum2', 'vec2f', 'red2_', 'subgroupAdd', (a, b) => `${a} + ${b}`],
  ['wg_max', 'f32', 'red_', 'subgroupMax', (a, b) => `max(${a}, ${b})`],
];

const REDUCE_ARRAYS = 'var<workgroup> red_: array<f32, WG>;\nvar<workgroup> red2_: array<vec2f, WG>;\n';

// Through subgroups: each subgroup's result to the array, then every thread combines them in subgroup order.
const REDUCE_SG =
  `struct BI {
  @builtin(local_invocation_index) t: u32,
  @builtin(subgroup_id) sid: u32,
  @builtin(num_subgroups) nsg: u32,
}
var<private> sg_id_: u32;
var<private> n_sg_: u32;
fn init_bi(b: BI) { sg_id_ = b.sid; n_sg_ = b.nsg; }
` +
  REDUCE_ARRAYS +
  REDUCERS.map(
    ([name, T, arr, op, comb]) => `fn ${name}(v: ${T}, t: u32) -> ${T} {
  let s = ${op}(v);
  if (subgroupElect()) { ${arr}[sg_id_] = s; }
  workgroupBarrier();
  var r = ${arr}[0];
  for (var k = 1u; k < n_sg_; k++) { r = ${comb('r', `${arr}[k]`)}; }
  workgroupBarrier();
  return r;
}
`,
  ).join('');

// A tree in workgroup memory: log2(WG) halving steps.
const REDUCE_TREE =
  `struct BI {
  @builtin(local_invocation_index) t: u32,
}
fn init_bi(b: BI) { }
` +
  REDUCE_ARRAYS +
  REDUCERS.map(
    ([name, T, arr, , comb]) => `fn ${name}(v: ${T}, t: u32) -> ${T} {
  ${arr}[t] = v;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k >> 1u) {
    if (t < k) { ${arr}[t] = ${comb(`${arr}[t]`, `${arr}[t + k]`)}; }
    workgroupBarrier();
  }
  let r = ${arr}[0];
  workgroupBarrier();
  return r;
}
`,
  ).join('');

/** Vector width for rows of length `d` whose float inputs have `dtypes`: 2 (one u32 word of two 16-bit
 *  values per load) when a 16-bit input is read and rows start on whole words, else 1. */
export function vecFor(d: number, dtypes: readonly DType[]): 1 | 2 {
  return llmTuning.vec2 && d % 2 === 0 && dtypes.some(isHalf) ? 2 : 1;
}


export function checkInt(t: DeviceTensor, what: string): void {
  if (t.dtype !== 'i32') throw new ShapeError(`${what} must be i32, got ${t.dtype}${fmt(t.shape)}`);
}

/** Bytes per element of a tensor's storage format as laid out in a buffer (16-bit formats are packed). */
export function elemBytes(t: DeviceTensor): number {
  return formatOf(t.dtype).bits / 8;
}

/** One tensor of a row-chunked kernel: `unitBytes` bytes of its storage per unit (a row, or a group of rows)
 *  of the shared leading dimension. */
export type ChunkPart = readonly [t: DeviceTensor, unitBytes: number, name: string];

/** A plan from {@link rowChunks}: unit ranges [u0, u1), and whether the single range covers everything with
 *  every part fitting one binding (then bind whole buffers, as without chunking). */
export interface RowChunks {
  whole: boolean;
  ranges: [number, number][];
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/**
 * Split `units` units of a leading dimension shared by `parts` into ranges such that each part's bytes of a
 * range fit one storage binding (`ctx.maxBinding`) and start on the binding alignment. A kernel then runs once
 * per range on {@link sliceUnits} of every part, as if the range were the whole tensor. When every part fits
 * one binding the plan is one whole range (`whole`). Throws a ShapeError naming the part when not even the
 * smallest aligned range of units fits (`unitName` names a unit in that message).
 */
export function rowChunks(ctx: Context, op: string, units: number, parts: readonly ChunkPart[], unitName = 'row'): RowChunks {
  const max = ctx.maxBinding;
  if (parts.every(([t]) => storageBytes(t.dtype, numel(t.shape)) <= max)) return { whole: true, ranges: [[0, units]] };
  const align = ctx.bindingAlignment;
  let step = 1;
  let per = Infinity;
  for (const [, ub] of parts) {
    if (ub <= 0) continue;
    const s = align / gcd(align, ub);
    step = (step / gcd(step, s)) * s;
    per = Math.min(per, Math.floor(max / ub));
  }
  const rows = Math.floor(per / step) * step;
  if (rows < 1) {
    const [t, ub, name] = parts.reduce((a, b) => (b[1] > a[1] ? b : a));
    const why =
      ub > max
        ? `one ${unitName} is ${ub} bytes`
        : `chunk offsets stay aligned to ${align} bytes only at multiples of ${step} ${unitName}s, ${step * ub} bytes`;
    throw new ShapeError(
      `${op}: ${name} ${t.dtype}${fmt(t.shape)} cannot be split into storage bindings: ${why}, over this ` +
        `device's binding limit (${max} bytes)`,
    );
  }
  const ranges: [number, number][] = [];
  for (let u = 0; u < units; u += rows) ranges.push([u, Math.min(units, u + rows)]);
  return { whole: false, ranges };
}

/** The binding of units [u0, u1) of a tensor with `unitBytes` bytes per unit (the part's data only, rounded
 *  up to whole 4-byte words). */
export function sliceUnits(t: DeviceTensor, unitBytes: number, u0: number, u1: number): BufferBinding {
  const total = storageBytes(t.dtype, numel(t.shape));
  const offset = u0 * unitBytes;
  const end = Math.min(u1 * unitBytes, total);
  return { buffer: t.buffer, offset, size: Math.max(4, Math.ceil((end - offset) / 4) * 4) };
}

/** `t` bound whole (`plan.whole`) or as units [u0, u1). */
export function bindUnits(plan: RowChunks, t: DeviceTensor, unitBytes: number, u0: number, u1: number): BufferBinding {
  return plan.whole ? t.buffer : sliceUnits(t, unitBytes, u0, u1);
}

/** The kernel for `key` from the backend's one kernel cache (`kernel-cache.ts`, keys in the 'llm:' namespace),
 *  built once per context; `key` must name every choice that changes the def and is also the def's name. */
export function llmKernel(ctx: Context, key: string, make: () => Omit<KernelDef, 'name'>): Kernel {
  return cachedKernel(ctx, `llm:${key}`, () => ({ name: key, ...make() }));
}
