/** How progress is shown: a redrawn bar (terminals), periodic lines (logs, pipes) or nothing. */
export type ProgressMode = 'bar' | 'plain' | 'none';

export interface ProgressOptions {
  /** Shown first (`train`, `finetune`, `eval`). */
  label: string;
  /** Steps in all. */
  total: number;
  /** Where to draw (default stderr). */
  stream?: NodeJS.WriteStream;
  /** Default: `RUSTY_PROGRESS` (bar | plain | none), else a bar on a TTY and lines otherwise. */
  mode?: ProgressMode;
  /** Plain mode: a line every this many steps (default total / 20), and at least every 10 s. */
  every?: number;
  /** Name of the per-second rate (default `tok/s`). */
  unit?: string;
}

export interface ProgressUpdate {
  step: number;
  loss?: number;
  /** Tokens (or items) processed by this update, for the rate. */
  tokens?: number;
  lr?: number;
}

/** `1.2s`, `3m05s`, `1h02m`. */
export function fmtDuration(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '?';
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** `950`, `12.3k`, `4.5M`. */
export function fmtCount(n: number): string {
  if (!Number.isFinite(n)) return '?';
  if (n < 1000) return n.toFixed(n < 10 && n % 1 ? 1 : 0);
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 2 : 1)}k`;
  if (n < 1e9) return `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1)}M`;
  return `${(n / 1e9).toFixed(2)}B`;
}

export function progressMode(stream: NodeJS.WriteStream = process.stderr): ProgressMode {
  const env = process.env.RUSTY_PROGRESS;
  if (env === 'bar' || env === 'plain' || env === 'none') return env;
  return stream.isTTY ? 'bar' : 'plain';
}

/**
 * A live progress display: step, loss, throughput and ETA. Rates and the ETA are measured from the first update
 * on (the first step includes compiling the GPU kernels), so they settle after a few steps.
 */
export class Progress {
  readonly mode: ProgressMode;
  private readonly stream: NodeJS.WriteStream;
  private readonly every: number;
  private readonly t0 = performance.now();
  private first: { step: number; t: number; tokens: number } | null = null;
  private tokens = 0;
  private last: ProgressUpdate | null = null;
  private lastDraw = 0;
  private lastLineStep = -Infinity;
  private lastLineT = 0;
  private drawn = false;

  constructor(private readonly o: ProgressOptions) {
    this.stream = o.stream ?? process.stderr;
    this.mode = o.mode ?? progressMode(this.stream);
    this.every = Math.max(1, o.every ?? Math.round(o.total / 20));
  }

  /** Seconds since the progress started. */
  get elapsed(): number {
    return (performance.now() - this.t0) / 1000;
  }

  /** Throughput since the first update (per second). */
  get rate(): number {
    if (!this.first || !this.last || this.last.step === this.first.step) return NaN;
    const dt = (performance.now() - this.first.t) / 1000;
    return dt > 0 ? (this.tokens - this.first.tokens) / dt : NaN;
  }

  /** Estimated seconds to `total`. */
  get eta(): number {
    const u = this.last;
    if (!this.first || !u || u.step <= this.first.step) return NaN;
    const perStep = (performance.now() - this.first.t) / 1000 / (u.step - this.first.step);
    return perStep * Math.max(0, this.o.total - u.step);
  }

  update(u: ProgressUpdate): void {
    this.tokens += u.tokens ?? 0;
    if (!this.first) this.first = { step: u.step, t: performance.now(), tokens: this.tokens };
    this.last = u;
    if (this.mode === 'none') return;
    const now = performance.now();
    if (this.mode === 'bar') {
      if (now - this.lastDraw > 100 || u.step >= this.o.total) this.draw();
      return;
    }
    if (u.step - this.lastLineStep >= this.every || now - this.lastLineT > 10_000 || u.step >= this.o.total) {
      this.lastLineStep = u.step;
      this.lastLineT = now;
      this.stream.write(this.line() + '\n');
    }
  }

  private stats(): string {
    const u = this.last;
    const parts: string[] = [];
    if (u?.loss !== undefined) parts.push(`loss ${fmtLoss(u.loss)}`);
    if (u?.lr !== undefined) parts.push(`lr ${u.lr.toExponential(2)}`);
    const r = this.rate;
    if (Number.isFinite(r)) parts.push(`${fmtCount(r)} ${this.o.unit ?? 'tok/s'}`);
    parts.push(`elapsed ${fmtDuration(this.elapsed)}`);
    const eta = this.eta;
    if (u && u.step < this.o.total) parts.push(`ETA ${Number.isFinite(eta) ? fmtDuration(eta) : '?'}`);
    return parts.join('  ');
  }

  /** The plain-mode line. */
  line(): string {
    const step = this.last?.step ?? 0;
    return `${this.o.label} step ${step}/${this.o.total}  ${this.stats()}`;
  }

  private draw(): void {
    this.lastDraw = performance.now();
    const step = this.last?.step ?? 0;
    const cols = this.stream.columns || 100;
    const counter = `${String(step).padStart(String(this.o.total).length)}/${this.o.total}`;
    const stats = this.stats();
    const room = cols - this.o.label.length - counter.length - stats.length - 8;
    const width = Math.max(0, Math.min(30, room));
    const frac = this.o.total ? Math.min(1, step / this.o.total) : 1;
    const full = Math.round(frac * width);
    const bar = width >= 5 ? `[${'#'.repeat(full)}${'-'.repeat(width - full)}] ` : '';
    const text = `${this.o.label} ${bar}${counter}  ${stats}`;
    this.stream.write(`\r\x1b[2K${text.slice(0, cols - 1)}`);
    this.drawn = true;
  }

  /** Print a line (an evaluation, a checkpoint) without breaking the bar. */
  log(line: string): void {
    if (this.mode === 'none') return;
    if (this.mode === 'bar' && this.drawn) {
      this.stream.write(`\r\x1b[2K${line}\n`);
      this.draw();
    } else this.stream.write(line + '\n');
  }

  /** End the display (the bar's line is finished with a newline). */
  finish(): void {
    if (this.mode === 'bar' && this.drawn) {
      this.draw();
      this.stream.write('\n');
      this.drawn = false;
    } else if (this.mode === 'plain' && this.last && this.last.step !== this.lastLineStep) this.stream.write(this.line() + '\n');
  }
}

export function fmtLoss(x: number): string {
  return Number.isFinite(x) ? x.toFixed(4) : String(x);
}
