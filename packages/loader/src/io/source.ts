// The source/sink interface every loader reader and writer goes through, so that the same code reads a Node file,
// a browser File/Blob picked by the user, or a file in the browser's origin-private file system (OPFS).
// Nothing here imports `node:*`: the Node implementation (`./node`) is imported dynamically where a path is given.

/** Random-access reads of one file's bytes. */
export interface ByteSource {
  /** What messages call the file: a path, or a picked file's relative name. */
  readonly name: string;
  /** Size in bytes. */
  readonly size: number;
  /** Read up to `into.byteLength` bytes at `position` into `into`; resolves to the count read (0 past the end). */
  read(into: Uint8Array, position: number): Promise<number>;
  /** Release the file (later reads may fail). */
  close(): Promise<void>;
}

/** Sequential writes of one new file that becomes visible under its name only when committed. */
export interface ByteSink {
  readonly name: string;
  write(bytes: Uint8Array): Promise<void>;
  /** Make the file durable and visible under its final name. */
  commit(): Promise<void>;
  /** Drop what was written (the final name is untouched). */
  abort(): Promise<void>;
}

/**
 * A directory of files: a Node directory, the files a user picked in a browser (a folder or several files), an
 * OPFS directory, or files in memory. Names are relative, with `/` between folders.
 */
export interface FileTree {
  /** What messages call the directory. */
  readonly name: string;
  /** The name messages use for a file in the tree (for a Node directory: the joined path). */
  pathOf(file: string): string;
  /** Every file name, recursively. */
  list(): Promise<string[]>;
  /** Whether a file (not a folder) of that name exists. */
  has(file: string): Promise<boolean>;
  /** Open a file for reading; rejects when it is missing or unreadable. */
  open(file: string): Promise<ByteSource>;
  /** A file's text (UTF-8). */
  readText(file: string): Promise<string>;
  /** Write a whole file, replacing any old one only once the new one is complete; absent on read-only trees. */
  writeFile?(file: string, bytes: Uint8Array | string): Promise<void>;
  /** A sink for a new file, committed under its name at the end; absent on read-only trees. */
  createSink?(file: string): Promise<ByteSink>;
}

/** A Blob or File, without needing the DOM types at run time. */
export interface BlobLike {
  readonly size: number;
  slice(start?: number, end?: number): { arrayBuffer(): Promise<ArrayBuffer> };
  text(): Promise<string>;
}

export const isBlobLike = (x: unknown): x is BlobLike =>
  typeof x === 'object' && x !== null && typeof (x as BlobLike).slice === 'function' && typeof (x as BlobLike).size === 'number' && typeof (x as BlobLike).text === 'function';

export const isFileTree = (x: unknown): x is FileTree =>
  typeof x === 'object' && x !== null && typeof (x as FileTree).open === 'function' && typeof (x as FileTree).list === 'function';

export const isByteSource = (x: unknown): x is ByteSource =>
  typeof x === 'object' && x !== null && typeof (x as ByteSource).read === 'function' && typeof (x as ByteSource).size === 'number';

/** Read the whole of a source. */
export async function readAll(src: ByteSource): Promise<Uint8Array> {
  const out = new Uint8Array(src.size);
  let done = 0;
  while (done < out.byteLength) {
    const n = await src.read(out.subarray(done), done);
    if (n === 0) break;
    done += n;
  }
  return done === out.byteLength ? out : out.subarray(0, done);
}

/** The directory part of a `/`-separated name ('' for a top-level file). */
export const dirOf = (file: string): string => (file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '');

/** Join `/`-separated name parts, resolving `.` and refusing `..` that leaves the tree (returns null). */
export function joinName(...parts: string[]): string | null {
  const out: string[] = [];
  for (const seg of parts.join('/').split(/[\\/]+/)) {
    if (!seg || seg === '.') continue;
    if (seg === '..') {
      if (!out.length) return null;
      out.pop();
    } else out.push(seg);
  }
  return out.join('/');
}
