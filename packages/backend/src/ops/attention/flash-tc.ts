/**
 * Flash attention on tensor cores: the fused forward and the FlashAttention-2 backward (dQ pass, dK/dV pass) with
 * every matrix product (Q K^T, P V, dO V^T, dS K, P^T dO, dS^T Q) on subgroup matrices
 * (`chromium-experimental-subgroup-matrix`), f16 operands and f32 accumulation; softmax statistics (row max, sum,
 * lse, delta) stay f32. Kernels `shaders/attention-tc-{fwd,bwd-dq,bwd-dkdv}.wgsl`.
 *
 * {@link flashAttention} takes this path by itself for f16 q, k and v where the adapter offers an f16 -> f32
 * subgroup-matrix configuration (see {@link attentionTcPath}); everywhere else (lavapipe, SwiftShader, most
 * laptops, f32 or bf16 inputs) the portable kernels run. The fragment (SM x SN x SK) and subgroup size come from
 * the adapter's reported configurations, never a constant; the tiles are chosen to fit its workgroup memory.
 * Pipelines are built only after their WGSL checked out (`checkedKernel`): until then, or if the check failed,
 * the portable kernels run.
 */
import fwdWgsl from '../../../../../shaders/attention-tc-fwd.wgsl';
import dqWgsl from '../../../../../shaders/attention-tc-bwd-dq.wgsl';
import dkdvWgsl from '../../../../../shaders/attention-tc-bwd-dkdv.wgsl';
import type { BufferBinding, Context, ContextInfo, Kernel } from '../../context';
import type { DType } from '../../dtype';
import type { KernelDef, ParamSpec } from '../../kernel';
import { checkedKernel, kernelFailures, kernelsReady } from '../../kernel-cache';
import { tensorCorePlan, type TensorCorePlan } from '../core/matmul-tc';
import { specialize, withMaskRule } from './common';

/** One tile of a tensor-core attention kernel: `nsg` subgroups, each owning SM rows (query rows for the forward
 *  and dQ, keys for dK/dV), and `b` columns per step (keys per tile for the forward and dQ, queries per step for
 *  dK/dV). */
export interface TcAttnTile {
  nsg: number;
  b: number;
}

/** The tiles of the tensor-core attention kernels: the forward, the two backward passes, and the dQ pass that
 *  reads the dS the dK/dV pass stored (`dqds`: SM query rows per subgroup, `b` keys per step). */
export interface TcAttnTiles {
  fwd: TcAttnTile;
  dq: TcAttnTile;
  dkdv: TcAttnTile;
  dqds: TcAttnTile;
}

/** Which kernel a tile belongs to. */
export type TcAttnKind = keyof TcAttnTiles;

// Candidates in preference order (first that fits the device wins).
const CANDIDATES: Record<TcAttnKind, TcAttnTile[]> = {
  fwd: [{ nsg: 4, b: 64 }, { nsg: 4, b: 32 }, { nsg: 2, b: 64 }, { nsg: 2, b: 32 }, { nsg: 1, b: 32 }, { nsg: 1, b: 16 }, { nsg: 1, b: 8 }],
  dq: [{ nsg: 4, b: 64 }, { nsg: 4, b: 32 }, { nsg: 2, b: 64 }, { nsg: 2, b: 32 }, { nsg: 1, b: 32 }, { nsg: 1, b: 16 }, { nsg: 1, b: 8 }],
  dkdv: [{ nsg: 4, b: 64 }, { nsg: 4, b: 32 }, { nsg: 2, b: 64 }, { nsg: 2, b: 32 }, { nsg: 2, b: 16 }, { nsg: 1, b: 32 }, { nsg: 1, b: 16 }, { nsg: 1, b: 8 }],
  dqds: [{ nsg: 4, b: 64 }, { nsg: 4, b: 32 }, { nsg: 2, b: 64 }, { nsg: 2, b: 32 }, { nsg: 1, b: 32 }, { nsg: 1, b: 16 }, { nsg: 1, b: 8 }],
};

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
const lcm = (a: number, b: number) => (a / gcd(a, b)) * b;
const roundUp = (x: number, m: number) => Math.ceil(x / m) * m;

/**
 * The tensor-core plan for attention, or null with the reason: the matmul plan's needs (shader-f16, an f16 -> f32
 * subgroup-matrix configuration, a fixed subgroup size) plus a subgroup size that is a multiple of the fragment's
 * M with a power-of-two quotient (the threads of a row reduce with subgroup shuffles).
 */
export function attentionTcPlan(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes'>): TensorCorePlan | { reason: string } {
  const plan = tensorCorePlan(info);
  if (!('frag' in plan)) return plan;
  const tpr = plan.subgroupSize / plan.frag.M;
  if (!Number.isInteger(tpr) || tpr < 1 || (tpr & (tpr - 1)) !== 0)
    return { reason: `subgroup size ${plan.subgroupSize} is not a power-of-two multiple of the fragment's M ${plan.frag.M}` };
  return plan;
}

/** The head dim padded to the fragment (the kernels zero the extra columns). */
export function paddedHeadDim(plan: TensorCorePlan, D: number): number {
  return roundUp(D, lcm(lcm(plan.frag.K, plan.frag.N), 8));
}

/** The constants of one kernel (the `const` lines of its template) for a fragment, head dim and tile. */
export function tcAttnConsts(kind: TcAttnKind, plan: TensorCorePlan, D: number, t: TcAttnTile, wds = false): Record<string, number> {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const SG = plan.subgroupSize;
  const TPR = SG / SM;
  const DP = paddedHeadDim(plan, D);
  const rows = t.nsg * SM;
  const NT = t.nsg * SG;
  const frag = { NSG: t.nsg, SG, SM, SN, SK, TPR, D, DP, NDN: DP / SN, OPT: DP / TPR };
  if (kind === 'dkdv') {
    const BC = rows;
    const BR = t.b;
    return {
      ...frag, NDK: DP / SK, WDS: +wds, BC, BR, QROWS: Math.max(BR, BC), QSTR: DP + 8, PSTR: BR + 8, SSTR: Math.max(BR, DP) + 4,
      NBN: BR / SN, NBK: BR / SK, CPT: BR / TPR, NQU: Math.ceil((BR * DP) / 8 / NT), NQM: Math.ceil(BR / NT),
    };
  }
  const BR = rows;
  const BC = t.b;
  const c = {
    ...frag, NDK: DP / SK, BR, BC, KROWS: Math.max(BR, BC), KSTR: DP + 8, PSTR: BC + 8, SSTR: Math.max(BC, DP) + 4,
    NBN: BC / SN, NBK: BC / SK, CPT: BC / TPR, NKU: Math.ceil((BC * DP) / 8 / NT), NKM: Math.ceil(BC / NT),
    LTPR: Math.log2(TPR),
  };
  if (kind === 'fwd') return c;
  // the dQ template: recomputing (dq) or reading the stored dS (dqds: Ps holds keys x queries)
  const ds = kind === 'dqds';
  return {
    ...c, DS: +ds, RC: +!ds, PROWS: ds ? BC : BR, NSU: Math.ceil((BC * BR) / 8 / NT),
    ...(ds ? { KROWS: BC, PSTR: BR + 8, SSTR: DP + 4 } : {}),
  };
}

/** Workgroup memory of a kernel in bytes (the `var<workgroup>` arrays of its template). */
export function tcAttnBytes(kind: TcAttnKind, plan: TensorCorePlan, D: number, t: TcAttnTile): number {
  const c = tcAttnConsts(kind, plan, D, t);
  if (kind === 'dkdv') return 2 * ((c.QROWS! + c.BR!) * c.QSTR! + c.BC! * c.PSTR!) + 4 * (c.BC! * c.SSTR! + 2 * c.BR!);
  if (kind === 'dqds') return 2 * (c.KROWS! * c.KSTR! + c.BC! * c.PSTR!) + 4 * c.BR! * c.SSTR!;
  const kv = kind === 'fwd' ? (c.KROWS! + c.BC!) * c.KSTR! : 2 * c.KROWS! * c.KSTR!;
  return 2 * (kv + c.BR! * c.PSTR!) + 4 * (c.BR! * c.SSTR! + c.BC!);
}

/** Why a tile does not fit this fragment and device, or null when it does. */
export function tcAttnTileProblem(kind: TcAttnKind, plan: TensorCorePlan, limits: Record<string, number>, D: number, t: TcAttnTile): string | null {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const tpr = plan.subgroupSize / SM;
  if (!Number.isInteger(t.nsg) || t.nsg < 1) return `nsg ${t.nsg} is not a positive integer`;
  const need = lcm(lcm(SN, SK), lcm(tpr, 8));
  if (!Number.isInteger(t.b) || t.b < 1 || t.b % need) return `b ${t.b} is not a multiple of ${need} (fragment N, K, threads per row, 8)`;
  if (kind === 'dqds' && (t.nsg * SM) % 8) return `${t.nsg * SM} query rows are not a multiple of 8 (dS is read 8 queries at a time)`;
  const threads = t.nsg * plan.subgroupSize;
  if (threads > (limits.maxComputeInvocationsPerWorkgroup ?? 256)) return `${threads} threads exceed the device limit`;
  const bytes = tcAttnBytes(kind, plan, D, t);
  if (bytes > (limits.maxComputeWorkgroupStorageSize ?? 16384)) return `${bytes} bytes of workgroup memory exceed the device limit`;
  return null;
}

/** The tiles for head dim D: per kernel the first candidate that fits, or the reason none does. */
export function chooseTcAttnTiles(plan: TensorCorePlan, limits: Record<string, number>, D: number): TcAttnTiles | { reason: string } {
  const out: Partial<TcAttnTiles> = {};
  for (const kind of ['fwd', 'dq', 'dkdv', 'dqds'] as const) {
    const t = CANDIDATES[kind].find((c) => !tcAttnTileProblem(kind, plan, limits, D, c));
    if (!t) return { reason: `no tensor-core ${kind} tile fits the device's workgroup memory at head dim ${D}` };
    out[kind] = t;
  }
  return out as TcAttnTiles;
}

/** The tensor-core attention path of an adapter for head dim D: plan and tiles, or the reason it has none. */
export type TcAttnPath = { plan: TensorCorePlan; tiles: TcAttnTiles } | { reason: string };

/** {@link attentionTcPlan} and {@link chooseTcAttnTiles} for an adapter's info (pure: tests call it with
 *  made-up adapters). */
export function tcAttnPathFor(info: Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes' | 'limits'>, D: number): TcAttnPath {
  const plan = attentionTcPlan(info);
  if (!('frag' in plan)) return plan;
  const tiles = chooseTcAttnTiles(plan, info.limits, D);
  return 'reason' in tiles ? tiles : { plan, tiles };
}

const paths = new WeakMap<Context, Map<number, TcAttnPath>>();

/** The context's tensor-core attention path for head dim D (memoised). */
export function attentionTcPath(ctx: Context, D: number): TcAttnPath {
  let m = paths.get(ctx);
  if (!m) paths.set(ctx, (m = new Map()));
  let p = m.get(D);
  if (!p) m.set(D, (p = tcAttnPathFor(ctx.info, D)));
  return p;
}

// ---- WGSL generation ----

interface MatLoad {
  fn: string;
  side: 'l' | 'r';
  layout: 'row_major' | 'col_major';
  arr: string;
  stride: string;
}

const LOADS: Record<TcAttnKind, MatLoad[]> = {
  fwd: [
    { fn: 'ld_q', side: 'l', layout: 'row_major', arr: 'Ks', stride: 'KSTR' },
    { fn: 'ld_kt', side: 'r', layout: 'col_major', arr: 'Ks', stride: 'KSTR' },
    { fn: 'ld_p', side: 'l', layout: 'row_major', arr: 'Ps', stride: 'PSTR' },
    { fn: 'ld_v', side: 'r', layout: 'row_major', arr: 'Vs', stride: 'KSTR' },
  ],
  dq: [
    { fn: 'ld_q', side: 'l', layout: 'row_major', arr: 'Ks', stride: 'KSTR' },
    { fn: 'ld_do', side: 'l', layout: 'row_major', arr: 'Vs', stride: 'KSTR' },
    { fn: 'ld_kt', side: 'r', layout: 'col_major', arr: 'Ks', stride: 'KSTR' },
    { fn: 'ld_vt', side: 'r', layout: 'col_major', arr: 'Vs', stride: 'KSTR' },
    { fn: 'ld_ds', side: 'l', layout: 'row_major', arr: 'Ps', stride: 'PSTR' },
    { fn: 'ld_k', side: 'r', layout: 'row_major', arr: 'Ks', stride: 'KSTR' },
  ],
  dkdv: [
    { fn: 'ld_kl', side: 'l', layout: 'row_major', arr: 'Qs', stride: 'QSTR' },
    { fn: 'ld_qt', side: 'r', layout: 'col_major', arr: 'Qs', stride: 'QSTR' },
    { fn: 'ld_dot', side: 'r', layout: 'col_major', arr: 'dOs', stride: 'QSTR' },
    { fn: 'ld_pds', side: 'l', layout: 'row_major', arr: 'PdS', stride: 'PSTR' },
    { fn: 'ld_do', side: 'r', layout: 'row_major', arr: 'dOs', stride: 'QSTR' },
    { fn: 'ld_q', side: 'r', layout: 'row_major', arr: 'Qs', stride: 'QSTR' },
  ],
  dqds: [
    { fn: 'ld_ds', side: 'l', layout: 'col_major', arr: 'Ps', stride: 'PSTR' },
    { fn: 'ld_k', side: 'r', layout: 'row_major', arr: 'Ks', stride: 'KSTR' },
  ],
};

/** The subgroup-matrix aliases and loads of a kernel: the real builtins. */
function matrixOps(plan: TensorCorePlan, loads: MatLoad[]): string {
  const { M, N, K } = plan.frag;
  // subgroup_matrix_left<T, K, M> is M rows x K columns; right<T, N, K> is K x N; result<T, N, M> is M x N
  return (
    `alias Lm = subgroup_matrix_left<f16, ${K}, ${M}>;\n` +
    `alias Rm = subgroup_matrix_right<f16, ${N}, ${K}>;\n` +
    `alias Acc = subgroup_matrix_result<f32, ${N}, ${M}>;\n` +
    loads
      .map((l) => `fn ${l.fn}(off: u32) -> ${l.side === 'l' ? 'Lm' : 'Rm'} { return subgroupMatrixLoad<${l.side === 'l' ? 'Lm' : 'Rm'}, ${l.layout}>(&${l.arr}, off, ${l.stride}); }\n`)
      .join('')
  );
}

/**
 * The same operations emulated with plain arrays (tests only: adapters without subgroup matrices compile the
 * kernels this way). Every lane holds the whole matrix; loads and stores demand subgroup-uniform offsets and
 * strides as the real builtins do (a subgroup operation under a branch on them), so Tint's uniformity analysis
 * rejects what would break the real builtins. (Running them works but takes minutes per case on lavapipe.)
 */
function emulatedOps(plan: TensorCorePlan, loads: MatLoad[]): string {
  const { M, N, K } = plan.frag;
  const ld = (l: MatLoad) => {
    const [rows, cols] = l.side === 'l' ? [M, K] : [K, N];
    const at = l.layout === 'row_major' ? `i * ${l.stride} + j` : `j * ${l.stride} + i`;
    return `fn ${l.fn}(off: u32) -> ${l.side === 'l' ? 'Lm' : 'Rm'} {
  em_need(off);
  var m: ${l.side === 'l' ? 'Lm' : 'Rm'};
  for (var i = 0u; i < ${rows}u; i++) { for (var j = 0u; j < ${cols}u; j++) { m[i * ${cols}u + j] = f32(${l.arr}[off + ${at}]); } }
  return m;
}\n`;
  };
  return `alias Lm = array<f32, ${M * K}>;
alias Rm = array<f32, ${K * N}>;
alias Acc = array<f32, ${M * N}>;
var<private> em_sink: f32;
fn em_need(x: u32) { if (x == 0xffffffffu) { em_sink = subgroupAdd(1.0); } }
fn em_mma(a: Lm, b: Rm, c: Acc) -> Acc {
  var d = c;
  for (var i = 0u; i < ${M}u; i++) {
    for (var n = 0u; n < ${N}u; n++) {
      var s = d[i * ${N}u + n];
      for (var k = 0u; k < ${K}u; k++) { s = fma(a[i * ${K}u + k], b[k * ${N}u + n], s); }
      d[i * ${N}u + n] = s;
    }
  }
  return d;
}
fn em_store_Ss(off: u32, m: Acc, stride: u32) {
  em_need(off);
  em_need(stride);
  for (var i = 0u; i < ${M}u; i++) { for (var j = 0u; j < ${N}u; j++) { Ss[off + i * stride + j] = m[i * ${N}u + j]; } }
}
${loads.map(ld).join('')}`;
}

/** `unit_<fn>(e, n)`: 8 halves of binding `name` from element e (n of them in range, the rest 0), and `at_<fn>(i)`:
 *  element i as f32; through a vec4u view of the binding when `vec` (16-byte loads; e a multiple of 8, n 0 or
 *  >= 8), else through its reader (one entry point may not use both views of a binding). */
function unitLoader(name: string, binding: number, vec: boolean, fn = name): string {
  if (vec)
    return `@group(0) @binding(${binding}) var<storage, read> ${name}4: array<vec4u>;
fn unit_${fn}(e: u32, n: u32) -> array<vec2<f16>, 4> {
  var v = array<vec2<f16>, 4>();
  if (n > 0u) {
    let w = ${name}4[e >> 3u];
    v = array<vec2<f16>, 4>(bitcast<vec2<f16>>(w.x), bitcast<vec2<f16>>(w.y), bitcast<vec2<f16>>(w.z), bitcast<vec2<f16>>(w.w));
  }
  return v;
}
fn at_${fn}(i: u32) -> f32 { return unpack2x16float(${name}4[i >> 3u][(i >> 1u) & 3u])[i & 1u]; }\n`;
  return `fn unit_${fn}(e: u32, n: u32) -> array<vec2<f16>, 4> {
  var v = array<vec2<f16>, 4>();
  for (var j = 0u; j < 8u; j++) { if (j < n) { v[j / 2u][j % 2u] = f16(read_${name}(e + j)); } }
  return v;
}
fn at_${fn}(i: u32) -> f32 { return f32(read_${name}(i)); }\n`;
}

const TEMPLATES: Record<TcAttnKind, string> = { fwd: fwdWgsl, dq: dqWgsl, dkdv: dkdvWgsl, dqds: dqWgsl };

/** The vec4u view `ds4` of the stored dS (binding `ds` of the dK/dV pass with `wds`, or of the dQ-from-dS pass). */
const dsView = (binding: number, access: 'read' | 'read_write') => `@group(0) @binding(${binding}) var<storage, ${access}> ds4: array<vec4u>;\n`;

/**
 * The whole kernel code (before the generated bindings prelude) of a tensor-core attention kernel: matrix aliases
 * and loads, unit loaders, and the specialised template with the shared mask rule. `emulate` swaps the
 * subgroup-matrix builtins for plain-array stand-ins (tests on adapters without subgroup matrices).
 */
export function tcAttnCode(kind: TcAttnKind, plan: TensorCorePlan, D: number, t: TcAttnTile, doutDtype: DType = 'f16', emulate = false, wds = false): string {
  const vec = D % 8 === 0;
  const consts = { ...tcAttnConsts(kind, plan, D, t, wds), VEC: +vec, ...(kind === 'fwd' ? {} : { VECD: +(vec && doutDtype === 'f16' && kind !== 'dqds') }) };
  let body = specialize(withMaskRule(TEMPLATES[kind]), consts);
  if (emulate)
    body = body.replace(/subgroupMatrixMultiplyAccumulate\(/g, 'em_mma(').replace(/subgroupMatrixStore<row_major>\(&(\w+), /g, 'em_store_$1(');
  const units =
    kind === 'dqds'
      ? unitLoader('k', 1, vec) + dsView(2, 'read')
      : unitLoader('q', 1, vec) +
        unitLoader('k', 2, vec) +
        unitLoader('v', 3, vec) +
        (kind === 'fwd' ? '' : unitLoader('dout', 4, vec && doutDtype === 'f16', 'do')) +
        (kind === 'dkdv' && wds ? dsView(10, 'read_write') : '');
  return (emulate ? emulatedOps(plan, LOADS[kind]) : matrixOps(plan, LOADS[kind])) + units + body;
}

/** WGSL extensions of the tensor-core attention kernels. */
export const TC_ATTN_ENABLES = ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'];

export const FWD_PARAMS: ParamSpec[] = ['u32:T', 'u32:S', 'u32:Hq', 'u32:Hkv', 'u32:G', 'i32:qOffset', 'u32:causal', 'u32:window', 'u32:hasMask', 'f32:scale2', 'f32:capmul'];
export const BWD_PARAMS: ParamSpec[] = [
  'u32:T', 'u32:S', 'u32:Hq', 'u32:Hkv', 'u32:G', 'i32:qOffset', 'u32:causal', 'u32:window', 'u32:hasMask',
  'f32:scale', 'f32:scale2', 'f32:capin', 'f32:capmul',
];

/**
 * The kernel definition of a tensor-core attention kernel (bindings as the portable kernels'; `dqds`: k, ds,
 * dq_out). `wds`: the dK/dV pass also writes dS (binding `ds`, last) for the `dqds` pass.
 */
export function tcAttnDef(
  kind: TcAttnKind,
  plan: TensorCorePlan,
  D: number,
  t: TcAttnTile,
  maskDtype: DType,
  doutDtype: DType = 'f16',
  emulate = false,
  outDtype: DType = 'f32',
  wds = false,
): KernelDef {
  const f16 = (name: string) => ({ name, access: 'read' as const, dtype: 'f16' as DType });
  const common = [f16('q'), f16('k'), f16('v')];
  const { M, N, K } = plan.frag;
  const name = `attention-tc-${kind}${wds ? '-ds' : ''}-d${D}-${t.nsg}x${t.b}-f${M}x${N}x${K}${emulate ? '-emulated' : ''}`;
  const code = tcAttnCode(kind, plan, D, t, doutDtype, emulate, wds);
  const enables = emulate ? ['f16', 'subgroups'] : TC_ATTN_ENABLES;
  if (kind === 'dqds')
    return { name, code, enables, params: BWD_PARAMS, bindings: [f16('k'), f16('ds'), { name: 'dq_out', access: 'rw', dtype: 'f32' }] };
  if (kind === 'fwd')
    return {
      name,
      code,
      enables,
      params: FWD_PARAMS,
      bindings: [...common, { name: 'mask', access: 'read', dtype: maskDtype }, { name: 'o', access: 'rw', dtype: 'f32' }, { name: 'lse', access: 'rw', dtype: 'f32' }],
    };
  const dout = { name: 'dout', access: 'read' as const, dtype: doutDtype };
  const lse = { name: 'lse', access: 'read' as const, dtype: 'f32' as DType };
  const mask = { name: 'mask', access: 'read' as const, dtype: maskDtype };
  const rw = (n: string) => ({ name: n, access: 'rw' as const, dtype: 'f32' as DType });
  // dQ also computes delta (from dout and the forward's out) for the dK/dV pass
  const bindings =
    kind === 'dq'
      ? [...common, dout, lse, mask, { name: 'out', access: 'read' as const, dtype: outDtype }, rw('delta'), rw('dq_out')]
      : [
          ...common, dout, lse, { name: 'delta', access: 'read' as const, dtype: 'f32' as DType }, mask, rw('dk_out'), rw('dv_out'),
          ...(wds ? [{ name: 'ds', access: 'rw' as const, dtype: 'f16' as DType }] : []),
        ];
  return { name, code, enables, params: BWD_PARAMS, bindings };
}

/** The grid of a kernel: (row or key blocks, heads, batch). */
export function tcAttnGrid(kind: TcAttnKind, plan: TensorCorePlan, t: TcAttnTile, dims: { B: number; T: number; S: number; Hq: number; Hkv: number }): [number, number, number] {
  const rows = t.nsg * plan.frag.M;
  return kind === 'dkdv' ? [Math.ceil(dims.S / rows), dims.Hkv, dims.B] : [Math.ceil(dims.T / rows), dims.Hq, dims.B];
}

/** Bytes of the dS the dK/dV pass stores for the `dqds` pass: f16 [B, Hq, S, T rounded up to 8]. */
export function tcAttnDsBytes(dims: { B: number; T: number; S: number; Hq: number }): number {
  return dims.B * dims.Hq * dims.S * roundUp(dims.T, 8) * 2;
}

/**
 * The checked kernel of `kind` for this context, or null while its WGSL check runs or after it failed (the caller
 * runs the portable kernel then).
 */
export function tcAttnKernel(
  ctx: Context,
  kind: TcAttnKind,
  plan: TensorCorePlan,
  D: number,
  t: TcAttnTile,
  maskDtype: DType,
  doutDtype: DType = 'f16',
  outDtype: DType = 'f32',
  wds = false,
): Kernel | null {
  const { M, N, K } = plan.frag;
  const key = `attn-tc:${kind}${wds ? '-ds' : ''}:${D}:${t.nsg}x${t.b}:${M}x${N}x${K}:${plan.subgroupSize}:${maskDtype}:${kind === 'fwd' ? '' : doutDtype}:${kind === 'dq' ? outDtype : ''}`;
  return checkedKernel(ctx, key, () => tcAttnDef(kind, plan, D, t, maskDtype, doutDtype, false, outDtype, wds));
}

/** Encode one tensor-core attention kernel (bindings in {@link tcAttnDef}'s order); false (nothing encoded) while
 *  its kernel is not ready. */
export function encodeTcAttn(
  ctx: Context,
  kind: TcAttnKind,
  path: { plan: TensorCorePlan; tiles: TcAttnTiles },
  dims: { B: number; T: number; S: number; Hq: number; Hkv: number; D: number },
  maskDtype: DType,
  doutDtype: DType,
  bufs: BufferBinding[],
  params: number[],
  outDtype: DType = 'f32',
  wds = false,
): boolean {
  const t = path.tiles[kind];
  const k = tcAttnKernel(ctx, kind, path.plan, dims.D, t, maskDtype, doutDtype, outDtype, wds);
  if (!k) return false;
  ctx.dispatch(k, bufs, tcAttnGrid(kind, path.plan, t, dims), params);
  return true;
}

/** Tensor-core attention kernels whose check failed on this context (cache key -> error). */
export function attentionTcFailures(ctx: Context): Map<string, Error> {
  return new Map([...kernelFailures(ctx)].filter(([k]) => k.startsWith('attn-tc:')));
}

/** Wait until every tensor-core kernel requested so far on this context has been checked (and built). */
export const attentionTcReady = kernelsReady;
