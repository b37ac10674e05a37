// The run lock and the ownership of checkpoint temp files, with real processes (no GPU needed).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunLockError } from '../errors';
import { saveCheckpoint } from './checkpoint';
import { acquireRunLock, checkRunLock, readRunLock, RUN_LOCK_FILE } from './run-lock';

let live: ChildProcess;
let dead: number;
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'rusty-lock-'));
  dirs.push(d);
  return d;
};

beforeAll(() => {
  live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  dead = spawnSync(process.execPath, ['-e', '']).pid!;
});
afterAll(() => {
  live.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const writeLock = (dir: string, pid: number) =>
  writeFileSync(join(dir, RUN_LOCK_FILE), JSON.stringify({ pid, host: hostname(), command: 'rusty train', started: '2026-11-24T00:00:00.000Z' }));

describe('run lock', () => {
  it('is held until released; a live holder is an error naming its pid; a dead holder is taken over', async () => {
    const dir = join(tmp(), 'out');
    const lock = await acquireRunLock(dir, 'rusty train');
    expect(readRunLock(dir)).toMatchObject({ pid: process.pid, command: 'rusty train', live: false });
    lock.release();
    expect(existsSync(join(dir, RUN_LOCK_FILE))).toBe(false);

    writeLock(dir, live.pid!);
    expect(() => checkRunLock(dir)).toThrow(RunLockError);
    await expect(acquireRunLock(dir, 'rusty finetune')).rejects.toThrow(new RegExp(`in use by another run \\(rusty train, pid ${live.pid},`));
    expect(JSON.parse(readFileSync(join(dir, RUN_LOCK_FILE), 'utf8')).pid).toBe(live.pid); // untouched

    writeLock(dir, dead);
    expect(() => checkRunLock(dir)).not.toThrow();
    const taken = await acquireRunLock(dir, 'rusty finetune');
    expect(readRunLock(dir)).toMatchObject({ pid: process.pid, command: 'rusty finetune' });
    taken.release();
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('checkpoint temp files', () => {
  it("a save removes leftovers of crashed saves but never another live run's save in progress", async () => {
    const root = tmp();
    const others = `.tmp-checkpoint-7-${live.pid}-0a1b2c3d`;
    const crashed = `.tmp-checkpoint-7-${dead}-0a1b2c3d`;
    const legacy = '.old-checkpoint-3-deadbeef';
    for (const d of [others, crashed, legacy]) mkdirSync(join(root, d));
    await saveCheckpoint(root, { step: 1, extra: { note: 'state only' } });
    expect(readdirSync(root).sort()).toEqual([others, 'checkpoint-1', 'latest'].sort());
  });
});
