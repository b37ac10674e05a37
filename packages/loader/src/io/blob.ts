// Browser-side trees and sources: a picked File/Blob, the files of a folder (or several files) a user picked,
// and files in memory (what a page writes before offering them as downloads or storing them).
import { isBlobLike, type BlobLike, type ByteSink, type ByteSource, type FileTree } from './source';

/** A `ByteSource` over a Blob or File (reads are `slice().arrayBuffer()`, so a large file is never read whole). */
export function blobSource(blob: BlobLike, name = (blob as { name?: string }).name ?? 'blob'): ByteSource {
  return {
    name,
    size: blob.size,
    async read(into, position) {
      if (position >= blob.size) return 0;
      const end = Math.min(blob.size, position + into.byteLength);
      const bytes = new Uint8Array(await blob.slice(position, end).arrayBuffer());
      into.set(bytes);
      return bytes.byteLength;
    },
    async close() {},
  };
}

/** A `ByteSource` over bytes in memory. */
export function bytesSource(bytes: Uint8Array, name: string): ByteSource {
  return {
    name,
    size: bytes.byteLength,
    async read(into, position) {
      if (position >= bytes.byteLength) return 0;
      const part = bytes.subarray(position, Math.min(bytes.byteLength, position + into.byteLength));
      into.set(part);
      return part.byteLength;
    },
    async close() {},
  };
}

/** A picked file: its name and, from a folder picker, its path inside the picked folder. */
export interface PickedFile extends BlobLike {
  readonly name: string;
  readonly webkitRelativePath?: string;
}

/**
 * A read-only tree over files a user picked: from a folder picker (`<input webkitdirectory>`, names are the paths
 * under the picked folder) or a multi-file picker (names are the file names). Files from both can be mixed.
 */
export function pickedFilesTree(files: Iterable<PickedFile>, name?: string): FileTree & { readonly files: ReadonlyMap<string, PickedFile> } {
  const map = new Map<string, PickedFile>();
  let root: string | undefined;
  for (const f of files) {
    const rel = f.webkitRelativePath || f.name;
    const parts = rel.split('/');
    if (parts.length > 1) root ??= parts[0];
    map.set(parts.length > 1 ? parts.slice(1).join('/') : rel, f);
  }
  return blobTree(map, name ?? root ?? 'picked files');
}

/** A read-only tree over named blobs. */
export function blobTree<B extends BlobLike>(map: ReadonlyMap<string, B>, name: string): FileTree & { readonly files: ReadonlyMap<string, B> } {
  const get = (file: string) => {
    const b = map.get(file);
    if (!b) throw new Error(`${name}/${file}: no such file`);
    return b;
  };
  return {
    name,
    files: map,
    pathOf: (file) => `${name}/${file}`,
    list: async () => [...map.keys()],
    has: async (file) => map.has(file),
    open: async (file) => blobSource(get(file), `${name}/${file}`),
    readText: (file) => get(file).text(),
  };
}

/** A writable tree in memory; `files` holds what was written (e.g. to offer as downloads). */
export function memoryTree(name: string, initial?: Iterable<[string, Uint8Array]>): FileTree & { readonly files: Map<string, Uint8Array> } {
  const files = new Map<string, Uint8Array>(initial ?? []);
  const utf8 = new TextEncoder();
  const get = (file: string) => {
    const b = files.get(file);
    if (!b) throw new Error(`${name}/${file}: no such file`);
    return b;
  };
  return {
    name,
    files,
    pathOf: (file) => `${name}/${file}`,
    list: async () => [...files.keys()],
    has: async (file) => files.has(file),
    open: async (file) => bytesSource(get(file), `${name}/${file}`),
    readText: async (file) => new TextDecoder().decode(get(file)),
    async writeFile(file, bytes) {
      files.set(file, typeof bytes === 'string' ? utf8.encode(bytes) : bytes.slice());
    },
    async createSink(file): Promise<ByteSink> {
      const parts: Uint8Array[] = [];
      return {
        name: `${name}/${file}`,
        async write(b) {
          parts.push(b.slice());
        },
        async commit() {
          const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
          let o = 0;
          for (const p of parts) {
            out.set(p, o);
            o += p.byteLength;
          }
          files.set(file, out);
        },
        async abort() {
          parts.length = 0;
        },
      };
    },
  };
}

export { isBlobLike };
