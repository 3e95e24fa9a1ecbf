/**
 * Declaring the collector's metrics one per line: a name after the prefix, a help text, label
 * names (none for a process-wide series) and, for a histogram, its buckets, all in the same
 * registries. The objects are prom-client's; instruments.ts, snapshot-metrics.ts and
 * metrics.ts declare theirs through one MetricFactory each.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export class MetricFactory {
  private readonly registers: Registry[];
  private readonly prefix: string;

  constructor(registers: Registry[], prefix: string) {
    this.registers = registers;
    this.prefix = prefix;
  }

  counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name: this.prefix + name, help, labelNames, registers: this.registers });
  }

  /** A gauge; `collect` runs at each scrape, before the values are read. */
  gauge<L extends string = string>(name: string, help: string, labelNames: readonly L[] = [], collect?: () => void): Gauge<L> {
    return new Gauge({ name: this.prefix + name, help, labelNames, registers: this.registers, ...(collect === undefined ? {} : { collect }) });
  }

  histogram<L extends string = string>(name: string, help: string, buckets: readonly number[], labelNames: readonly L[] = []): Histogram<L> {
    return new Histogram({ name: this.prefix + name, help, labelNames, buckets: [...buckets], registers: this.registers });
  }

  /** A gauge without labels set to what `read` returns at each scrape. */
  scrapedGauge(name: string, help: string, read: () => number): Gauge {
    return new Gauge({
      name: this.prefix + name,
      help,
      registers: this.registers,
      collect() {
        this.set(read());
      },
    });
  }

  /**
   * A counter without labels that follows a total kept elsewhere (`read`; undefined while there
   * is none): at each scrape it advances by what the total gained since the last one.
   */
  scrapedTotal(name: string, help: string, read: () => number | undefined): Counter {
    let last = 0;
    return new Counter({
      name: this.prefix + name,
      help,
      registers: this.registers,
      collect() {
        const n = read() ?? last;
        if (n > last) this.inc(n - last);
        last = n;
      },
    });
  }
}
