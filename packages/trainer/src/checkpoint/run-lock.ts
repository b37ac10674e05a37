// A lock file that marks a directory as in use by one run for the run's lifetime. A lock left by a process
// that is gone (a crash, SIGKILL) is taken over; a live one is an error naming its pid. Node only.
import { closeSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { RunLockError } from '../errors';

/** The lock file a run keeps in its output directory. */
export const RUN_LOCK_FILE = '.rusty-run.lock';

/** What a lock file holds. */
export interface RunLockHolder {
  pid: number;
  host: string;
  /** What holds it (e.g. 'rusty train'). */
  command: string;
  /** ISO time the lock was taken. */
  started: string;
}

/** A lock held by this process. */
export interface RunLock {
  path: string;
  /** Remove the lock (only if this process still holds it). Also done on process exit. */
  release(): void;
}

/** Whether process `pid` is alive on this machine. */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to another user
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The holder of `dir`'s lock, or null when there is no lock file (an unreadable one reads as a dead holder). */
export function readRunLock(dir: string): (RunLockHolder & { live: boolean }) | null {
  let text: string;
  try {
    text = readFileSync(join(dir, RUN_LOCK_FILE), 'utf8');
  } catch {
    return null;
  }
  try {
    const h = JSON.parse(text) as RunLockHolder;
    if (typeof h.pid !== 'number') throw new Error('no pid');
    // a lock taken on another machine (a shared file system) cannot be checked: it counts as live
    const live = h.host !== hostname() || (h.pid !== process.pid && processAlive(h.pid));
    return { ...h, live };
  } catch {
    return { pid: 0, host: '', command: '', started: '', live: false };
  }
}

function liveError(dir: string, h: RunLockHolder): RunLockError {
  return new RunLockError(
    `${dir} is in use by another run (${h.command || 'a process'}, pid ${h.pid}${h.host !== hostname() ? ` on ${h.host}` : ''}, started ${h.started}); ` +
      `wait for it to finish or stop it (a lock left by a crashed run is taken over by itself)`,
  );
}

/** Throw a `RunLockError` when another live run holds `dir` (nothing is written). */
export function checkRunLock(dir: string): void {
  const h = readRunLock(dir);
  if (h?.live) throw liveError(dir, h);
}

/**
 * Take `dir`'s run lock (creating `dir`). A lock of a process that is gone is taken over; a live one throws a
 * `RunLockError` naming its pid. The lock is released by `release()` or when the process exits.
 */
export async function acquireRunLock(dir: string, command: string): Promise<RunLock> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, RUN_LOCK_FILE);
  const me: RunLockHolder = { pid: process.pid, host: hostname(), command, started: new Date().toISOString() };
  const text = JSON.stringify(me) + '\n';
  let held = false;
  try {
    const fd = openSync(path, 'wx');
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
    held = true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  if (!held) {
    const h = readRunLock(dir);
    if (h?.live || (h && h.pid === process.pid)) throw liveError(dir, h);
    // stale: replace it atomically, then make sure no other process took it over at the same moment
    const tmp = `${path}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    await new Promise((r) => setTimeout(r, 20));
    const now = readRunLock(dir);
    if (!now || now.pid !== process.pid) throw liveError(dir, now ?? me);
  }
  const release = (): void => {
    process.off('exit', release);
    try {
      const h = JSON.parse(readFileSync(path, 'utf8')) as RunLockHolder;
      if (h.pid === process.pid && h.started === me.started) unlinkSync(path);
    } catch {
      // gone already
    }
  };
  process.on('exit', release);
  return { path, release };
}
