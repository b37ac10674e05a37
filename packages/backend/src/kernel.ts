import type { DType } from './dtype';
import { isHalf } from './dtype';
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

/** A scalar uniform field: `u32:M`, `i32:offset`, `f32:eps`. */
export type ParamSpec = `${'u32' | 'i32' | 'f32'}:${string}`;

/**
 * A compute kernel. `code` is the WGSL body (entry points, helpers); the context prepends the uniform struct
 * `P` bound as `p` at binding 0 (when `params` is non-empty), the storage bindings at 1.., and
 * `override` constants named in `constants` are part of the pipeline cache key.
 */
export interface KernelDef {
  name: string;
  code: string;
  bindings: readonly BindingSpec[];
  params?: readonly ParamSpec[];
  entryPoint?: string;
  /** Pipeline-overridable constants (WGSL `override` declarations in `code`). */
  constants?: Readonly<Record<string, number>>;
  /** WGSL `enable` directives this kernel needs, e.g. `f16`, `subgroups`. */
  enables?: readonly string[];
}

function scalarOf(d: DType): 'f32' | 'i32' | 'u32' {
  return d === 'i32' ? 'i32' : d === 'u32' || isHalf(d) ? 'u32' : 'f32';
}

/** The reader function that returns element i of a binding as f32 (or its integer type). */
function readerFor(name: string, dtype: DType): string {
  const v = `${name}`;
  switch (dtype) {
    case 'f16':
      return `fn read_${name}(i: u32) -> f32 { return f16_bits_to_f32((${v}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu); }`;
    case 'bf16':
      return (
        `fn read_${name}(i: u32) -> f32 { let w = ${v}[i >> 1u]; ` +
        `return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u)); }`
      );
    case 'f32':
      return `fn read_${name}(i: u32) -> f32 { return ${v}[i]; }`;
    case 'i32':
      return `fn read_${name}(i: u32) -> i32 { return ${v}[i]; }`;
    case 'u32':
      return `fn read_${name}(i: u32) -> u32 { return ${v}[i]; }`;
  }
}

/** The full WGSL module text of a kernel: enables, uniform struct, bindings, readers, then the body. */
export function kernelSource(def: KernelDef): string {
  const lines: string[] = [];
  for (const e of def.enables ?? []) lines.push(`enable ${e};`);
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
  def.bindings.forEach((b, i) => {
    const s = scalarOf(b.dtype);
    if (b.access === 'read') {
      lines.push(`@group(0) @binding(${i + 1}) var<storage, read> ${b.name}: array<${s}>;`);
      lines.push(readerFor(b.name, b.dtype));
    } else {
      const elem = b.atomic ? `atomic<${s}>` : s;
      lines.push(`@group(0) @binding(${i + 1}) var<storage, read_write> ${b.name}: array<${elem}>;`);
    }
  });
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
 *  differ), params, constants and enables. The context's cache tells kernels with the same base key apart by
 *  comparing their code text. */
export function kernelBaseKey(def: KernelDef): string {
  const c = def.constants ? JSON.stringify(def.constants) : '';
  const b = def.bindings.map((x) => `${x.access[0]}${x.dtype}${x.atomic ? 'a' : ''}`).join(',');
  return `${def.name}|${def.entryPoint ?? 'main'}|${b}|${(def.params ?? []).join(',')}|${c}|${(def.enables ?? []).join(',')}`;
}

/** Pipeline key: {@link kernelBaseKey} and a hash of `code`, so two defs that share a name but not their WGSL
 *  get different keys (`Kernel.key`). */
export function kernelKey(def: KernelDef): string {
  return `${kernelBaseKey(def)}|#${codeHash(def.code)}`;
}
