import { open, readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** fsync a directory so that renames in it are durable (a no-op where directories cannot be opened). */
export async function syncDir(dir: string): Promise<void> {
  let d: FileHandle | undefined;
  try {
    d = await open(dir, 'r');
    await d.sync();
  } catch {
    // Windows and some file systems refuse to open or fsync a directory; renames are still atomic
  } finally {
    await d?.close().catch(() => undefined);
  }
}

/** Write a file and fsync it (no rename: for files inside a directory that is itself renamed into place). */
export async function writeFileSynced(path: string, data: Uint8Array | string): Promise<void> {
  const fh = await open(path, 'w', 0o644);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Replace `path` atomically: write a temporary file beside it, fsync, rename over `path`, fsync the directory. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now().toString(36)}.tmp`);
  try {
    await writeFileSynced(tmp, data);
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await syncDir(dirname(path));
}

/** Remove a directory tree (missing is fine). */
export async function removeDir(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

/** fsync every file under `dir` and the directories themselves (files written by code that does not fsync). */
export async function syncTree(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await syncTree(p);
    else if (e.isFile()) {
      const fh = await open(p, 'r+');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
  }
  await syncDir(dir);
}
