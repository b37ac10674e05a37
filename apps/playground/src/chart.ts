// The live loss curve: an SVG polyline over steps (raw loss faint, a smoothed line bold), redrawn per step.

const NS = 'http://www.w3.org/2000/svg';

/** Draw `points` ([step, loss]) into `svg` with the x axis spanning `total` steps. */
export function drawLossCurve(svg: SVGSVGElement, points: readonly [number, number][], total: number): void {
  const W = Math.max(320, Math.round(svg.clientWidth || 640));
  const H = 260;
  const pad = { l: 48, r: 12, t: 12, b: 28 };
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const el = (name: string, attrs: Record<string, string | number>, text?: string) => {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const finite = points.filter(([, l]) => Number.isFinite(l));
  const lo = finite.length ? Math.min(...finite.map(([, l]) => l)) : 0;
  const hi = finite.length ? Math.max(...finite.map(([, l]) => l)) : 1;
  const span = hi - lo || 1;
  const x = (s: number) => pad.l + ((W - pad.l - pad.r) * s) / Math.max(1, total);
  const y = (l: number) => pad.t + (H - pad.t - pad.b) * (1 - (l - lo) / span);
  for (let i = 0; i <= 4; i++) {
    const v = lo + (span * i) / 4;
    el('line', { x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v), class: 'grid' });
    el('text', { x: pad.l - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, v.toFixed(2));
  }
  for (let i = 0; i <= 4; i++) {
    const s = Math.round((total * i) / 4);
    el('text', { x: x(s), y: H - 8, class: 'tick', 'text-anchor': 'middle' }, String(s));
  }
  if (!finite.length) {
    el('text', { x: W / 2, y: H / 2, class: 'empty', 'text-anchor': 'middle' }, 'the loss curve appears here while training');
    return;
  }
  el('polyline', { points: finite.map(([s, l]) => `${x(s)},${y(l)}`).join(' '), class: 'raw' });
  let ema = finite[0]![1];
  const smooth = finite.map(([s, l]) => {
    ema = 0.85 * ema + 0.15 * l;
    return `${x(s)},${y(ema)}`;
  });
  el('polyline', { points: smooth.join(' '), class: 'smooth' });
}
