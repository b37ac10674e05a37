import { fmtBytes } from '@rusty/backend';
import { describeQuantization } from '../model/quantize';
import { openCheckpoint } from './checkpoint';
import { shapeNumel, type SafetensorsDType } from './dtypes';

/** One tensor of an inspection. */
export interface InspectRow {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  /** Number of elements. */
  parameters: number;
  bytes: number;
  /** The file (shard) holding it. */
  file: string;
}

/** What `rusty inspect` shows: every tensor and the totals. */
export interface Inspection {
  path: string;
  metadata: Record<string, string>;
  /** Sorted by name, numbers compared numerically (`layers.2` before `layers.10`). */
  tensors: InspectRow[];
  /** The distinct files read. */
  files: string[];
  totals: { tensors: number; parameters: number; bytes: number; byDType: Partial<Record<SafetensorsDType, { tensors: number; parameters: number; bytes: number }>> };
}

/** Compare names with digit runs compared as numbers. */
export function naturalCompare(a: string, b: string): number {
  const re = /(\d+)|(\D+)/g;
  const pa = a.match(re) ?? [];
  const pb = b.match(re) ?? [];
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    const nx = /^\d/.test(x);
    const ny = /^\d/.test(y);
    if (nx && ny) {
      const d = Number(x) - Number(y);
      if (d) return d;
    }
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length || (a < b ? -1 : a > b ? 1 : 0);
}

/**
 * List the tensors of a safetensors file, shard index or checkpoint directory (headers only; no tensor data
 * is read) with dtype, shape, parameter count and bytes, and the totals.
 * @throws SafetensorsError for a missing, truncated or malformed file
 */
export async function inspectSafetensors(pathOrDir: string): Promise<Inspection> {
  const ck = await openCheckpoint(pathOrDir);
  try {
    const tensors: InspectRow[] = [];
    const byDType: Inspection['totals']['byDType'] = {};
    const files = new Set<string>();
    let parameters = 0;
    let bytes = 0;
    for (const [name, t] of ck.tensors) {
      const n = shapeNumel(t.shape);
      tensors.push({ name, dtype: t.dtype, shape: [...t.shape], parameters: n, bytes: t.byteLength, file: t.file });
      files.add(t.file);
      parameters += n;
      bytes += t.byteLength;
      const d = (byDType[t.dtype] ??= { tensors: 0, parameters: 0, bytes: 0 });
      d.tensors++;
      d.parameters += n;
      d.bytes += t.byteLength;
    }
    tensors.sort((a, b) => naturalCompare(a.name, b.name));
    return { path: pathOrDir, metadata: { ...ck.metadata }, tensors, files: [...files], totals: { tensors: tensors.length, parameters, bytes, byDType } };
  } finally {
    await ck.close();
  }
}

/** A plain-text table of an inspection (what `rusty inspect` prints). */
export function formatInspection(ins: Inspection): string {
  const rows = ins.tensors.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, t.parameters.toLocaleString('en-US'), fmtBytes(t.bytes)]);
  const head = ['name', 'dtype', 'shape', 'parameters', 'bytes'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i >= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  const out = [line(head), ...rows.map(line)];
  const dt = Object.entries(ins.totals.byDType)
    .map(([d, v]) => `${d} ${v!.parameters.toLocaleString('en-US')}`)
    .join(', ');
  out.push(
    '',
    `${ins.totals.tensors} tensors in ${ins.files.length} file${ins.files.length === 1 ? '' : 's'}, ` +
      `${ins.totals.parameters.toLocaleString('en-US')} parameters (${dt}), ${fmtBytes(ins.totals.bytes)}`,
  );
  const quant = describeQuantization(ins.metadata);
  if (quant) out.push(quant);
  return out.join('\n');
}
