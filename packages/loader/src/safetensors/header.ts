import { z } from 'zod';
import { SafetensorsError } from '../errors';
import { dtypeSize, isSafetensorsDType, SAFETENSORS_DTYPES, shapeNumel, type SafetensorsDType } from './dtypes';

/** Largest header the reader accepts (the reference implementation's limit). */
export const MAX_HEADER_BYTES = 100_000_000;

/** One tensor as the header describes it; `byteOffset` is absolute in the file. */
export interface TensorInfo {
  readonly dtype: SafetensorsDType;
  readonly shape: readonly number[];
  /** Absolute position of the first byte in the file. */
  readonly byteOffset: number;
  readonly byteLength: number;
  /** The file that holds the data (the shard, in a sharded checkpoint). */
  readonly file: string;
}

export interface ParsedHeader {
  readonly metadata: Record<string, string>;
  /** In file order (by offset). */
  readonly tensors: Map<string, TensorInfo>;
}

const safeInt = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const entrySchema = z.object({
  dtype: z.string(),
  shape: z.array(safeInt),
  data_offsets: z.tuple([safeInt, safeInt]),
});
const metadataSchema = z.record(z.string(), z.string()).nullable();

/**
 * Read the 8-byte little-endian header length and check it against the file size.
 * @returns the header length N (the header occupies bytes 8 .. 8 + N).
 */
export function headerLength(file: string, fileSize: number, prefix: Uint8Array): number {
  if (fileSize < 8 || prefix.byteLength < 8)
    throw new SafetensorsError(`${file}: file is truncated: ${fileSize} bytes cannot hold the 8-byte header length`);
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_BYTES))
    throw new SafetensorsError(`${file}: header length ${n} exceeds the ${MAX_HEADER_BYTES}-byte limit (corrupt or not a safetensors file)`);
  const len = Number(n);
  if (8 + len > fileSize)
    throw new SafetensorsError(`${file}: header length ${len} runs past the end of the file (${fileSize} bytes): the file is truncated or corrupt`);
  if (len < 2) throw new SafetensorsError(`${file}: header length ${len} is too small to hold a JSON object`);
  return len;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function describe(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('') : '';
  return `${where ? where.slice(where.startsWith('.') ? 1 : 0) + ': ' : ''}${issue.message}`;
}

/**
 * Decode and validate a header: UTF-8 JSON object, each entry `{dtype, shape, data_offsets}` with a known dtype,
 * non-negative integer dimensions, offsets that tile the data region exactly (in range, no overlap, no hole,
 * nothing after the last tensor) and byte lengths equal to numel x itemsize; `__metadata__` a string map.
 * @param dataStart absolute file position of the data region (8 + header length)
 * @param dataLength bytes from `dataStart` to the end of the file
 */
export function parseHeader(file: string, bytes: Uint8Array, dataStart: number, dataLength: number): ParsedHeader {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new SafetensorsError(`${file}: header is not valid UTF-8 (corrupt or not a safetensors file)`);
  }
  if (text[0] !== '{') throw new SafetensorsError(`${file}: header does not start with '{' (corrupt or not a safetensors file)`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(`${file}: header is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new SafetensorsError(`${file}: header is not a JSON object`);

  let metadata: Record<string, string> = {};
  const raw: { name: string; dtype: SafetensorsDType; shape: number[]; start: number; end: number }[] = [];
  for (const [name, value] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      const m = metadataSchema.safeParse(value);
      if (!m.success)
        throw new SafetensorsError(`${file}: __metadata__ must map strings to strings: ${describe(m.error.issues[0]!)}`);
      metadata = { ...(m.data ?? {}) };
      continue;
    }
    const r = entrySchema.safeParse(value);
    if (!r.success)
      throw new SafetensorsError(
        `${file}: tensor '${name}' has an invalid header entry (${describe(r.error.issues[0]!)}); ` +
          'expected {"dtype": string, "shape": [non-negative integers], "data_offsets": [start, end]}',
      );
    const { dtype, shape, data_offsets } = r.data;
    if (!isSafetensorsDType(dtype))
      throw new SafetensorsError(`${file}: tensor '${name}' has unknown dtype '${dtype}' (supported: ${SAFETENSORS_DTYPES.join(', ')})`);
    raw.push({ name, dtype, shape, start: data_offsets[0], end: data_offsets[1] });
  }

  raw.sort((a, b) => a.start - b.start || a.end - b.end);
  const tensors = new Map<string, TensorInfo>();
  let pos = 0;
  let prev: (typeof raw)[number] | undefined;
  for (const t of raw) {
    const offs = `data_offsets [${t.start}, ${t.end}]`;
    if (t.end < t.start) throw new SafetensorsError(`${file}: tensor '${t.name}' has ${offs} with end before start`);
    if (t.end > dataLength)
      throw new SafetensorsError(
        `${file}: tensor '${t.name}' has ${offs} past the end of the data (${dataLength} bytes): the file is truncated or corrupt`,
      );
    if (t.start < pos)
      throw new SafetensorsError(`${file}: tensor '${t.name}' ${offs} overlaps tensor '${prev!.name}' [${prev!.start}, ${prev!.end}]`);
    if (t.start > pos)
      throw new SafetensorsError(`${file}: the data region has a hole at bytes [${pos}, ${t.start}) not covered by any tensor (before '${t.name}')`);
    const numel = shapeNumel(t.shape);
    const need = numel * dtypeSize(t.dtype);
    if (need !== t.end - t.start)
      throw new SafetensorsError(
        `${file}: tensor '${t.name}' ${t.dtype}[${t.shape.join(', ')}] needs ${Number.isFinite(need) ? need : 'more than 2^53'} bytes but its ${offs} span ${t.end - t.start}`,
      );
    tensors.set(t.name, { dtype: t.dtype, shape: t.shape, byteOffset: dataStart + t.start, byteLength: t.end - t.start, file });
    pos = t.end;
    prev = t;
  }
  if (pos !== dataLength)
    throw new SafetensorsError(
      `${file}: ${dataLength - pos} bytes after the last tensor are not covered by the header (data region [${pos}, ${dataLength}))`,
    );
  return { metadata, tensors };
}
