// A FileTree over a directory of the browser's origin-private file system (OPFS): durable across reloads.
// Writes go through `createWritable`, whose data only replaces the file when the stream is closed.
import { blobSource } from './blob';
import type { ByteSink, FileTree } from './source';

/** A writable tree over an OPFS directory handle (`await navigator.storage.getDirectory()` or a folder in it). */
export function opfsTree(root: FileSystemDirectoryHandle, name = 'opfs:'): FileTree {
  const split = (file: string) => file.split('/').filter(Boolean);
  async function dirFor(parts: string[], create: boolean): Promise<FileSystemDirectoryHandle> {
    let d = root;
    for (const p of parts) d = await d.getDirectoryHandle(p, { create });
    return d;
  }
  async function fileHandle(file: string, create = false): Promise<FileSystemFileHandle> {
    const parts = split(file);
    const d = await dirFor(parts.slice(0, -1), create);
    return d.getFileHandle(parts.at(-1)!, { create });
  }
  async function walk(d: FileSystemDirectoryHandle, prefix: string, out: string[]): Promise<void> {
    for await (const [n, h] of (d as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }).entries()) {
      if (h.kind === 'file') out.push(prefix + n);
      else await walk(h as FileSystemDirectoryHandle, `${prefix}${n}/`, out);
    }
  }
  const tree: FileTree = {
    name,
    pathOf: (file) => `${name}/${file}`,
    async list() {
      const out: string[] = [];
      await walk(root, '', out);
      return out;
    },
    async has(file) {
      try {
        await fileHandle(file);
        return true;
      } catch {
        return false;
      }
    },
    async open(file) {
      return blobSource(await (await fileHandle(file)).getFile(), `${name}/${file}`);
    },
    async readText(file) {
      return (await (await fileHandle(file)).getFile()).text();
    },
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
    async createSink(file): Promise<ByteSink> {
      const w = await (await fileHandle(file, true)).createWritable({ keepExistingData: false });
      return {
        name: `${name}/${file}`,
        write: (b) => w.write(b as Uint8Array<ArrayBuffer>),
        commit: () => w.close(),
        abort: () => w.abort(),
      };
    },
  };
  return tree;
}

/** Remove a folder (and everything in it) from an OPFS directory; no error when it is absent. */
export async function opfsRemove(root: FileSystemDirectoryHandle, folder: string): Promise<void> {
  try {
    await root.removeEntry(folder, { recursive: true });
  } catch (e) {
    if ((e as DOMException).name !== 'NotFoundError') throw e;
  }
}
