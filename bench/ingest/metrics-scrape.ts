/**
 * Reads the collector's /metrics (Prometheus text format) into samples the benchmark sums and
 * compares. Only what the benchmark needs: name, labels, value; no histograms interpretation.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /\b([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheusText(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Fetches and parses `url` (the collector's /metrics), failing after `timeoutMs`. */
export async function scrape(url: string, timeoutMs = 5_000): Promise<Sample[]> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return parsePrometheusText(await res.text());
}

/** Sum of every sample named `name` (all label sets). */
export function sum(samples: readonly Sample[], name: string): number {
  let s = 0;
  for (const x of samples) if (x.name === name) s += x.value;
  return s;
}

/** The value of the one unlabelled sample `name`, or NaN. */
export function value(samples: readonly Sample[], name: string): number {
  return samples.find((x) => x.name === name)?.value ?? NaN;
}

/** Number of samples named `name` whose value is `v`. */
export function countEqual(samples: readonly Sample[], name: string, v: number): number {
  return samples.filter((x) => x.name === name && x.value === v).length;
}
