/**
 * The Prometheus text exposition (format 0.0.4) of a prom-client registry: the text
 * Registry#metrics() makes, byte for byte, at a fraction of its cost for many series.
 *
 * prom-client formats every series' labels afresh at each scrape, escaping each value with
 * regular expressions and caching an empty shared-label set per series in a WeakMap (a fresh
 * `{}` each time, so every lookup misses). With 50 targets (about 1,000 series) that was 3.8 ms
 * and 2.3 MB of garbage a scrape, 38 ms at 1000 targets: the event loop held that long each
 * time (docs/benchmarks.md, the ingest section's scrape; issue 15). Here a series' label text is
 * made once and kept with the label object prom-client stores for it, which lives as long as
 * the series: counters and gauges hand back those objects at every scrape, histograms their
 * bucket series' shared labels. Only the numbers are formatted at each scrape.
 *
 * Pure: reads the metric objects it is given; the registry's own collect() hooks run in their
 * get(), as with Registry#metrics().
 */

/** A label set as prom-client keeps it. */
type Labels = Readonly<Record<string, string | number | undefined>>;

/** One series' value, as prom-client's get() (or a histogram's getForPromString()) lists it. */
export interface ExposedValue {
  value: number;
  labels?: Labels;
  /** A histogram bucket's series labels (its `labels` then hold only `le`, made afresh each scrape). */
  sharedLabels?: Labels;
  metricName?: string;
}

/** A metric as prom-client's get() returns it. */
export interface ExposedMetric {
  name: string;
  help: string;
  type: string;
  values?: readonly ExposedValue[];
}

/** A registered prom-client metric: get(), and for histograms getForPromString() (what Registry#metrics() reads). */
export interface ExposedSource {
  get(): Promise<ExposedMetric>;
}

interface PromStringSource {
  getForPromString(): Promise<ExposedMetric>;
}

/** Formats registries' metrics; keeps each series' label text while its label object lives. */
export class Exposition {
  private readonly labelText = new WeakMap<Labels, string>();

  /**
   * The exposition of `metrics` (a registry's getMetricsAsArray(), whose type prom-client
   * declares without the get() every metric it holds has), as Registry#metrics() makes it.
   */
  async text(registered: readonly object[]): Promise<string> {
    const metrics = registered.map(exposedSource);
    const read = await Promise.all(metrics.map((m) => (hasPromString(m) ? m.getForPromString() : m.get())));
    const lines: string[] = [];
    for (let i = 0; i < read.length; i++) {
      if (i > 0) lines.push('');
      this.metricLines(read[i]!, lines);
    }
    lines.push('');
    return lines.join('\n');
  }

  private metricLines(metric: ExposedMetric, lines: string[]): void {
    const name = escapeText(metric.name);
    lines.push(`# HELP ${name} ${escapeText(metric.help)}`, `# TYPE ${name} ${metric.type}`);
    for (const v of metric.values ?? []) {
      const shared = v.sharedLabels;
      let labels: string;
      if (shared !== undefined && hasKeys(shared)) {
        // A bucket: its own labels (le) are new each scrape; the series' are not.
        const own = labelList(v.labels ?? EMPTY, shared);
        const common = this.cached(shared);
        labels = own === '' ? common : common === '' ? own : `${own},${common}`;
      } else {
        labels = v.labels === undefined ? '' : this.cached(v.labels);
      }
      lines.push(`${v.metricName ?? name}${labels === '' ? '' : `{${labels}}`} ${valueText(v.value)}`);
    }
  }

  /** The label text of a series' label object, made the first time it is seen. */
  private cached(labels: Labels): string {
    let text = this.labelText.get(labels);
    if (text === undefined) {
      text = labelList(labels, null);
      this.labelText.set(labels, text);
    }
    return text;
  }
}

const EMPTY: Labels = Object.freeze({});

function exposedSource(m: object): ExposedSource {
  if (typeof (m as Partial<ExposedSource>).get !== 'function') throw new TypeError('a registered metric without get()');
  return m as ExposedSource;
}

function hasPromString(m: ExposedSource): m is ExposedSource & PromStringSource {
  return typeof (m as Partial<PromStringSource>).getForPromString === 'function';
}

function hasKeys(o: Labels): boolean {
  for (const _ in o) return true;
  return false;
}

/** `name="value"` pairs joined by commas, leaving out names `exclude` has (prom-client's formatLabels). */
function labelList(labels: Labels, exclude: Labels | null): string {
  let out = '';
  for (const [name, value] of Object.entries(labels)) {
    if (exclude !== null && Object.hasOwn(exclude, name)) continue;
    const text = typeof value === 'string' ? escapeText(value).replaceAll('"', '\\"') : String(value);
    out += `${out === '' ? '' : ','}${name}="${text}"`;
  }
  return out;
}

/** Backslashes and newlines escaped, as the format requires of help texts and label values. */
function escapeText(s: string): string {
  return s.replaceAll('\\', '\\\\').replaceAll('\n', '\\n');
}

/** A sample's value as prom-client writes it (its NaN is spelled `Nan`, which Prometheus reads case-insensitively). */
function valueText(v: number): string {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  return `${v}`;
}
