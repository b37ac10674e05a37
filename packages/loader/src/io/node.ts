// The Node implementation of the source/sink interface: files through `node:fs/promises`. Loaded with a dynamic
// `import('./node')` only where a path string is given, so browser code paths never import `node:*`.
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';

export { basename, dirname, join };
import type { ByteSink, ByteSource, FileTree } from './source';

/** Largest single `read(2)`/`write(2)` request (Node limits one call to 2 GiB - 1). */
const MAX_IO = 1 << 30;

/** An error carrying a Node errno code (`ENOENT`, `EISDIR`, ...). */
export type ErrnoError = Error & { code?: string };

/** Open a file for reading. Rejects with the `fs` error (its `code` tells why), `EISDIR` for a directory. */
export async function openFile(path: string): Promise<ByteSource> {
  const fh = await open(path, 'r');
  let size: number;
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw Object.assign(new Error(`${path} is a directory`), { code: 'EISDIR' });
    size = st.size;
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
  let closed = false;
  return {
    name: path,
    size,
    async read(into, position) {
      const { bytesRead } = await fh.read(into, 0, Math.min(MAX_IO, into.byteLength), position);
      return bytesRead;
    },
    async close() {
      if (closed) return;
      closed = true;
      await fh.close();
    },
  };
}

/** What a path is. */
export async function pathKind(p: string): Promise<'file' | 'dir' | 'none'> {
  try {
    return (await stat(p)).isDirectory() ? 'dir' : 'file';
  } catch {
    return 'none';
  }
}

/**
 * A sink that writes `path` atomically: the data goes to a temporary file in the same directory, which is
 * fsync'd and renamed over `path` on `commit` (and the directory fsync'd), so a crash never leaves a partial
 * file under the final name. Small writes are coalesced.
 */
export async function createFileSink(path: string): Promise<ByteSink> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const fh: FileHandle = await open(tmp, 'wx', 0o644);
  const buf = new Uint8Array(8 << 20);
  let used = 0;
  let pos = 0;
  let done = false;
  const writeAll = async (bytes: Uint8Array) => {
    let off = 0;
    while (off < bytes.byteLength) {
      const { bytesWritten } = await fh.write(bytes, off, Math.min(bytes.byteLength - off, MAX_IO), pos);
      off += bytesWritten;
      pos += bytesWritten;
    }
  };
  const flush = async () => {
    if (used) await writeAll(buf.subarray(0, used));
    used = 0;
  };
  return {
    name: path,
    async write(bytes) {
      if (used + bytes.byteLength <= buf.byteLength) {
        buf.set(bytes, used);
        used += bytes.byteLength;
        return;
      }
      await flush();
      if (bytes.byteLength <= buf.byteLength / 2) {
        buf.set(bytes);
        used = bytes.byteLength;
      } else await writeAll(bytes);
    },
    async commit() {
      await flush();
      await fh.sync();
      await fh.close();
      done = true;
      await rename(tmp, path);
      await syncDir(dir);
    },
    async abort() {
      if (!done) await fh.close().catch(() => undefined);
      done = true;
      await unlink(tmp).catch(() => undefined);
    },
  };
}

/** fsync a directory so that a rename in it is durable (a no-op where directories cannot be opened). */
export async function syncDir(dir: string): Promise<void> {
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

/** A writable tree over a Node directory (created on the first write); `pathOf` joins paths as `node:path` does. */
export function nodeTree(dir: string): FileTree {
  const pathOf = (file: string) => join(dir, file);
  const tree: FileTree = {
    name: dir,
    pathOf,
    async list() {
      const out: string[] = [];
      const walk = async (d: string) => {
        for (const e of await readdir(d, { withFileTypes: true })) {
          const p = join(d, e.name);
          if (e.isDirectory()) await walk(p);
          else out.push(relative(dir, p).split('\\').join('/'));
        }
      };
      await walk(dir);
      return out;
    },
    has: async (file) => (await pathKind(pathOf(file))) === 'file',
    open: (file) => openFile(pathOf(file)),
    readText: (file) => readFile(pathOf(file), 'utf8'),
    async writeFile(file, bytes) {
      const sink = await tree.createSink!(file);
      try {
        await sink.write(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes);
        await sink.commit();
      } catch (e) {
        await sink.abort();
        throw e;
      }
    },
    async createSink(file) {
      await mkdir(dirname(pathOf(file)), { recursive: true });
      return createFileSink(pathOf(file));
    },
  };
  return tree;
}
