import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** Appends one JSON object per line to a file (the training metrics log). Writes are synchronous and small. */
export class MetricsWriter {
  private fd: number | null;

  /**
   * Open `path` for appending. With `keepUpToStep`, lines whose `step` is greater are removed first (a resumed
   * run rewrites the steps that were lost with the crash instead of logging them twice).
   */
  constructor(
    readonly path: string,
    opts: { keepUpToStep?: number } = {},
  ) {
    mkdirSync(dirname(path), { recursive: true });
    if (opts.keepUpToStep !== undefined && existsSync(path)) {
      const kept = readFileSync(path, 'utf8')
        .split('\n')
        .filter((l) => {
          if (!l.trim()) return false;
          try {
            const s = (JSON.parse(l) as { step?: unknown }).step;
            return typeof s !== 'number' || s <= opts.keepUpToStep!;
          } catch {
            return false;
          }
        });
      const tmp = `${path}.${process.pid}.tmp`;
      const fd = openSync(tmp, 'w');
      writeSync(fd, kept.length ? kept.join('\n') + '\n' : '');
      fsyncSync(fd);
      closeSync(fd);
      renameSync(tmp, path);
    }
    this.fd = openSync(path, 'a');
  }

  /** Append one record. */
  write(record: Record<string, unknown>): void {
    if (this.fd === null) return;
    writeSync(this.fd, JSON.stringify(record) + '\n');
  }

  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
  }
}

/** Read a metrics JSONL file back (one object per line). */
export function readMetrics(path: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
