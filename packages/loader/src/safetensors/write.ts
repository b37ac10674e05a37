import { SafetensorsError } from '../errors';
import { memoryTree } from '../io/blob';
import type { ByteSink, FileTree } from '../io/source';
import { dtypeRank, dtypeSize, inferDType, isSafetensorsDType, SAFETENSORS_DTYPES, shapeNumel, type SafetensorsDType } from './dtypes';

/** One tensor to write. `data` holds exactly numel x itemsize bytes in little-endian element order (any typed
 *  array or a Uint8Array of raw bytes), or is a function that produces them when the writer gets to it (so a
 *  large checkpoint need not be in host memory all at once). */
export interface TensorToWrite {
  /** Required when it cannot be inferred from `data` (16-bit arrays, raw bytes, functions). */
  dtype?: SafetensorsDType;
  shape: readonly number[];
  data: ArrayBufferView | (() => ArrayBufferView | Promise<ArrayBufferView>);
}

export type TensorsToWrite =
  | Readonly<Record<string, TensorToWrite>>
  | ReadonlyMap<string, TensorToWrite>
  | Iterable<readonly [string, TensorToWrite]>;

export interface WriteResult {
  path: string;
  /** Size of the file written. */
  byteLength: number;
  /** Header length N (the JSON plus padding). */
  headerLength: number;
}

interface Planned {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  bytes: number;
  data: TensorToWrite['data'];
}

function entriesOf(tensors: TensorsToWrite): [string, TensorToWrite][] {
  if (tensors instanceof Map) return [...tensors.entries()];
  if (typeof (tensors as Iterable<unknown>)[Symbol.iterator] === 'function')
    return [...(tensors as Iterable<readonly [string, TensorToWrite]>)].map(([k, v]) => [k, v]);
  return Object.entries(tensors as Record<string, TensorToWrite>);
}

const utf8 = new TextEncoder();

/** Byte-wise order of UTF-8 encodings (what the reference implementation's Rust string sort does). */
function compareUtf8(a: string, b: string): number {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/**
 * Plan the layout: tensors sorted like the reference implementation (dtype alignment descending: U64, I64,
 * F64, F32, ..., BOOL; then name, byte-wise), offsets assigned in that order, header JSON with `__metadata__`
 * first (keys sorted), padded with spaces to a multiple of 8 bytes.
 */
function plan(path: string, tensors: TensorsToWrite, metadata: Record<string, string> | undefined) {
  const planned: Planned[] = [];
  const seen = new Set<string>();
  for (const [name, t] of entriesOf(tensors)) {
    const where = `${path}: tensor '${name}'`;
    if (name === '__metadata__') throw new SafetensorsError(`${path}: '__metadata__' cannot be a tensor name`);
    if (seen.has(name)) throw new SafetensorsError(`${where} is given twice`);
    seen.add(name);
    if (!t || typeof t !== 'object' || !Array.isArray(t.shape))
      throw new SafetensorsError(`${where} must be {dtype, shape, data}`);
    const dtype = t.dtype ?? (typeof t.data === 'function' ? undefined : inferDType(t.data));
    if (!dtype) throw new SafetensorsError(`${where}: give its dtype (it cannot be inferred from ${typeof t.data === 'function' ? 'a function' : t.data?.constructor?.name})`);
    if (!isSafetensorsDType(dtype)) throw new SafetensorsError(`${where}: unknown dtype '${String(dtype)}' (supported: ${SAFETENSORS_DTYPES.join(', ')})`);
    for (const d of t.shape)
      if (!Number.isSafeInteger(d) || d < 0) throw new SafetensorsError(`${where}: shape [${t.shape.join(', ')}] has an invalid dimension ${d}`);
    const bytes = shapeNumel(t.shape) * dtypeSize(dtype);
    if (!Number.isSafeInteger(bytes)) throw new SafetensorsError(`${where}: shape [${t.shape.join(', ')}] is too large`);
    if (typeof t.data !== 'function') checkData(where, dtype, t.shape, bytes, t.data);
    planned.push({ name, dtype, shape: [...t.shape], bytes, data: t.data });
  }
  planned.sort((a, b) => dtypeRank(b.dtype) - dtypeRank(a.dtype) || compareUtf8(a.name, b.name));

  const parts: string[] = [];
  if (metadata !== undefined) {
    const keys = Object.keys(metadata).sort(compareUtf8);
    for (const k of keys)
      if (typeof metadata[k] !== 'string') throw new SafetensorsError(`${path}: metadata value of '${k}' must be a string`);
    parts.push(`"__metadata__":{${keys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(metadata[k])}`).join(',')}}`);
  }
  let offset = 0;
  for (const t of planned) {
    parts.push(`${JSON.stringify(t.name)}:{"dtype":"${t.dtype}","shape":[${t.shape.join(',')}],"data_offsets":[${offset},${offset + t.bytes}]}`);
    offset += t.bytes;
  }
  const json = utf8.encode(`{${parts.join(',')}}`);
  const n = Math.ceil(json.byteLength / 8) * 8;
  const header = new Uint8Array(8 + n).fill(0x20);
  new DataView(header.buffer).setBigUint64(0, BigInt(n), true);
  header.set(json, 8);
  return { planned, header, dataBytes: offset, n };
}

function checkData(where: string, dtype: SafetensorsDType, shape: readonly number[], bytes: number, data: unknown): asserts data is ArrayBufferView {
  if (!ArrayBuffer.isView(data)) throw new SafetensorsError(`${where}: data must be a typed array or Uint8Array`);
  if (data.byteLength !== bytes)
    throw new SafetensorsError(`${where}: ${dtype}[${shape.join(', ')}] needs ${bytes} bytes but its data has ${data.byteLength}`);
}

/** Where `writeSafetensors` writes: a path (Node), or a file in a writable tree (OPFS, memory, a Node directory). */
export type SafetensorsTarget = string | { tree: FileTree; file: string };

/**
 * Write tensors to a safetensors file, atomically: the data goes to a temporary file (for a path: in the same
 * directory, fsync'd, then renamed over `path` and the directory fsync'd; for a tree: its sink, committed at the
 * end), so a crash never leaves a partial file under the final name. Layout and header are byte-identical to the
 * reference implementation's for the same tensors and metadata (see `plan`).
 * @param metadata the `__metadata__` string map (omitted from the header when undefined)
 * @throws SafetensorsError naming the tensor whose dtype, shape or data is wrong, or the I/O failure
 */
export async function writeSafetensors(target: SafetensorsTarget, tensors: TensorsToWrite, metadata?: Record<string, string>): Promise<WriteResult> {
  const path = typeof target === 'string' ? target : target.tree.pathOf(target.file);
  const { planned, header, dataBytes, n } = plan(path, tensors, metadata);
  let sink: ByteSink | undefined;
  try {
    let where = typeof target === 'string' ? path : target.tree.name;
    try {
      if (typeof target === 'string') {
        const node = await import('../io/node');
        where = node.dirname(path);
        sink = await node.createFileSink(path);
      } else if (target.tree.createSink) sink = await target.tree.createSink(target.file);
      else throw new Error('the tree is read-only');
    } catch (e) {
      throw new SafetensorsError(`${path}: cannot create a temporary file in ${where}: ${(e as Error).message}`, { cause: e });
    }
    await sink.write(header);
    for (const t of planned) {
      const data = typeof t.data === 'function' ? await t.data() : t.data;
      checkData(`${path}: tensor '${t.name}'`, t.dtype, t.shape, t.bytes, data);
      await sink.write(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    await sink.commit();
  } catch (e) {
    await sink?.abort().catch(() => undefined);
    if (e instanceof SafetensorsError) throw e;
    throw new SafetensorsError(`${path}: writing failed: ${(e as Error).message}`, { cause: e });
  }
  return { path, byteLength: 8 + n + dataBytes, headerLength: n };
}

/** The bytes of a safetensors file holding `tensors` (what `writeSafetensors` would write), in memory: for
 *  downloads and browser storage. */
export async function serializeSafetensors(tensors: TensorsToWrite, metadata?: Record<string, string>, name = 'tensors.safetensors'): Promise<Uint8Array> {
  const tree = memoryTree('memory');
  await writeSafetensors({ tree, file: name }, tensors, metadata);
  return tree.files.get(name)!;
}
