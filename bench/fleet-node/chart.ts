/**
 * The fleet run's time series drawn as one small SVG (pure, no dependency): above, the store's
 * lag behind the fleet (p95 and max over the servers, seconds); below, each collector pod's
 * memory (RSS, MiB); the faults of a soak as labelled vertical lines across both.
 */
import type { Sample } from './samples.ts';

export interface Mark {
  /** Seconds since the install. */
  t: number;
  label: string;
}

const W = 960;
const PANEL_H = 220;
const LEFT = 64;
const RIGHT = 150;
const TOP = 56;
const GAP = 56;
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A round step: 1, 2 or 5 times a power of ten, at least `raw`. */
export function niceStep(raw: number): number {
  if (!(raw > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 5, 10].find((m) => m * p >= raw) ?? 10) * p;
}

/** An axis from 0 past `max` in about `ticks` round steps: the step and the top. */
export function niceAxis(max: number, ticks: number): { step: number; top: number } {
  const step = niceStep(max / ticks);
  return { step, top: Math.max(step, Math.ceil(max / step) * step) };
}

interface Series {
  name: string;
  color: string;
  points: Array<[number, number]>;
  dashed?: boolean;
}

function panel(title: string, unit: string, top: number, tMax: number, series: readonly Series[]): string {
  const { step, top: yMax } = niceAxis(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))), 4);
  const x = (t: number): number => LEFT + ((W - LEFT - RIGHT) * t) / tMax;
  const y = (v: number): number => top + PANEL_H - (PANEL_H * v) / yMax;
  const out = [`<text x="${LEFT}" y="${top - 10}" font-weight="bold">${esc(title)}</text>`];
  for (let v = 0; v <= yMax; v += step) {
    out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${LEFT - 6}" y="${y(v) + 4}" text-anchor="end">${+v.toPrecision(3)}</text>`);
  }
  out.push(`<text x="14" y="${top + PANEL_H / 2}" transform="rotate(-90 14 ${top + PANEL_H / 2})" text-anchor="middle">${esc(unit)}</text>`);
  out.push(`<rect x="${LEFT}" y="${top}" width="${W - LEFT - RIGHT}" height="${PANEL_H}" fill="none" stroke="#888"/>`);
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const d = s.points.map(([t, v], k) => `${k === 0 ? 'M' : 'L'}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.5"${s.dashed === true ? ' stroke-dasharray="5,3"' : ''}/>`);
    out.push(`<text x="${W - RIGHT + 8}" y="${top + 14 + 16 * i}" fill="${s.color}">${esc(s.name)}</text>`);
  });
  return out.join('\n');
}

/** The SVG document. */
export function drawChart(title: string, samples: readonly Sample[], marks: readonly Mark[]): string {
  const { step: tStep, top: tMax } = niceAxis(Math.max(60, ...samples.map((s) => s.t), ...marks.map((m) => m.t)), 8);
  const pods = [...new Set(samples.flatMap((s) => s.pods.map((p) => p.pod)))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const lag: Series[] = [
    { name: 'lag p95', color: COLORS[0]!, points: samples.map((s) => [s.t, s.lagP95]) },
    { name: 'lag max', color: COLORS[3]!, points: samples.map((s) => [s.t, s.lagMax]), dashed: true },
  ];
  const rss: Series[] = pods.map((pod, i) => ({
    name: pod,
    color: COLORS[i % COLORS.length]!,
    points: samples.flatMap((s) => s.pods.filter((p) => p.pod === pod).map((p): [number, number] => [s.t, p.rssMiB])),
  }));
  const top2 = TOP + PANEL_H + GAP;
  const height = top2 + PANEL_H + 48;
  const x = (t: number): number => LEFT + ((W - LEFT - RIGHT) * t) / tMax;
  const axis: string[] = [];
  for (let t = 0; t <= tMax; t += tStep) {
    axis.push(`<text x="${x(t)}" y="${top2 + PANEL_H + 18}" text-anchor="middle">${+t.toPrecision(3)}</text>`);
  }
  axis.push(`<text x="${LEFT + (W - LEFT - RIGHT) / 2}" y="${top2 + PANEL_H + 38}" text-anchor="middle">seconds since helm install</text>`);
  const faults = marks.map(
    (m) =>
      `<line x1="${x(m.t)}" x2="${x(m.t)}" y1="${TOP}" y2="${top2 + PANEL_H}" stroke="#999" stroke-dasharray="2,3"/>` +
      `<text x="${x(m.t) + 3}" y="${TOP + 4}" font-size="10" fill="#555" transform="rotate(90 ${x(m.t) + 3} ${TOP + 4})">${esc(m.label)}</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="20" font-size="15">${esc(title)}</text>`,
    panel('store lag behind the fleet (newest stored marker per server)', 'seconds', TOP, tMax, lag),
    panel('collector pods: RSS (collector + sidecar)', 'MiB', top2, tMax, rss),
    ...axis,
    ...faults,
    '</svg>',
    '',
  ].join('\n');
}
