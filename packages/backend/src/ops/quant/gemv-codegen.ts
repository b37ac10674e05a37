/**
 * The WGSL of the subgroup GEMV (see gemv.ts): the consts, scale and x readers of a kernel shape (`GemvShape`) and
 * the code written at the //@ lines of `shaders/dequant-gemv-sg.wgsl` (the chunk walk, its loads, the unrolled or
 * rolled dequantize-and-dot, the reductions), for one weight or several (`parts`, gemv-parts.ts).
 */
import gemvWgsl from '../../../../../shaders/dequant-gemv-sg.wgsl';
import { ACTIVATIONS } from '../llm/gated';
import { formatOf } from '../../format';
import { FMT_ID } from './formats';
import type { FloatW } from './gemv';

/** Generated WGSL of one kernel variant (exported for tests that inspect it). */
export function gemvSource(o: GemvShape): string {
  const { CW, epw } = o;
  const CE = CW * epw;
  const floatW = typeof o.fmt === 'string';
  const MR = o.MR;
  const c = (n: string, v: number) => `const ${n}: u32 = ${v}u;\n`;
  let pre =
    c('MR', MR) + c('R', o.R) + c('WG', o.WG) + c('NSG', o.NSG) + c('CW', CW) + c('CE', CE) +
    `const HAS_BIAS: bool = ${o.hasBias};\nconst FLOAT_W: bool = ${floatW};\n` +
    `fn deq_f2(w: u32) -> vec2f { return ${!floatW ? 'vec2f(0.0)' : o.fmt === 'f32' ? 'vec2f(bitcast<f32>(w), 0.0)' : formatOf(o.fmt as string).wgsl.unpack('w')}; }\n`;
  // block scales: f16 ones through the hardware conversion (exact), f32 ones as stored
  const probe = (p: 'no-x' | 'no-deq' | 'no-scale') => o.probe === p || o.probe === 'w-only';
  const P = o.parts ?? 1;
  if (P > 1) pre += partsPrelude(o, probe('no-scale'));
  else if (!floatW && probe('no-scale')) pre += 'fn scale_at(i: u32) -> f32 { return 1.0; }\n';
  else if (o.dq) pre += `fn scale_at(i: u32) -> f32 { return ${dqScale('s', 'absmax2', 'offset')}; }\n`;
  else if (!floatW) pre += o.f16Scales ? 'fn scale_at(i: u32) -> f32 { return unpack2x16float(s[i >> 1u])[i & 1u]; }\n' : 'fn scale_at(i: u32) -> f32 { return read_s(i); }\n';
  // one x element (x4 and x cannot both be used by one entry point); gated: x is act(gate) * up, gate on x's
  // binding and up on `xu` (binding o.gated.binding), act from shaders/act-*.wgsl on V = vec4f
  const gated = o.gated;
  if (gated) pre += `alias V = vec4f;\n${ACTIVATIONS[gated.act]}\n`;
  if (o.xLimbs)
    pre +=
      '@group(0) @binding(1) var<storage, read> xl4: array<vec4u>;\nfn xw(i: u32) -> u32 { return xl4[i >> 2u][i & 3u]; }\n' +
      // element i decoded (the partial last chunk; x-limbs.ts has the layout)
      'fn xb(w: u32, k: u32) -> i32 { return bitcast<i32>(w << (24u - 8u * k)) >> 24u; }\n' +
      'fn xe(i: u32) -> f32 { let g = i >> 4u; let e = i & 15u; let o = 12u * g + 6u * (e >> 3u) + (e & 1u); let k = (e & 7u) >> 1u;\n' +
      '  return f32(xb(xw(o), k) * 65536i + xb(xw(o + 2u), k) * 256i + xb(xw(o + 4u), k)) * bitcast<f32>(xw(3u * p.K / 4u + g)); }\n';
  else if (o.xVec && gated)
    pre +=
      `@group(0) @binding(1) var<storage, read> x4: array<vec4f>;\n@group(0) @binding(${gated.binding}) var<storage, read> xu4: array<vec4f>;\n` +
      'fn xv4(j: u32) -> vec4f { return act(x4[j]) * xu4[j]; }\nfn xe(i: u32) -> f32 { return xv4(i >> 2u)[i & 3u]; }\n';
  else if (o.xVec) pre += '@group(0) @binding(1) var<storage, read> x4: array<vec4f>;\nfn xe(i: u32) -> f32 { return x4[i >> 2u][i & 3u]; }\n';
  else if (gated) pre += 'fn xe(i: u32) -> f32 { return act(V(read_x(i))).x * read_xu(i); }\n';
  else pre += 'fn xe(i: u32) -> f32 { return read_x(i); }\n';
  if (CW > 1 && P === 1) pre += `@group(0) @binding(2) var<storage, read> q${CW}: array<vec${CW}u>;\n`;
  // the chunk's element groups: [first element, size, WGSL of the unscaled values of row r]
  const groups: Group[] = [];
  const word = (r: number, j: number) => (CW > 1 ? `w_${r}[${j}]` : `w_${r}`);
  if (floatW && epw === 1) groups.push([0, CW, (r) => `bitcast<vec${CW}f>(w_${r})`]); // f32: CW 2 or 4
  else if (floatW) {
    if (CW > 1) for (let j = 0; j < CW; j += 2) groups.push([j * 2, 4, (r) => `vec4f(deq_f2(${word(r, j)}), deq_f2(${word(r, j + 1)}))`]);
    else groups.push([0, 2, (r) => `deq_f2(${word(r, 0)})`]);
  } else {
    const mask = o.decode === 'mask';
    for (let j = 0; j < CW; j++) {
      if (epw === 4) groups.push([j * 4, 4, (r) => (mask ? `deq_i8m(${word(r, j)})` : `deq_i8(${word(r, j)})`)]);
      else if (mask && o.fmt === FMT_ID.int4) {
        groups.push([j * 8, 4, (r) => `deq_i4m(${word(r, j)})`]);
        groups.push([j * 8 + 4, 4, (r) => `deq_i4m(${word(r, j)} >> 16u)`]);
      } else {
        const f = o.fmt === FMT_ID.nf4 ? 'deq_nf4' : 'deq_i4';
        groups.push([j * 8, 4, (r) => `${f}(${word(r, j)}, SH_LO)`]);
        groups.push([j * 8 + 4, 4, (r) => `${f}(${word(r, j)}, SH_HI)`]);
      }
    }
  }
  // the probe keeps every word in use (each group bit-casts its own word)
  if (probe('no-deq')) for (const gr of groups) gr[2] = (r: number) => `bitcast<vec${gr[1]}f>(vec${gr[1]}u(${word(r, Math.floor(gr[0] / epw))}))`;
  const xg: XLoad = (m, e0, g) => {
    if (probe('no-x')) return `vec${g}f(1.0)`;
    const b = `${typeof m === 'number' ? `${m}u` : m} * p.K + k0 + ${e0}u`;
    if (o.xVec && g === 4) return o.gated ? `xv4((${b}) >> 2u)` : `x4[(${b}) >> 2u]`;
    return `vec${g}f(${[...Array(g).keys()].map((i) => `xe(${b} + ${i}u)`).join(', ')})`;
  };
  const hasScale = !floatW;
  const parts: Record<string, string> = o.unroll ? unrolledCode(o, groups, xg, hasScale) : rolledCode(o, groups, xg, hasScale);
  if (o.xLimbs) parts.fast = limbsCode(o);
  pre += `const SG: u32 = ${o.sgRows ?? 1}u;\n`; // main_rows: the subgroup size
  let body = gemvWgsl;
  if (P > 1) {
    // each workgroup (main) or subgroup (main_rows) takes R rows of one part: its part pj, its first row n0 in it,
    // the part's rows nEnd and its block of y at yb; the walk once per part, on that part's bindings
    const unit = (u: string) => `let u = ${u}; let pj = part_of(u); let n0 = (u - unit0(pj)) * R; let nEnd = rows_of(pj); let yb = yo_of(pj);`;
    body = body
      .replace('let n0 = (wg.x + wg.y * p.gx) * R;', unit('wg.x + wg.y * p.gx'))
      .replace('let n0 = ((wg.x + wg.y * p.gx) * (WG / SG) + sid) * R;', unit('(wg.x + wg.y * p.gx) * (WG / SG) + sid'))
      .replace('if (n < p.N) {', 'if (n < nEnd) {')
      .replace('y[(o % MR) * p.N + n]', 'y[yb + (o % MR) * nEnd + n]')
      .replace('read_bias(n)', 'bias_at(pj, n)');
    const walks = [...Array(P).keys()].map((j) => {
      const lc = loadCode(o.R, CW, !floatW, o.G, o.prefetch, j);
      return `if (pj == ${j}u) {\n${WALK.replace(/^(\s*)\/\/@pre$/m, (_, i: string) => i + lc.pre).replace(/^(\s*)\/\/@load$/m, (_, i: string) => i + lc.load)}\n  }`;
    });
    body = body.replace(/^\s*\/\/@walk$/gm, '  ' + walks.join(' else '));
  }
  return pre + body.replace(/^\s*\/\/@walk$/gm, WALK).replace(/^(\s*)\/\/@(acc|pre|load|fast|tail|reduce|rows_out)$/gm, (_, ind: string, k: string) => ind + parts[k]);
}

/** The //@walk line of both entry points: a thread's walk over its chunks c0, c0 + cstep, ... of the R rows, each
 *  a whole chunk (//@fast) or the row's partial last one (//@tail), with the generated //@pre and //@load code. */
const WALK = `  //@pre
  for (var c = c0; c < p.nc; c += cstep) {
    let k0 = c * CE;
    //@load
    if (k0 + CE <= p.K) {
      //@fast
    } else {
      for (var e = 0u; e < CE; e++) {
        let k = k0 + e;
        if (k < p.K) {
          //@tail
        }
      }
    }
  }`;

type Group = [number, number, (r: number) => string];
type XLoad = (m: number | string, e0: number, g: number) => string;

/** Element (m, n) of y: row-major [M, N], or with parts, of the part's block [M, nEnd] at yb (see partsPrelude). */
const yAt = (o: GemvShape, m: string, n: string) => ((o.parts ?? 1) > 1 ? `y[yb + ${m} * nEnd + ${n}]` : `y[${m} * p.N + ${n}]`);
const biasAt = (o: GemvShape, n: string) => ((o.parts ?? 1) > 1 ? `bias_at(pj, ${n})` : `read_bias(${n})`);
/** The rows of W: all of them, or with parts, the part's. */
const rowsEnd = (o: GemvShape) => ((o.parts ?? 1) > 1 ? 'nEnd' : 'p.N');

/**
 * WGSL of a GEMV over several weights at once (`GemvShape.parts`, `gemvParts`): the grid's units (workgroups
 * of `main`, subgroups of `main_rows`), R rows of W each, are those of each part in turn: part j has
 * ceil(N_j / R) units from unit U_j (params U1, U2; U_0 = 0), N_j rows (params N, N1, N2) and its result block
 * [M, N_j] in y at element yo_j (params yo1, yo2; yo_0 = 0). A unit's part is uniform, so the walk over its rows
 * (generated once per part, on that part's bindings `q_j` / `q<CW>_j`, `scale_at_j`) has no per-load choice.
 */
function partsPrelude(o: GemvShape, noScale: boolean): string {
  const P = o.parts!;
  const floatW = typeof o.fmt === 'string';
  const b = partBindings(P, !floatW, o.hasBias, o.dq);
  const js = [...Array(P).keys()];
  const by = (vals: string[]) => (P === 2 ? `select(${vals[1]}, ${vals[0]}, j == 0u)` : `select(select(${vals[2]}, ${vals[1]}, j == 1u), ${vals[0]}, j == 0u)`);
  let s = P === 2 ? 'fn part_of(u: u32) -> u32 { return select(1u, 0u, u < p.U1); }\n' : 'fn part_of(u: u32) -> u32 { return select(select(2u, 1u, u < p.U2), 0u, u < p.U1); }\n';
  s += `fn unit0(j: u32) -> u32 { return ${by(['0u', 'p.U1', 'p.U2'])}; }\n`;
  s += `fn rows_of(j: u32) -> u32 { return ${by(['p.N', 'p.N1', 'p.N2'])}; }\n`;
  s += `fn yo_of(j: u32) -> u32 { return ${by(['0u', 'p.yo1', 'p.yo2'])}; }\n`;
  if (o.CW > 1) for (const j of js) s += `@group(0) @binding(${b.q[j]}) var<storage, read> q${o.CW}_${j}: array<vec${o.CW}u>;\n`;
  if (!floatW)
    for (const j of js)
      s += noScale
        ? `fn scale_at_${j}(i: u32) -> f32 { return 1.0; }\n`
        : `fn scale_at_${j}(i: u32) -> f32 { return ${o.dq ? dqScale(`s${j}`, `absmax2_${j}`, `offset_${j}`) : o.f16Scales ? `unpack2x16float(s${j}[i >> 1u])[i & 1u]` : `read_s${j}(i)`}; }\n`;
  const bias = js.map((j) => (j < P - 1 ? `if (j == ${j}u) { return read_b${j}(n); }` : `return read_b${j}(n);`)).join(' ');
  s += `fn bias_at(j: u32, n: u32) -> f32 { ${o.hasBias ? bias : 'return 0.0;'} }\n`;
  return s;
}

/** Scale i of double-quantized codes (NF4 + dq, layout in formats.ts): DYN_MAP[code] * absmax2[i / 256] + offset,
 *  what `shaders/dequant-dq-scales.wgsl` writes out, read where the GEMV needs it. */
export const dqScale = (codes: string, absmax2: string, offset: string) =>
  `DYN_MAP[(${codes}[i >> 2u] >> (8u * (i & 3u))) & 0xffu] * read_${absmax2}(i >> 8u) + read_${offset}(0u)`;

/** Binding numbers of a parts GEMV: x 1, then each part's words and scales (and double-quantization state), then
 *  the biases, then y. */
export function partBindings(P: number, quant: boolean, hasBias: boolean, dq = false): { q: number[]; s: number[]; b: number[]; y: number } {
  const per = quant ? (dq ? 4 : 2) : 1;
  const q = [...Array(P).keys()].map((j) => 2 + per * j);
  const s = quant ? q.map((v) => v + 1) : [];
  const b = hasBias ? [...Array(P).keys()].map((j) => 2 + per * P + j) : [];
  return { q, s, b, y: 2 + per * P + b.length };
}

/** The //@pre and //@load lines: each row's chunk words (and scale); with `prefetch`, those of the thread's first
 *  chunk before the loop, and in the loop those of its next chunk (c + cstep, clamped to the row's last) loaded
 *  while this one is computed. */
function loadCode(R: number, CW: number, hasScale: boolean, G = 0, prefetch = false, part?: number): { pre: string; load: string } {
  const sfx = part === undefined ? '' : `_${part}`;
  const word = (r: number, c: string) => `${CW > 1 ? `q${CW}${sfx}` : part === undefined ? 'q' : `q${part}`}[row_${r} * p.nc + ${c}]`;
  // the block of chunk c: a shift where the block size is a constant power of two (no run-time division)
  const blk = (c: string) => (G ? `(${c}) * CE / ${G}u` : '0u');
  const scale = (r: number, c: string) => `scale_at${sfx}(row_${r} * p.nb${G ? ` + ${blk(c)}` : ''})`;
  const rs = [...Array(R).keys()];
  const row = (r: number) => `let row_${r} = min(n0 + ${r}u, ${part === undefined ? 'p.N' : 'nEnd'} - 1u);`;
  if (!prefetch)
    return {
      pre: '',
      load: rs.map((r) => [row(r), `let w_${r} = ${word(r, 'c')};`, hasScale ? `let s_${r} = ${scale(r, 'c')};` : ''].filter(Boolean).join(' ')).join('\n    '),
    };
  const first = 'min(c0, p.nc - 1u)';
  const next = 'min(c + cstep, p.nc - 1u)';
  const pre = rs.map((r) => [row(r), `var pw_${r} = ${word(r, first)};`, hasScale ? (G ? `var ps_${r} = ${scale(r, first)};` : `let s_${r} = ${scale(r, 'c0')};`) : ''].filter(Boolean).join(' '));
  const load = rs.map((r) => [`let w_${r} = pw_${r}; pw_${r} = ${word(r, next)};`, hasScale && G ? `let s_${r} = ps_${r}; ps_${r} = ${scale(r, next)};` : ''].filter(Boolean).join(' '));
  return { pre: pre.join('\n  '), load: load.join('\n    ') };
}

/**
 * The //@fast code of the integer int4 GEMV (`xLimbs`: one row of X as int8 limbs, ops/quant/x-limbs.ts): the
 * codes u of each word are multiplied by X's limbs with `dot4I8Packed`, as bytes of two words (the even elements,
 * high nibbles, and the odd ones), and per group of 16 elements (two words) and row the three limb sums
 * (sa 2^8 + sb) 2^8 + sc are combined and scaled by the row's block scale times the group's step. Two ways to the
 * codes' offset 8 (`gemvTuning.limbsDecode`): `offset`, the codes as they are (0..15: an AND, and a shift for the
 * high nibbles) and 8 (q_0 + ... + q_15), stored with the limbs, subtracted from the combined sum, all in i32
 * (exact); `signed`, each word turned into signed bytes 16 (u - 8) (XOR 0x88, AND 0xF0; the low nibbles shifted up
 * first), combined in f32 and scaled by 1/16.
 */
function limbsCode(o: GemvShape): string {
  if (o.MR !== 1 || o.fmt !== FMT_ID.int4 || o.CW % 2 || o.gated) throw new Error('gemv xLimbs: one row of X, int4 weights, chunks of 2 or 4 words');
  const { R, CW } = o;
  const signed = o.xLimbs === 'signed';
  const acc = (r: number) => (o.unroll ? `a_${r}_0` : `a[${r}u]`);
  const word = (r: number, j: number) => `w_${r}[${j}]`;
  const lw = (i: number) => `L${i >> 2}[${i & 3}]`;
  const nv = (6 * CW) / 4;
  const out = ['let lb = (k0 * 3u / 4u) >> 2u;', ...[...Array(nv).keys()].map((v) => `let L${v} = xl4[lb + ${v}u];`)];
  for (let g = 0; g < CW / 2; g++) {
    out.push(`let xs_${g} = bitcast<f32>(xw(3u * p.K / 4u + k0 / 16u + ${g}u))${signed ? ' * 0.0625' : ''};`);
    if (!signed) out.push(`let xq_${g} = bitcast<i32>(xw(3u * p.K / 4u + p.K / 16u + k0 / 16u + ${g}u));`);
  }
  for (let r = 0; r < R; r++) {
    for (let j = 0; j < CW; j++)
      out.push(
        signed
          ? `let h_${r}_${j} = (${word(r, j)} ^ 0x88888888u) & 0xF0F0F0F0u; let l_${r}_${j} = ((${word(r, j)} << 4u) ^ 0x88888888u) & 0xF0F0F0F0u;`
          : `let h_${r}_${j} = (${word(r, j)} >> 4u) & 0x0F0F0F0Fu; let l_${r}_${j} = ${word(r, j)} & 0x0F0F0F0Fu;`,
      );
    for (let g = 0; g < CW / 2; g++) {
      const sum = (limb: number) =>
        [2 * g, 2 * g + 1].map((j) => `dot4I8Packed(h_${r}_${j}, ${lw(6 * j + 2 * limb)}) + dot4I8Packed(l_${r}_${j}, ${lw(6 * j + 2 * limb + 1)})`).join(' + ');
      out.push(`{ let sa = ${sum(0)}; let sb = ${sum(1)}; let sc = ${sum(2)};`);
      // offset: the group's sum in i32, exact (sa 2^16 + ... wraps past 2^31 at most transiently; the result,
      // sum (u - 8) q, is below 2^30); signed: the limb sums reach 2^18, so they are combined in f32
      const comb = signed ? 'f32(sa * 256i + sb) * 256.0 + f32(sc)' : `f32((sa * 256i + sb) * 256i + sc - xq_${g})`;
      out.push(`  ${acc(r)} = fma(${comb}, s_${r} * xs_${g}, ${acc(r)}); }`);
    }
  }
  return out.join('\n      ');
}

/** Every accumulator a named variable, every row and row of X written out (GPUs). */
function unrolledCode(o: GemvShape, groups: Group[], xg: XLoad, hasScale: boolean): Record<string, string> {
  const { MR, R, CW, epw } = o;
  const rs = [...Array(R).keys()];
  const ms = [...Array(MR).keys()];
  const tAcc = hasScale && !o.preScale;
  const acc = rs.flatMap((r) => ms.map((m) => `var a_${r}_${m} = 0.0;`)).join('\n  ');
  const fast: string[] = [];
  if (tAcc) fast.push(...rs.flatMap((r) => ms.map((m) => `var t_${r}_${m} = 0.0;`)));
  groups.forEach(([e0, g, expr], gi) => {
    for (const r of rs) fast.push(`let d_${r}_${gi} = ${expr(r)}${hasScale && !tAcc ? ` * s_${r}` : ''};`);
    for (const m of ms) {
      fast.push(`{ let xv = ${xg(m, e0, g)};`);
      for (const r of rs) fast.push(tAcc ? `  t_${r}_${m} += dot(d_${r}_${gi}, xv);` : `  a_${r}_${m} += dot(d_${r}_${gi}, xv);`);
      fast.push('}');
    }
  });
  if (tAcc) fast.push(...rs.flatMap((r) => ms.map((m) => `a_${r}_${m} = fma(s_${r}, t_${r}_${m}, a_${r}_${m});`)));
  const tailWord = (r: number) => (CW > 1 ? `w_${r}[e / ${epw}u]` : `w_${r}`);
  const tail = [
    ...rs.map((r) => `let v_${r} = w_elem(${tailWord(r)}, e % ${epw}u)${hasScale ? ` * s_${r}` : ''};`),
    ...ms.flatMap((m) => [`{ let xv = xe(${m}u * p.K + k);`, ...rs.map((r) => `  a_${r}_${m} = fma(v_${r}, xv, a_${r}_${m});`), '}']),
  ].join('\n          ');
  const reduce = [
    ...rs.flatMap((r) => ms.map((m) => `let z_${r}_${m} = subgroupAdd(a_${r}_${m});`)),
    'if (subgroupElect()) {',
    ...rs.flatMap((r) => ms.map((m) => `  part[${r * MR + m}u * NSG + sid] = z_${r}_${m};`)),
    '}',
  ].join('\n  ');
  const rowsOut = [
    ...rs.flatMap((r) => ms.map((m) => `let z_${r}_${m} = subgroupAdd(a_${r}_${m});`)),
    'if (subgroupElect()) {',
    ...rs.map((r) => `  if (n0 + ${r}u < ${rowsEnd(o)}) { ${ms.map((m) => `${yAt(o, `${m}u`, `n0 + ${r}u`)} = z_${r}_${m}${o.hasBias ? ` + ${biasAt(o, `n0 + ${r}u`)}` : ''};`).join(' ')} }`),
    '}',
  ].join('\n  ');
  return { acc, ...loadCode(R, CW, hasScale, o.G, o.prefetch), fast: fast.join('\n      '), tail, reduce, rows_out: rowsOut };
}

/** The rows of X in loops over an array of accumulators whose bound the compiler cannot see (`p.one`):
 *  software adapters, where the unrolled form of many rows costs their compiler tens of seconds. */
function rolledCode(o: GemvShape, groups: Group[], xg: XLoad, hasScale: boolean): Record<string, string> {
  const { R, CW, epw } = o;
  const rs = [...Array(R).keys()];
  const loop = (body: string) => `for (var m = 0u; m < MR * p.one; m++) { ${body} }`;
  const fast: string[] = [];
  groups.forEach(([e0, g, expr], gi) => {
    for (const r of rs) fast.push(`let d_${r}_${gi} = ${expr(r)}${hasScale ? ` * s_${r}` : ''};`);
    fast.push(loop(`let xv = ${xg('m', e0, g)}; ${rs.map((r) => `a[${r}u * MR + m] += dot(d_${r}_${gi}, xv);`).join(' ')}`));
  });
  const tailWord = (r: number) => (CW > 1 ? `w_${r}[e / ${epw}u]` : `w_${r}`);
  const tail = [
    ...rs.map((r) => `let v_${r} = w_elem(${tailWord(r)}, e % ${epw}u)${hasScale ? ` * s_${r}` : ''};`),
    loop(`let xv = xe(m * p.K + k); ${rs.map((r) => `a[${r}u * MR + m] = fma(v_${r}, xv, a[${r}u * MR + m]);`).join(' ')}`),
  ].join('\n          ');
  const reduce = `for (var i = 0u; i < R * MR * p.one; i++) { let z = subgroupAdd(a[i]); if (subgroupElect()) { part[i * NSG + sid] = z; } }`;
  const rowsOut =
    `for (var i = 0u; i < R * MR * p.one; i++) { let z = subgroupAdd(a[i]); let n = n0 + i / MR; ` +
    `if (subgroupElect() && n < ${rowsEnd(o)}) { ${yAt(o, 'i % MR', 'n')} = z${o.hasBias ? ` + ${biasAt(o, 'n')}` : ''}; } }`;
  return { acc: 'var a: array<f32, R * MR>;', ...loadCode(R, CW, hasScale, o.G, o.prefetch), fast: fast.join('\n      '), tail, reduce, rows_out: rowsOut };
}

/** What one generated GEMV kernel is specialised for. */
export interface GemvShape {
  /** Rows of X. */
  MR: number;
  /** Rows of W per workgroup. */
  R: number;
  WG: number;
  NSG: number;
  /** u32 words per chunk (4 or 1). */
  CW: number;
  /** Elements per word. */
  epw: number;
  fmt: number | FloatW;
  xVec: boolean;
  hasBias: boolean;
  /** Scale the dequantized values (else each chunk's dot products, once). */
  preScale: boolean;
  /** Named accumulators, everything written out (else loops over MR, software adapters). */
  unroll: boolean;
  /** The block scales are f16 (int4). */
  f16Scales?: boolean;
  /** Entry point main_rows (each subgroup owns R rows): the fixed subgroup size. */
  sgRows?: number;
  /** Load each row's next chunk while computing this one (see `GemvSetting.prefetch`). */
  prefetch?: boolean;
  /** Quantized weights: elements per block where a row has several blocks (else 0: one scale per row). */
  G?: number;
  /** Benchmarks only: leave a stage out (see `gemvTuning.probe`). */
  probe?: 'no-x' | 'no-deq' | 'no-scale' | 'w-only';
  /** X is one row of int8 limbs (ops/quant/x-limbs.ts) on x's binding, multiplied by int4 codes with
   *  `dot4I8Packed` (chunks of 2 or 4 words), the codes' offset taken out one way or the other (see limbsCode). */
  xLimbs?: 'offset' | 'signed';
  /** How int4 / int8 codes are decoded (see `gemvTuning.decode`; unset: `'shift'`). */
  decode?: 'mask' | 'shift';
  /** Several weights in one dispatch (2 or 3; unset: one), see `gemvParts`. */
  parts?: number;
  /** The scales are double-quantized codes, decoded where they are read (`scale_at`). */
  dq?: boolean;
  /** x is `act(gate) * up` of a gated MLP (`gemvGated`): gate on x's binding, up (f32) on binding `binding`. */
  gated?: { act: 'silu' | 'gelu_tanh'; binding: number };
}
