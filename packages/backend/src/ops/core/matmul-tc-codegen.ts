/**
 * The WGSL of the tensor-core matmul (see matmul-tc.ts): the prelude of consts and operand loaders for a fragment,
 * tile, layout and flags, and the straight-line code written at the //@ lines of `shaders/matmul-tc.wgsl`
 * (staging, fragment loads, multiply-accumulates, stores). Also the tile's workgroup-memory layout, which
 * `tcTileProblem` checks against the device.
 */
import tcWgsl from '../../../../../shaders/matmul-tc.wgsl';
import type { TcTile, TensorCorePlan } from './matmul-tc';
import { operandReader } from './matmul';

/** Workgroup memory of a tile: its staged slices of A and B (rows padded by 8 halves, `nbuf` of each) and the
 *  f32 scratch. */
export function tcSharedBytes(t: TcTile, plan: TensorCorePlan, transA: boolean, transB: boolean): number {
  const a = tcSlice(t, 'a', transA);
  const b = tcSlice(t, 'b', transB);
  const staged = (t.nbuf ?? 2) * 2 * (a.size + b.size);
  const scratch = 4 * scratchSlots(t) * plan.frag.M * plan.frag.N;
  // `bv`: the scratch (and with `sd` the bands of the stores) lies over the staged slices (used only after the K loop)
  return t.bv ? Math.max(staged, scratch, t.sd ? 4 * t.sgm * t.sgn * sdBand(t, plan).size : 0) : staged + scratch;
}

/** `sd` tiles: one subgroup's band of result rows in workgroup memory, f32 [SM, WN] with rows padded by 4 (16
 *  bytes, against bank conflicts of the fragment stores): row stride and size in f32. */
export function sdBand(t: TcTile, plan: TensorCorePlan): { stride: number; size: number } {
  const stride = t.bn / t.sgn + 4;
  return { stride, size: plan.frag.M * stride };
}

/** The workgroup memory of a tile as WGSL: `As`, `Bs` and `Cs` arrays, or (`bv`) one `smem` buffer that the
 *  views of `views` read and write; `cs_get(i)` reads the scratch either way. */
function sharedDecls(t: TcTile, plan: TensorCorePlan, transA: boolean, transB: boolean): string {
  if (!t.bv)
    return (
      'var<workgroup> As: array<f16, NBUF * AS_SIZE>;\n' +
      'var<workgroup> Bs: array<f16, NBUF * BS_SIZE>;\n' +
      'var<workgroup> Cs: array<f32, CSLOTS * SM * SN>;\n' +
      'fn cs_get(i: u32) -> f32 { return Cs[i]; }\n'
    );
  return `var<workgroup> smem: buffer<${tcSharedBytes(t, plan, transA, transB)}>;\n` + `fn cs_get(i: u32) -> f32 { return ${views(t).cs}[i]; }\n`;
}

/** How the generated code reaches the staged slices and the scratch: `&As` / `&Bs` / `&Cs`, or (`bv`) views of
 *  `smem` (B's slices start after A's; the scratch starts at 0, over them). */
function views(t: TcTile): { a: string; b: string; cs: string } {
  if (!t.bv) return { a: '&As', b: '&Bs', cs: '&Cs' };
  return { a: 'bufferView<array<f16>>(&smem, 0u)', b: 'bufferView<array<f16>>(&smem, B_BYTE0)', cs: 'bufferView<array<f32>>(&smem, 0u)' };
}

/** Epilogue scratch tiles of a tile (`cs`, default one per subgroup). */
export function scratchSlots(t: TcTile): number {
  return t.cs ?? t.sgm * t.sgn;
}

/** A staged operand slice of a tile: [rows, cols] in halves, its padded row stride and size. */
export function tcSlice(t: TcTile, x: 'a' | 'b', trans: boolean): { stride: number; size: number; dims: [number, number] } {
  // A is staged [BM, BK] (or [BK, BM] when transposed), B [BK, BN] (or [BN, BK])
  const [rows, cols] = x === 'a' ? (trans ? [t.bk, t.bm] : [t.bm, t.bk]) : trans ? [t.bn, t.bk] : [t.bk, t.bn];
  return { stride: cols + 8, size: rows * (cols + 8), dims: [rows, cols] };
}

/** The kernel's flags (WGSL consts in the prelude). */
export interface TcFlags {
  VEC_A: boolean;
  VEC_B: boolean;
  HAS_BIAS: boolean;
  ACCUM: boolean;
  DIRECT: boolean;
  /** The product is also multiplied by the two f32 factors in binding `gs` (the f16x3 split's 1 / (sA sB)). */
  GSCALE: boolean;
  /** A split tail (`tcTail`): a linear grid whose last workgroups compute K chunks of the last tiles into binding
   *  `part` (see shaders/matmul-tc.wgsl). Optional: absent is false. */
  TAIL?: boolean;
}

const NO_FLAGS: TcFlags = { VEC_A: false, VEC_B: false, HAS_BIAS: false, ACCUM: false, DIRECT: false, GSCALE: false };

/** The WGSL prepended to `shaders/matmul-tc.wgsl` for a fragment, tile, layout and flags. */
export function tcPrelude(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS): string {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const a = tcSlice(t, 'a', transA);
  const b = tcSlice(t, 'b', transB);
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const vw = t.vw ?? 8;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  return (
    c('SM', SM) + c('SN', SN) + c('SK', SK) + c('SG', plan.subgroupSize) + c('SGM', t.sgm) + c('SGN', t.sgn) +
    c('FM', fm) + c('FN', fn) + c('BM', t.bm) + c('BN', t.bn) + c('BK', t.bk) + c('NBUF', t.nbuf ?? 2) + c('PF', t.pf ?? 1) + c('VW', vw) + c('CSLOTS', scratchSlots(t)) +
    c('AS_STRIDE', a.stride) + c('AS_SIZE', a.size) + c('BS_STRIDE', b.stride) + c('BS_SIZE', b.size) +
    `const A_T: bool = ${transA};\nconst B_T: bool = ${transB};\n` +
    Object.entries(flags).map(([k, v]) => `const ${k}: bool = ${v};\n`).join('') +
    (flags.GSCALE ? 'fn gscale() -> f32 { return bitcast<f32>(read_gs(512u)) * bitcast<f32>(read_gs(513u)); }\n' : 'fn gscale() -> f32 { return 1.0; }\n') +
    // subgroup_matrix_left<T, K, M> is M rows x K columns; right<T, N, K> is K x N; result<T, N, M> is M x N
    `alias Lm = subgroup_matrix_left<f16, ${SK}, ${SM}>;\n` +
    `alias Rm = subgroup_matrix_right<f16, ${SN}, ${SK}>;\n` +
    `alias Acc = subgroup_matrix_result<f32, ${SN}, ${SM}>;\n` +
    `alias CmT = subgroup_matrix_left<f16, ${SK}, ${SM}>;\n` +
    // a transposed operand is staged as stored, so op(A) = [M, K] reads it column-major (and op(B) likewise)
    `fn load_l(off: u32) -> Lm { return subgroupMatrixLoad<Lm, ${transA ? 'col_major' : 'row_major'}>(${views(t).a}, off, AS_STRIDE); }\n` +
    `fn load_r(off: u32) -> Rm { return subgroupMatrixLoad<Rm, ${transB ? 'col_major' : 'row_major'}>(${views(t).b}, off, BS_STRIDE); }\n` +
    (t.bv ? `const B_BYTE0: u32 = ${2 * (t.nbuf ?? 2) * a.size}u;\n` : '') +
    sharedDecls(t, plan, transA, transB) +
    operandCode('a', vw, !!t.cm, !!t.bv) +
    operandCode('b', vw, !!t.cm, !!t.bv)
  );
}

/**
 * The global-memory side of operand x: its storage view (`x4`: array<vec4u>, or `xh`: array<f16> for CM
 * variants, the only view of the binding the entry point uses), `at_x(e)` (one element as f32, from the format
 * table where the view is the vec4u one), `fetch_x(bo, mn0, k0, u) -> UV` (unit u of a slice, 0 out of range)
 * and `put_x(buf, u, w)` (a unit into workgroup memory).
 */
function operandCode(x: 'a' | 'b', vw: 2 | 8, cm: boolean, bv: boolean): string {
  const bind = x === 'a' ? 1 : 2;
  const X = x.toUpperCase();
  const ty = vw === 8 ? 'vec4u' : 'u32';
  let s = `alias UV_${x} = ${ty};\n`;
  let vec: string;
  if (cm) {
    s += `@group(0) @binding(${bind}) var<storage, read> ${x}h: array<f16>;\n`;
    s += `fn at_${x}(e: u32) -> f32 { return f32(${x}h[e]); }\n`;
    const w = (j: number) => `bitcast<u32>(vec2<f16>(${x}h[q.e + ${j}u], ${x}h[q.e + ${j + 1}u]))`;
    vec = vw === 8 ? `vec4u(${w(0)}, ${w(2)}, ${w(4)}, ${w(6)})` : w(0);
  } else {
    s += `@group(0) @binding(${bind}) var<storage, read> ${x}4: array<vec4u>;\n`;
    s += operandReader(x, 'f16');
    vec = vw === 8 ? `${x}4[q.e >> 3u]` : `${x}4[q.e >> 3u][(q.e >> 1u) & 3u]`;
  }
  const elem = vw === 8 ? `vec4u(pk_${x}(q, 0u), pk_${x}(q, 2u), pk_${x}(q, 4u), pk_${x}(q, 6u))` : `pk_${x}(q, 0u)`;
  s +=
    `fn fetch_${x}(bo: u32, mn0: u32, k0: u32, u: u32) -> UV_${x} {\n` +
    `  let q = unit_${x}(bo, mn0, k0, u);\n` +
    `  if (q.lim == 0u) { return UV_${x}(); }\n` +
    `  if (VEC_${X}) { return ${vec}; }\n` +
    `  return ${elem};\n}\n`;
  s += `fn put_${x}(buf: u32, u: u32, w: UV_${x}) { put_${x}_at(s${x}_off(buf, u), w); }\n`;
  // `bv`: the unit goes in with one store of its own width (o is a multiple of VW halves)
  if (bv) return s + `fn put_${x}_at(o: u32, w: UV_${x}) { bufferView<array<UV_${x}>>(&smem, ${x === 'a' ? '0u' : 'B_BYTE0'})[o >> ${vw === 8 ? 3 : 1}u] = w; }\n`;
  const words = vw === 8 ? ['w.x', 'w.y', 'w.z', 'w.w'] : ['w'];
  s +=
    `fn put_${x}_at(o: u32, w: UV_${x}) {\n` +
    words.map((wd, i) => `  let h${i} = bitcast<vec2<f16>>(${wd});\n  ${X}s[o + ${2 * i}u] = h${i}.x;\n  ${X}s[o + ${2 * i + 1}u] = h${i}.y;\n`).join('') +
    `}\n`;
  return s;
}

/** Names of the //@ lines of `shaders/matmul-tc.wgsl` that `tcMatrixCode` fills. */
export type TcHook = 'raster' | 'acc' | 'regs' | 'fetch0' | 'stash0' | 'fetch1' | 'fetch' | 'stash' | 'mma' | 'part' | 'direct' | 'scratch';

/**
 * The straight-line code of `shaders/matmul-tc.wgsl` at its //@ lines for a tile on a fragment and layout:
 * accumulators, staging registers and their fetch / stash code (units per thread, or subgroup-matrix blocks for
 * CM variants), the fragment loads and multiply-accumulates of every SK step of a slice, and the stores of C.
 * `unroll` false gives the reference array form of the accumulators (indexed in loops; measured slow).
 */
export function tcMatrixCode(t: TcTile, plan: TensorCorePlan, unroll: boolean, transA = false, transB = false, tail = false): Record<TcHook, string> {
  const { M: SM, N: SN, K: SK } = plan.frag;
  const wg = t.sgm * t.sgn * plan.subgroupSize;
  const nsg = t.sgm * t.sgn;
  const vw = t.vw ?? 8;
  const ks = [...Array(t.bk / SK).keys()];
  const units = (x: 'a' | 'b', trans: boolean) => {
    const [rows, cols] = tcSlice(t, x, trans).dims;
    return (rows * cols) / vw;
  };
  const blocks = (x: 'a' | 'b', trans: boolean) => {
    const [rows, cols] = tcSlice(t, x, trans).dims;
    return (rows / SM) * (cols / SK);
  };
  // staging: per-thread units (guarded where the last round is partial) ...
  const unitCode = (x: 'a' | 'b', trans: boolean, f: (l: number, u: string) => string) => {
    const n = units(x, trans);
    return [...Array(Math.ceil(n / wg)).keys()].map((l) => {
      const u = `${l * wg}u + lid`;
      return (l + 1) * wg > n ? `if (${u} < ${n}u) { ${f(l, u)} }` : f(l, u);
    });
  };
  // ... or per-subgroup blocks (CM variants)
  const blockCode = (x: 'a' | 'b', trans: boolean, f: (i: number, blk: string) => string) => {
    const n = blocks(x, trans);
    return [...Array(Math.ceil(n / nsg)).keys()].map((i) => {
      const blk = `sg + ${i * nsg}u`;
      return (i + 1) * nsg > n ? `if (${blk} < ${n}u) { ${f(i, blk)} }` : f(i, blk);
    });
  };
  const mn0 = { a: 'm0', b: 'n0' };
  const bo = { a: 'boa', b: 'bob' };
  // staging register sets: one, or two with `pf` 2 (set s holds the slices t with t % 2 == s)
  const sets = [...Array(t.pf ?? 1).keys()];
  const scalarFetch = (x: 'a' | 'b', trans: boolean, s: number) => unitCode(x, trans, (l, u) => `r${x}${s}_${l} = fetch_${x}(${bo[x]}, ${mn0[x]}, kn, ${u});`);
  const scalarStash = (x: 'a' | 'b', trans: boolean, s: number) => unitCode(x, trans, (l, u) => `put_${x}(sb, ${u}, r${x}${s}_${l});`);
  const regDecl = (x: 'a' | 'b', trans: boolean, s: number) => unitCode(x, trans, (l) => `var r${x}${s}_${l}: UV_${x};`).map((c) => c.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
  let regs = sets.flatMap((s) => [...regDecl('a', transA, s), ...regDecl('b', transB, s)]);
  let fetchSet = (s: number) => [...scalarFetch('a', transA, s), ...scalarFetch('b', transB, s)];
  let stashSet = (s: number) => [...scalarStash('a', transA, s), ...scalarStash('b', transB, s)];
  if (t.hoist) {
    // per unit: its global offset at K = 0 in load units (ga_/gb_) and its workgroup offset (oa_/ob_); a K step
    // adds kn (or kn rows of the operand's stride when K runs along rows) to every global offset
    const ks = { a: transA ? 'p.lda' : '1u', b: transB ? '1u' : 'p.ldb' };
    const hoistDecl = (x: 'a' | 'b', trans: boolean) => {
      const [, cols] = tcSlice(t, x, trans).dims;
      const upr = cols / vw;
      const rows = wg / upr; // rows between a thread's consecutive units
      const X = x.toUpperCase();
      return unitCode(x, trans, (l, u) =>
        t.derive && wg % upr === 0 && l > 0
          ? `let g${x}_${l} = g${x}_0 + ${l * rows}u * ${vw === 8 ? `(p.ld${x} >> 3u)` : `p.ld${x}`}; let o${x}_${l} = o${x}_0 + ${l * rows}u * ${X}S_STRIDE;`
          : `let q${x}_${l} = unit_${x}(${bo[x]}, ${mn0[x]}, 0u, ${u}); let g${x}_${l} = q${x}_${l}.e >> 3u; let o${x}_${l} = s${x}_off(0u, ${u});`,
      ).map((c) => c.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
    };
    const fastFetch = (x: 'a' | 'b', trans: boolean, s: number) =>
      unitCode(x, trans, (l) =>
        vw === 8
          ? `r${x}${s}_${l} = ${x}4[g${x}_${l} + dk${x}];`
          : `r${x}${s}_${l} = ${x}4[(g${x}_${l} + dk${x}) >> 3u][((g${x}_${l} + dk${x}) >> 1u) & 3u];`,
      );
    const fastStash = (x: 'a' | 'b', trans: boolean, s: number) => unitCode(x, trans, (l) => `put_${x}_at(sb * ${x.toUpperCase()}S_SIZE + o${x}_${l}, r${x}${s}_${l});`);
    regs = [
      ...regs,
      ...hoistDecl('a', transA),
      ...hoistDecl('b', transB),
      ...sets.map((s) => `var fast${s} = false;`),
    ];
    // vw 8: offsets in vec4u units (e >> 3); vw 2: element offsets (e), the word picked from the vec4u
    if (vw === 2) regs = regs.map((r) => r.replace(/(let g[ab]_\d+ = q[ab]_\d+\.e) >> 3u;/, '$1;'));
    const dk = (x: 'a' | 'b') => (vw === 8 ? `let dk${x} = (kn * ${ks[x]}) >> 3u;` : `let dk${x} = kn * ${ks[x]};`);
    const slowFetch = fetchSet;
    const slowStash = stashSet;
    fetchSet = (s) => [
      `fast${s} = VEC_A && VEC_B && m0 + BM <= p.M && n0 + BN <= p.N && kn + BK <= p.K;`,
      `if (fast${s}) {\n  ${[dk('a'), dk('b'), ...fastFetch('a', transA, s), ...fastFetch('b', transB, s)].join('\n  ')}\n} else {\n  ${slowFetch(s).join('\n  ')}\n}`,
    ];
    stashSet = (s) => [`if (fast${s}) {\n  ${[...fastStash('a', transA, s), ...fastStash('b', transB, s)].join('\n  ')}\n} else {\n  ${slowStash(s).join('\n  ')}\n}`];
  }
  if (t.cm) {
    const cmDecl = (x: 'a' | 'b', trans: boolean) => blockCode(x, trans, (i) => `var c${x}_${i}: CmT;`).map((s) => s.replace(/^if \([^)]*\) \{ (.*) \}$/, '$1'));
    const cmFetch = (x: 'a' | 'b', trans: boolean) =>
      blockCode(x, trans, (i, blk) => `c${x}_${i} = subgroupMatrixLoad<CmT, row_major>(&${x}h, cm_${x}(${bo[x]}, ${mn0[x]}, kn, ${blk}), p.ld${x});`);
    const cmStash = (x: 'a' | 'b', trans: boolean) =>
      blockCode(x, trans, (i, blk) => `subgroupMatrixStore<row_major>(&${x.toUpperCase()}s, cms_${x}(sb, ${blk}), c${x}_${i}, ${x.toUpperCase()}S_STRIDE);`);
    regs = [...regs, ...cmDecl('a', transA), ...cmDecl('b', transB), 'var inb = false;'];
    const slowFetch = fetchSet;
    const slowStash = stashSet;
    fetchSet = (s) => [
      'inb = m0 + BM <= p.M && n0 + BN <= p.N && kn + BK <= p.K;',
      `if (inb) {\n  ${[...cmFetch('a', transA), ...cmFetch('b', transB)].join('\n  ')}\n} else {\n  ${slowFetch(s).join('\n  ')}\n}`,
    ];
    stashSet = (s) => [`if (inb) {\n  ${[...cmStash('a', transA), ...cmStash('b', transB)].join('\n  ')}\n} else {\n  ${slowStash(s).join('\n  ')}\n}`];
  }
  // the workgroup's tile: row by row, or in groups of gm tile rows; with a split tail, from the linear workgroup
  // index (whole tiles first, then the chunks of the tail tiles)
  const raster = tail
    ? [
        'let ntx = (p.N + BN - 1u) / BN;',
        'let nxy = ntx * ((p.M + BM - 1u) / BM);',
        'let gid = wg.y * nwg.x + wg.x;',
        'if (gid >= p.full + p.tiles * p.chunks) { return; }',
        'var tile = gid;',
        'var kb = 0u;',
        'var ke = p.K;',
        'var rec = 0xffffffffu;',
        'if (gid >= p.full) {',
        '  rec = gid - p.full;',
        '  tile = p.full + rec / p.chunks;',
        '  kb = (rec % p.chunks) * p.slices * BK;',
        '  ke = min(p.K, kb + p.slices * BK);',
        '}',
        'let bz = tile / nxy;',
        'let m0 = ((tile % nxy) / ntx) * BM;',
        'let n0 = ((tile % nxy) % ntx) * BN;',
      ].join('\n')
    : (t.gm
    ? [
        'let gid = wg.y * nwg.x + wg.x;',
        `let per = ${t.gm}u * nwg.x;`,
        `let g0 = (gid / per) * ${t.gm}u;`,
        `let gs = min(nwg.y - g0, ${t.gm}u);`,
        'let m0 = (g0 + (gid % per) % gs) * BM;',
        'let n0 = ((gid % per) / gs) * BN;',
      ].join('\n')
    : 'let m0 = wg.y * BM;\nlet n0 = wg.x * BN;') + '\nlet bz = wg.z;\nlet kb = 0u;\nlet ke = p.K;';
  // with two sets, slice t + 2 is fetched into set t % 2 while slice t + 1 is stashed from the other one (`par`
  // is t % 2; the branches are uniform across the workgroup)
  const code = (c: string[]) => c.join('\n');
  const bySet = (f: (s: number) => string[], flip: boolean) =>
    sets.length === 1 ? code(f(0)) : `if (par == 0u) {\n  ${code(f(flip ? 1 : 0)).replace(/\n/g, '\n  ')}\n} else {\n  ${code(f(flip ? 0 : 1)).replace(/\n/g, '\n  ')}\n}`;
  const staging = {
    raster,
    regs: code(regs),
    fetch0: code(fetchSet(0)),
    stash0: code(stashSet(0)),
    fetch1: sets.length === 2 ? code(fetchSet(1)) : '',
    fetch: bySet(fetchSet, false),
    stash: bySet(stashSet, true),
  };
  if (t.ablate === 'nostage') Object.assign(staging, { fetch1: '', fetch: '', stash: '' });
  if (!unroll) {
    const mma = `for (var kk = 0u; kk < BK; kk += SK) {
      var lf: array<Lm, FM>;
      var rf: array<Rm, FN>;
      for (var i = 0u; i < FM; i++) { lf[i] = load_l(ab + a_off(wm0 + i * SM, kk)); }
      for (var j = 0u; j < FN; j++) { rf[j] = load_r(bb + b_off(kk, wn0 + j * SN)); }
      for (var i = 0u; i < FM; i++) {
        for (var j = 0u; j < FN; j++) {
          acc[i * FN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf[j], acc[i * FN + j]);
        }
      }
    }`;
    return {
      ...staging,
      acc: 'var acc: array<Acc, FM * FN>;',
      mma: t.ablate === 'nomma' ? '' : mma,
      part: partStores(tail, ['for (var i = 0u; i < FM; i++) {', '  for (var j = 0u; j < FN; j++) {', '    subgroupMatrixStore<row_major>(&part, pb + (wm0 + i * SM) * BN + wn0 + j * SN, acc[i * FN + j], BN);', '  }', '}']),
      direct: noStore(t, `for (var i = 0u; i < FM; i++) {
      for (var j = 0u; j < FN; j++) {
        let o = cb + (m0 + wm0 + i * SM) * p.N + n0 + wn0 + j * SN;
        subgroupMatrixStore<row_major>(&c, o, acc[i * FN + j], p.N);
      }
    }`),
      scratch: `for (var i = 0u; i < FM; i++) {
    for (var j = 0u; j < FN; j++) {
      for (var round = 0u; round < NSG / CSLOTS; round++) {
        if (sg / CSLOTS == round) { subgroupMatrixStore<row_major>(${views(t).cs}, cs, acc[i * FN + j], SN); }
        workgroupBarrier();
        if (sg / CSLOTS == round) { copy_out(i, j, cs, lane, m0, n0, wm0, wn0, cb); }
        workgroupBarrier();
      }
    }
  }`,
    };
  }
  const fm = t.bm / t.sgm / SM;
  const fn = t.bn / t.sgn / SN;
  const I = [...Array(fm).keys()];
  const J = [...Array(fn).keys()];
  const IJ = I.flatMap((i) => J.map((j) => [i, j] as const));
  const mac = (k: number, i: number, j: number) => `acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l${k}_${i}, r${k}_${j}, acc_${i}_${j});`;
  const loadR = (k: number, j: number) => `let r${k}_${j} = load_r(bb + b_off(${k * SK}u, wn0 + ${j * SN}u));`;
  const mma = ks.flatMap((k) => [
    ...I.map((i) => `let l${k}_${i} = load_l(ab + a_off(wm0 + ${i * SM}u, ${k * SK}u));`),
    ...(t.ilv
      ? J.flatMap((j) => [loadR(k, j), ...I.map((i) => mac(k, i, j))])
      : [...J.map((j) => loadR(k, j)), ...IJ.map(([i, j]) => mac(k, i, j))]),
  ]);
  return {
    ...staging,
    acc: IJ.map(([i, j]) => `var acc_${i}_${j}: Acc;`).join('\n'),
    mma: t.ablate === 'nomma' ? '' : mma.join('\n'),
    part: partStores(tail, IJ.map(([i, j]) => `subgroupMatrixStore<row_major>(&part, pb + (wm0 + ${i * SM}u) * BN + wn0 + ${j * SN}u, acc_${i}_${j}, BN);`)),
    direct: noStore(t, t.sd ? bandStores(t, plan, I, J) : IJ.map(([i, j]) => `subgroupMatrixStore<row_major>(&c, cb + (m0 + wm0 + ${i * SM}u) * p.N + n0 + wn0 + ${j * SN}u, acc_${i}_${j}, p.N);`).join('\n')),
    // subgroups sg with sg / CSLOTS == round use the scratch in that round (`sde`: the bands, with the epilogue)
    scratch: t.sd && t.sde ? bandStores(t, plan, I, J, true) : IJ.map(
      ([i, j]) =>
        `for (var round = 0u; round < NSG / CSLOTS; round++) {\n` +
        `  if (sg / CSLOTS == round) { subgroupMatrixStore<row_major>(${views(t).cs}, cs, acc_${i}_${j}, SN); }\n  workgroupBarrier();\n` +
        `  if (sg / CSLOTS == round) { copy_out(${i}u, ${j}u, cs, lane, m0, n0, wm0, wn0, cb); }\n  workgroupBarrier();\n}`,
    ).join('\n'),
  };
}

/**
 * `sd`: the stores of a tile through workgroup memory. For each row band i of the subgroup's WM x WN block: its FN
 * result matrices into the subgroup's own band (f32 [SM, WN], see {@link sdBand}), a barrier, then the lanes copy
 * the band to C along its rows (consecutive lanes, consecutive columns: whole lines per store), and a barrier
 * before the next band is stored over it. The K loop ends on a barrier, so the slices are done with. `epilogue`:
 * for any tile (the scratch path), with C's bounds, alpha, the f16x3 factors, bias and accumulate, as copy_out.
 */
function bandStores(t: TcTile, plan: TensorCorePlan, I: number[], J: number[], epilogue = false): string {
  const { M: SM, N: SN } = plan.frag;
  const { stride, size } = sdBand(t, plan);
  const wn = t.bn / t.sgn;
  const v = views(t).cs;
  const copy = (i: number) => {
    const m = `m0 + wm0 + ${i * SM}u + q / ${wn}u`;
    const n = `n0 + wn0 + q % ${wn}u`;
    const x = `${v}[db + (q / ${wn}u) * ${stride}u + q % ${wn}u]`;
    if (!epilogue) return `for (var q = lane; q < ${SM * wn}u; q += SG) { c[cb + (${m}) * p.N + ${n}] = ${x}; }`;
    return (
      `for (var q = lane; q < ${SM * wn}u; q += SG) {\n` +
      `  let m = ${m};\n  let n = ${n};\n` +
      `  if (m < p.M && n < p.N) {\n` +
      `    let ci = cb + m * p.N + n;\n    var y = p.alpha * gscale() * ${x};\n` +
      `    if (HAS_BIAS) { y += read_bias(n); }\n    if (ACCUM) { y += c[ci]; }\n    c[ci] = y;\n  }\n}`
    );
  };
  return [
    `let db = sg * ${size}u;`,
    ...I.flatMap((i) => [
      ...(i > 0 ? ['workgroupBarrier();'] : []),
      ...J.map((j) => `subgroupMatrixStore<row_major>(${v}, db + ${j * SN}u, acc_${i}_${j}, ${stride}u);`),
      'workgroupBarrier();',
      copy(i),
    ]),
  ].join('\n');
}

/** A split tail's chunk workgroups (`rec` set by the raster) store their raw accumulators to their record of
 *  `part` ([BM, BN], rows past C's edge included) and are done; other workgroups go on to the stores of C. */
function partStores(tail: boolean, stores: string[]): string {
  if (!tail) return '';
  return ['if (rec != 0xffffffffu) {', '  let pb = rec * BM * BN;', ...stores.map((l) => `  ${l}`), '  return;', '}'].join('\n');
}

/** The stores of full tiles, or for the `nostore` ablation the same stores behind `p.one == 7` (p.one is always
 *  1): the compiler cannot drop the product, and nothing is written. */
function noStore(t: TcTile, code: string): string {
  return t.ablate === 'nostore' ? `if (p.one == 7u) {\n  ${code.replace(/\n/g, '\n  ')}\n}` : code;
}

/** The whole WGSL of a tensor-core kernel: the prelude and `shaders/matmul-tc.wgsl` with its generated code. */
export function tcSource(plan: TensorCorePlan, t: TcTile, transA: boolean, transB: boolean, flags: TcFlags = NO_FLAGS, unroll = false): string {
  const m = tcMatrixCode(t, plan, unroll, transA, transB, !!flags.TAIL);
  const body = tcWgsl.replace(/^(\s*)\/\/@(\w+)$/gm, (_, ind: string, k: TcHook) => {
    if (!(k in m)) throw new Error(`matmul-tc.wgsl: unknown hook //@${k}`);
    return m[k]
      .split('\n')
      .map((l) => ind + l)
      .join('\n');
  });
  return tcPrelude(plan, t, transA, transB, flags) + body;
}
