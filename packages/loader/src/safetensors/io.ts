import type { ByteSource } from '../io/source';
import { SafetensorsError } from '../errors';

/** Largest single read request (Node limits one `read(2)` to 2 GiB - 1). */
const MAX_READ = 1 << 30;

/**
 * Fill `into` with `into.byteLength` bytes read from `position`, in as many calls as it takes.
 * @throws SafetensorsError when the file ends early (it was truncated after it was opened)
 */
export async function readExactly(fh: ByteSource, file: string, position: number, into: Uint8Array): Promise<void> {
  let done = 0;
  while (done < into.byteLength) {
    const want = Math.min(MAX_READ, into.byteLength - done);
    let bytesRead: number;
    try {
      bytesRead = await fh.read(into.subarray(done, done + want), position + done);
    } catch (e) {
      throw new SafetensorsError(`${file}: reading ${want} bytes at offset ${position + done} failed: ${(e as Error).message}`, {
        cause: e,
      });
    }
    if (bytesRead === 0)
      throw new SafetensorsError(
        `${file}: unexpected end of file at offset ${position + done} (wanted ${into.byteLength - done} more bytes): the file was truncated`,
      );
    done += bytesRead;
  }
}

/** Chunk reads kept in flight ahead of the chunk being handled. */
export const READ_AHEAD = 3;

/**
 * Read `length` bytes from `position` in chunks of `chunkBytes` (the last one shorter), with up to `READ_AHEAD`
 * further chunks being read (in libuv's thread pool for Node files) while `onChunk` handles the current one. `onChunk` gets a
 * view that is reused afterwards, and the chunk's offset from `position`. Host memory: (READ_AHEAD + 1) chunks.
 */
export async function streamRange(
  fh: ByteSource,
  file: string,
  position: number,
  length: number,
  chunkBytes: number,
  onChunk: (bytes: Uint8Array, offset: number) => void | Promise<void>,
): Promise<void> {
  if (length === 0) return;
  const size = Math.min(chunkBytes, length);
  const chunks = Math.ceil(length / size);
  const slots = Math.min(chunks, READ_AHEAD + 1);
  const bufs = Array.from({ length: slots }, () => new Uint8Array(size));
  const readChunk = (k: number) => {
    const off = k * size;
    const view = bufs[k % slots]!.subarray(0, Math.min(size, length - off));
    const p = readExactly(fh, file, position + off, view).then(() => view);
    p.catch(() => undefined); // a read-ahead may fail before it is awaited: not an unhandled rejection
    return p;
  };
  const pending: Promise<Uint8Array>[] = [];
  for (let k = 0; k < slots; k++) pending.push(readChunk(k));
  try {
    for (let k = 0; k < chunks; k++) {
      const view = await pending.shift()!;
      await onChunk(view, k * size);
      if (k + slots < chunks) pending.push(readChunk(k + slots));
    }
  } catch (e) {
    await Promise.all(pending.map((p) => p.catch(() => undefined)));
    throw e;
  }
}

/** Fill `into` from `position` with up to READ_AHEAD + 1 reads of `pieceBytes` in flight (faster than one large
 *  read on most systems: the kernel copies into several buffers at once). */
export async function readParallel(fh: ByteSource, file: string, position: number, into: Uint8Array, pieceBytes = 8 << 20): Promise<void> {
  const n = Math.ceil(into.byteLength / pieceBytes);
  if (n <= 1) return readExactly(fh, file, position, into);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const k = next++;
      const off = k * pieceBytes;
      await readExactly(fh, file, position + off, into.subarray(off, Math.min(into.byteLength, off + pieceBytes)));
    }
  };
  const workers = Array.from({ length: Math.min(n, READ_AHEAD + 1) }, worker);
  const results = await Promise.allSettled(workers);
  for (const r of results) if (r.status === 'rejected') throw r.reason;
}
