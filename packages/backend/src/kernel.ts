import type { DType } from './dtype';
import { ShapeError } from './errors';
import { formatOf } from './format';
import halfWgsl from '../../../shaders/half.wgsl';

/** How a kernel sees one storage binding. `read` bindings get a `read_<name>(i) -> f32|i32|u32` function that
 *  unpacks 16-bit storage; `rw` bindings are plain `array<f32|i32|u32|atomic<u32>>` named `<name>`
 *  (`f16`/`bf16` rw bindings are `array<u32>` words, for kernels that write packed pairs). */
export interface BindingSpec {
  name: string;
  access: 'read' | 'rw';
  dtype: DType;
  /** For rw bindings: declare the array as `atomic<u32>`/`atomic<i32>`. */
  atomic?: boolean;
}

/** The bindings of a kernel that reads one array and writes another: `in` (read, `inDtype`) then `out` (rw,
 *  `outDtype`, f32 by default), named `x` and `y` unless `names` says otherwise. */
export function ioBindings(inDtype: DType, outDtype: DType = 'f32', names: readonly [string, string] = ['x', 'y']): BindingSpec[] {
  return [
    { name: names[0], access: 'read', dtype: inDtype },
    { name: names[1], access: 'rw', dtype: outDtype },
  ];
}

/** A scalar uniform field: `u32:M`, `i32:offset`, `f32:eps`. */
export type ParamSpec = `${'u32' | 'i32' | 'f32'}:${string}`;

/**
 * A compute kernel. `code` is the WGSL body (entry points, helpers); the context prepends the uniform struct
 * `P` bound as `p` at binding 0 (when `params` is non-empty), the storage bindings at 1.., and a `const`
 * declaration for each entry of `consts`: the way to specialise a shader (workgroup sizes, unroll counts,
 * array lengths, op codes, feature flags), since WGSL constants can size private arrays and be folded, which
 * pipeline overrides cannot do everywhere.
 */
export interface KernelDef {
  name: string;
  code: string;
  bindings: readonly BindingSpec[];
  params?: readonly ParamSpec[];
  entryPoint?: string;
  /** Specialisation constants, declared before `code` by {@link constPrelude} (`true` -> `const X: bool = true;`,
   *  integers >= 0 -> u32, negative integers -> i32, other numbers -> f32: a float that may be integral, like
   *  a scale, belongs in `params`). */
  consts?: Readonly<Record<string, number | boolean>>;
  /** Values for WGSL `override` declarations in `code` (pipeline constants). Kernels in matmul.ts and ops/quant
   *  still use these; new kernels use `consts`. */
  constants?: Readonly<Record<string, number>>;
  /** WGSL `enable` directives this kernel needs, e.g. `f16`, `subgroups`. */
  enables?: readonly string[];
  /** WGSL `requires` directives (language extensions), e.g. `buffer_view`. */
  requires?: readonly string[];
}

/** The reader function that returns element i of a binding as f32 (or its integer type), from the format
 *  table's load expression. */
function readerFor(name: string, dtype: DType): string {
  const w = formatOf(dtype).wgsl;
  return `fn read_${name}(i: u32) -> ${w.value} { return ${w.load(name, 'i')}; }`;
}

/**
 * WGSL for a kernel that writes `dtype` one u32 word at a time (each thread owns whole words): the constant
 * `PW_<name>` (elements per word) and `pack_<name>(x: array<f32, PW_<name>>) -> u32`, from the format
 * table's `pack` (16-bit formats round to nearest even). Formats kernels cannot write throw a ShapeError.
 */
export function wgslPacker(name: string, dtype: DType): string {
  const f = formatOf(dtype);
  if (!f.wgsl.pack || f.kind !== 'float') throw new ShapeError(`kernels do not write ${dtype} storage (binding '${name}')`);
  const xs = Array.from({ length: f.perWord }, (_, j) => `x[${j}]`);
  return (
    `const PW_${name}: u32 = ${f.perWord}u;\n` +
    `fn pack_${name}(x: array<f32, ${f.perWord}>) -> u32 { return ${f.wgsl.pack(xs)}; }\n`
  );
}

/** WGSL `const` declarations for specialisation constants: the one generator behind `KernelDef.consts` (and the
 *  LLM kernels' `vecPrelude`). */
export function constPrelude(consts: Readonly<Record<string, number | boolean>>): string {
  let out = '';
  for (const [k, v] of Object.entries(consts)) {
    if (typeof v === 'boolean') out += `const ${k}: bool = ${v};\n`;
    else if (!Number.isFinite(v)) throw new ShapeError(`kernel constant ${k} = ${v} is not finite`);
    else if (Number.isInteger(v) && v >= 0 && v < 2 ** 32) out += `const ${k}: u32 = ${v}u;\n`;
    else if (Number.isInteger(v) && v >= -(2 ** 31)) out += `const ${k}: i32 = ${v}i;\n`;
    else out += `const ${k}: f32 = ${v.toPrecision(9)};\n`;
  }
  return out;
}

/** The full WGSL module text of a kernel: enables, uniform struct, bindings, readers, constants, then the body. */
export function kernelSource(def: KernelDef): string {
  const lines: string[] = [];
  for (const e of def.enables ?? []) lines.push(`enable ${e};`);
  for (const r of def.requires ?? []) lines.push(`requires ${r};`);
  lines.push(halfWgsl);
  const params = def.params ?? [];
  if (params.length) {
    lines.push('struct P {');
    for (const p of params) {
      const [t, n] = p.split(':') as [string, string];
      lines.push(`  ${n}: ${t},`);
    }
    lines.push('}');
    lines.push('@group(0) @binding(0) var<uniform> p: P;');
  }
  const helpers = new Set<string>();
  for (const b of def.bindings) {
    const h = formatOf(b.dtype).wgsl.helpers;
    if (h && !helpers.has(h)) lines.push(h), helpers.add(h);
  }
  def.bindings.forEach((b, i) => {
    const s = formatOf(b.dtype).wgsl.word;
    if (b.access === 'read') {
      lines.push(`@group(0) @binding(${i + 1}) var<storage, read> ${b.name}: array<${s}>;`);
      lines.push(readerFor(b.name, b.dtype));
    } else {
      const elem = b.atomic ? `atomic<${s}>` : s;
      lines.push(`@group(0) @binding(${i + 1}) var<storage, read_write> ${b.name}: array<${elem}>;`);
    }
  });
  if (def.consts) lines.push(constPrelude(def.consts));
  lines.push(def.code);
  return lines.join('\n');
}

const codeHashes = new Map<string, string>();

/** 32-bit FNV-1a of a string's UTF-16 code units, with its length, as hex (memoised per code text). */
export function codeHash(code: string): string {
  let h = codeHashes.get(code);
  if (h === undefined) {
    let x = 0x811c9dc5;
    for (let i = 0; i < code.length; i++) x = Math.imul(x ^ code.charCodeAt(i), 0x01000193);
    h = (x >>> 0).toString(16).padStart(8, '0') + '.' + code.length.toString(36);
    codeHashes.set(code, h);
  }
  return h;
}

/** Everything of a kernel's identity but its code: name, entry point, binding dtypes (16-bit readers
 *  differ), params, consts, constants and enables. The context's cache tells kernels with the same base key apart by
 *  comparing their code text. */
export function kernelBaseKey(def: KernelDef): string {
  const c = (def.constants ? JSON.stringify(def.constants) : '') + (def.consts ? JSON.stringify(def.consts) : '');
  const b = def.bindings.map((x) => `${x.access[0]}${x.dtype}${x.atomic ? 'a' : ''}`).join(',');
  return `${def.name}|${def.entryPoint ?? 'main'}|${b}|${(def.params ?? []).join(',')}|${c}|${(def.enables ?? []).join(',')}${def.requires?.length ? `|${def.requires.join(',')}` : ''}`;
}

/** Pipeline key: {@link kernelBaseKey} and a hash of `code`, so two defs that share a name but not their WGSL
 *  get different keys (`Kernel.key`). */
export function kernelKey(def: KernelDef): string {
  return `${kernelBaseKey(def)}|#${codeHash(def.code)}`;
}
