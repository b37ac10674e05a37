// A loss-curve picture as a standalone SVG: axes with round-numbered ticks, labels, one polyline per series.

export interface Series {
  name: string;
  /** [x, y] points; non-finite values are skipped. */
  points: readonly (readonly [number, number])[];
  color: string;
  /** `line` (default), or `dots` joined by a thin line (evaluations). */
  style?: 'line' | 'dots' | 'faint';
}

export interface ChartOptions {
  title?: string;
  xLabel?: string;
  yLabel?: string;
  width?: number;
  height?: number;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Round tick positions covering [lo, hi] (about `n` of them, steps of 1, 2 or 5 times a power of ten). */
export function niceTicks(lo: number, hi: number, n = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) out.push(k === 0 ? 0 : Number((k * step).toPrecision(12)));
  return out;
}

function fmtTick(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1);
  return String(Number(v.toPrecision(4)));
}

/** Exponential moving average of the y values with bias correction (TensorBoard's smoothing). */
export function smooth(points: readonly (readonly [number, number])[], weight = 0.9): [number, number][] {
  let acc = 0;
  let n = 0;
  const out: [number, number][] = [];
  for (const [x, y] of points) {
    if (!Number.isFinite(y)) continue;
    n++;
    acc = weight * acc + (1 - weight) * y;
    out.push([x, acc / (1 - weight ** n)]);
  }
  return out;
}

/** An SVG line chart of the series (a loss curve by default). */
export function lineChartSvg(series: readonly Series[], o: ChartOptions = {}): string {
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  const m = { l: 64, r: 20, t: o.title ? 40 : 16, b: 52 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const pts = series.flatMap((s) => s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)));
  let [x0, x1] = pts.length ? [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))] : [0, 1];
  let [y0, y1] = pts.length ? [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))] : [0, 1];
  if (x1 <= x0) [x0, x1] = [x0 - 1, x1 + 1];
  if (y1 <= y0) [y0, y1] = [y0 - Math.max(0.5, Math.abs(y0) * 0.1), y1 + Math.max(0.5, Math.abs(y1) * 0.1)];
  const pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  if (y0 < 0 && Math.min(...pts.map((p) => p[1])) >= 0) y0 = 0;
  const X = (x: number) => m.l + ((x - x0) / (x1 - x0)) * pw;
  const Y = (y: number) => m.t + (1 - (y - y0) / (y1 - y0)) * ph;
  const f = (v: number) => v.toFixed(1);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect x="0" y="0" width="${W}" height="${H}" fill="#ffffff"/>`,
  ];
  if (o.title) out.push(`<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="600" fill="#222">${esc(o.title)}</text>`);
  // grid and ticks
  for (const t of niceTicks(y0, y1, 6)) {
    const y = f(Y(t));
    out.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#e6e6e6"/>`);
    out.push(`<text x="${m.l - 8}" y="${y}" text-anchor="end" dominant-baseline="middle" fill="#555">${fmtTick(t)}</text>`);
  }
  for (const t of niceTicks(x0, x1, 8)) {
    const x = f(X(t));
    out.push(`<line x1="${x}" y1="${m.t}" x2="${x}" y2="${m.t + ph}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${x}" y="${m.t + ph + 18}" text-anchor="middle" fill="#555">${fmtTick(t)}</text>`);
  }
  // axes
  out.push(`<line x1="${m.l}" y1="${m.t + ph}" x2="${m.l + pw}" y2="${m.t + ph}" stroke="#333"/>`);
  out.push(`<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${m.t + ph}" stroke="#333"/>`);
  if (o.xLabel) out.push(`<text x="${m.l + pw / 2}" y="${H - 10}" text-anchor="middle" fill="#333">${esc(o.xLabel)}</text>`);
  if (o.yLabel)
    out.push(`<text x="16" y="${m.t + ph / 2}" text-anchor="middle" fill="#333" transform="rotate(-90 16 ${m.t + ph / 2})">${esc(o.yLabel)}</text>`);
  // series
  for (const s of series) {
    const p = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (!p.length) continue;
    const poly = p.map(([x, y]) => `${f(X(x))},${f(Y(y))}`).join(' ');
    const style = s.style ?? 'line';
    if (style === 'faint') out.push(`<polyline fill="none" stroke="${s.color}" stroke-opacity="0.3" stroke-width="1" points="${poly}"/>`);
    else if (style === 'line') out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" stroke-linejoin="round" points="${poly}"/>`);
    else {
      if (p.length > 1) out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.5" stroke-dasharray="4 3" points="${poly}"/>`);
      for (const [x, y] of p) out.push(`<circle cx="${f(X(x))}" cy="${f(Y(y))}" r="3.5" fill="${s.color}"/>`);
    }
  }
  // legend
  const named = series.filter((s) => s.points.length && s.name);
  named.forEach((s, i) => {
    const y = m.t + 14 + i * 18;
    const x = m.l + pw - 150;
    out.push(
      s.style === 'dots'
        ? `<circle cx="${x + 10}" cy="${y}" r="3.5" fill="${s.color}"/>`
        : `<line x1="${x}" y1="${y}" x2="${x + 20}" y2="${y}" stroke="${s.color}" stroke-width="${s.style === 'faint' ? 1 : 2}" ${s.style === 'faint' ? 'stroke-opacity="0.4"' : ''}/>`,
    );
    out.push(`<text x="${x + 28}" y="${y}" dominant-baseline="middle" fill="#333">${esc(s.name)}</text>`);
  });
  out.push('</svg>', '');
  return out.join('\n');
}

/** The loss-curve chart of training metrics records (`kind: 'train'` and `kind: 'eval'` lines of metrics JSONL). */
export function lossCurveSvg(records: readonly Record<string, unknown>[], title: string): string {
  const train: [number, number][] = [];
  const evals: [number, number][] = [];
  for (const r of records) {
    if (typeof r.step !== 'number' || typeof r.loss !== 'number') continue;
    if (r.kind === 'eval') evals.push([r.step, r.loss]);
    else if (r.kind === 'train' || r.kind === undefined) train.push([r.step, r.loss]);
  }
  const series: Series[] = [];
  if (train.length > 1) {
    series.push({ name: 'train loss', points: train, color: '#1f77b4', style: 'faint' });
    series.push({ name: 'train loss (smoothed)', points: smooth(train, train.length > 50 ? 0.9 : 0.6), color: '#1f77b4' });
  } else series.push({ name: 'train loss', points: train, color: '#1f77b4', style: 'dots' });
  if (evals.length) series.push({ name: 'validation loss', points: evals, color: '#d62728', style: 'dots' });
  return lineChartSvg(series, { title, xLabel: 'optimizer step', yLabel: 'cross-entropy loss (nats/token)' });
}
