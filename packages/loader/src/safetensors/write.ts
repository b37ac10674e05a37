import { randomBytes } from 'node:crypto';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { SafetensorsError } from '../errors';
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
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
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

/** Buffered sequential writes: small tensors are coalesced, large ones written straight through. */
class Sink {
  private buf = new Uint8Array(8 << 20);
  private used = 0;
  private pos = 0;
  constructor(private fh: FileHandle) {}

  async write(bytes: Uint8Array): Promise<void> {
    if (this.used + bytes.byteLength <= this.buf.byteLength) {
      this.buf.set(bytes, this.used);
      this.used += bytes.byteLength;
      return;
    }
    await this.flush();
    if (bytes.byteLength <= this.buf.byteLength / 2) {
      this.buf.set(bytes);
      this.used = bytes.byteLength;
    } else await this.writeAll(bytes);
  }

  async flush(): Promise<void> {
    if (this.used) await this.writeAll(this.buf.subarray(0, this.used));
    this.used = 0;
  }

  private async writeAll(bytes: Uint8Array): Promise<void> {
    let done = 0;
    while (done < bytes.byteLength) {
      const len = Math.min(bytes.byteLength - done, 1 << 30);
      const { bytesWritten } = await this.fh.write(bytes, done, len, this.pos);
      done += bytesWritten;
      this.pos += bytesWritten;
    }
  }
}

/**
 * Write tensors to a safetensors file, atomically: the data goes to a temporary file in the same directory,
 * which is fsync'd and then renamed over `path` (and the directory fsync'd), so a crash never leaves a partial
 * file under the final name. Layout and header are byte-identical to the reference implementation's for the
 * same tensors and metadata (see `plan`).
 * @param metadata the `__metadata__` string map (omitted from the header when undefined)
 * @throws SafetensorsError naming the tensor whose dtype, shape or data is wrong, or the I/O failure
 */
export async function writeSafetensors(path: string, tensors: TensorsToWrite, metadata?: Record<string, string>): Promise<WriteResult> {
  const { planned, header, dataBytes, n } = plan(path, tensors, metadata);
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  let fh: FileHandle | undefined;
  try {
    try {
      fh = await open(tmp, 'wx', 0o644);
    } catch (e) {
      throw new SafetensorsError(`${path}: cannot create a temporary file in ${dir}: ${(e as Error).message}`, { cause: e });
    }
    const sink = new Sink(fh);
    await sink.write(header);
    for (const t of planned) {
      const data = typeof t.data === 'function' ? await t.data() : t.data;
      checkData(`${path}: tensor '${t.name}'`, t.dtype, t.shape, t.bytes, data);
      await sink.write(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    await sink.flush();
    await fh.sync();
    await fh.close();
    fh = undefined;
    await rename(tmp, path);
  } catch (e) {
    await fh?.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    if (e instanceof SafetensorsError) throw e;
    throw new SafetensorsError(`${path}: writing failed: ${(e as Error).message}`, { cause: e });
  }
  await syncDir(dir);
  return { path, byteLength: 8 + n + dataBytes, headerLength: n };
}

/** fsync a directory so that a rename in it is durable (a no-op where directories cannot be opened). */
async function syncDir(dir: string): Promise<void> {
  let d: FileHandle | undefined;
  try {
    d = await open(dir, 'r');
    await d.sync();
  } catch {
    // Windows and some file systems refuse to open or fsync a directory; the rename itself is still atomic.
  } finally {
    await d?.close().catch(() => undefined);
  }
}
