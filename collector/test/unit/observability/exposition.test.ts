// The collector's /metrics text (exposition.ts) against prom-client's own Registry#metrics()
// over the same registry: byte for byte, for counters, gauges, histograms and summaries with
// and without labels, label values that need escaping (backslash, newline, quote) or are not
// ASCII, NaN and infinities, series removed and added again, gauges set with a new label object
// each time, and scrape after scrape as the values change (the kept label texts must follow).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';

import { Exposition } from '../../../src/observability/exposition.ts';
import { createCollectorMetrics } from '../../../src/observability/metrics.ts';

const labelValue = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('a\\b', 'line\nbreak', 'say "hi"', '\\"\n', 'żółw', ''));
const number = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(Number.NaN, Infinity, -Infinity, 0, -0));

/** One change to the registry: the operations a collector makes. */
const step = fc.oneof(
  fc.record({ op: fc.constant('inc' as const), target: labelValue, by: fc.nat({ max: 1000 }) }),
  fc.record({ op: fc.constant('set' as const), target: labelValue, value: number }),
  fc.record({ op: fc.constant('observe' as const), target: labelValue, value: fc.double({ min: 0, max: 100, noNaN: true }) }),
  fc.record({ op: fc.constant('remove' as const), target: labelValue }),
  fc.record({ op: fc.constant('scrape' as const) }),
);

test('the text is Registry#metrics() byte for byte, scrape after scrape', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { maxLength: 40 }), fc.constantFrom('help\\ with \\ and\nnewline', 'plain help'), async (steps, help) => {
      const registry = new Registry();
      const registers = [registry];
      const bytes = new Counter({ name: 't_bytes_total', help, labelNames: ['target', 'instance'], registers });
      const plain = new Counter({ name: 't_plain_total', help: 'no labels', registers });
      const lag = new Gauge({ name: 't_lag', help, labelNames: ['target'], registers });
      const rows = new Histogram({ name: 't_rows', help, labelNames: ['target'], buckets: [1, 10, 100], registers });
      const bare = new Histogram({ name: 't_bare', help, buckets: [0.5, 5], registers });
      const quantiles = new Summary({ name: 't_q', help, labelNames: ['target'], percentiles: [0.5, 0.9], registers });
      new Gauge({ name: 't_never', help, labelNames: ['target'], registers });
      const exposition = new Exposition();
      const labelsOf = new Map<string, { target: string; instance: string }>();
      for (const s of steps) {
        switch (s.op) {
          case 'inc': {
            let labels = labelsOf.get(s.target);
            if (labels === undefined) labelsOf.set(s.target, (labels = { target: s.target, instance: 'main' }));
            bytes.inc(labels, s.by);
            plain.inc(s.by);
            break;
          }
          case 'set':
            lag.set({ target: s.target }, s.value);
            break;
          case 'observe':
            rows.observe({ target: s.target }, s.value);
            bare.observe(s.value);
            quantiles.observe({ target: s.target }, s.value);
            break;
          case 'remove': {
            const labels = labelsOf.get(s.target);
            if (labels !== undefined) bytes.remove(labels);
            labelsOf.delete(s.target);
            lag.remove({ target: s.target });
            rows.remove({ target: s.target });
            break;
          }
          case 'scrape':
            assert.equal(await exposition.text(registry.getMetricsAsArray()), await registry.metrics());
            break;
        }
      }
      assert.equal(await exposition.text(registry.getMetricsAsArray()), await registry.metrics());
    }),
    { numRuns: 300 },
  );
});

test("the Node.js runtime metrics and the collector's own, with 50 targets, are prom-client's text", async () => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'x_' });
  const exposition = new Exposition();
  // The runtime's values move between two reads: compare each against a registry read right after.
  const ours = await exposition.text(registry.getMetricsAsArray());
  const theirs = await registry.metrics();
  const shape = (text: string): string[] => text.split('\n').map((line) => line.replace(/ [^ ]+$/, ''));
  assert.deepEqual(shape(ours), shape(theirs));

  // A fixed clock: lag_seconds is read at scrape time.
  const metrics = createCollectorMetrics({ defaultMetrics: false, now: () => 1_800_000_000_000 });
  for (let i = 0; i < 50; i++) {
    metrics.readBytes(`db${i}`, 'main', 1000 + i);
    metrics.events(`db${i}`, 'main', 'statement', i);
    metrics.lagBytes(`db${i}`, 'main', i);
    metrics.newestCommittedEntry(`db${i}`, 'main', 1_799_999_999_000 - i);
  }
  metrics.batchCommitted(100, 1e6, 0.01, 1.5);
  for (let round = 0; round < 3; round++) {
    metrics.readBytes('db7', 'main', 5);
    metrics.forgetTarget(`db${round}`);
    assert.equal(await metrics.metricsText(), await metrics.registry.metrics());
  }
});

test('a registered object without get() is refused, not skipped', async () => {
  await assert.rejects(new Exposition().text([{ name: 'x' }]), /without get\(\)/);
});
