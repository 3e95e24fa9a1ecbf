/**
 * Memory stays bounded whatever the log says (issue 13 point 4, review F5; docs/collector.md,
 * "Memory bounds"). Each scenario feeds adversarial content through the real LogParser, with
 * a template cache and a `pglog parse` summary, in a child process run with --expose-gc
 * (helpers/memory-scenario.ts): once with a large input and once with a small one. The
 * structures' own byte accounting must stay within their budgets, and what the large run
 * retains after GC beyond the small one must stay within a bound derived from those budgets
 * and the entry cap, however large the input.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { DEFAULT_MAX_ENTRY_BYTES } from '../../../src/logformat/line-splitter.ts';
import { TemplateCache } from '../../../src/logformat/normalize/normalize.ts';
import { CollectorMetrics } from '../../../src/observability/metrics.ts';

const SCENARIO = fileURLToPath(new URL('../../helpers/memory-scenario.ts', import.meta.url));
const MiB = 1024 * 1024;
const CACHE_BYTES = 8 * MiB;
const SUMMARY_BYTES = 8 * MiB;
/**
 * What a large run may retain beyond a small one: both budgets, one entry at the cap (the
 * entry being assembled, and its copy when it is joined), and 8 MiB for what GC leaves
 * behind (fragmentation, a grown Map's spare room).
 */
const BOUND = CACHE_BYTES + SUMMARY_BYTES + 2 * DEFAULT_MAX_ENTRY_BYTES + 8 * MiB;

interface Outcome {
  scenario: string;
  fed: number;
  events: number;
  retained: number;
  cacheBytes: number;
  cacheEvictions: number;
  cacheUncached: number;
  summaryBytes: number;
}

async function run(scenario: string, megabytes: number): Promise<Outcome> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', SCENARIO, scenario, String(megabytes), String(CACHE_BYTES), String(SUMMARY_BYTES)],
    { maxBuffer: 1 << 20 },
  );
  return JSON.parse(stdout) as Outcome;
}

const mb = (n: number): string => `${(n / 1e6).toFixed(1)} MB`;

async function bounded(scenario: string, megabytes: number): Promise<{ big: Outcome; small: Outcome }> {
  const small = await run(scenario, 2);
  const big = await run(scenario, megabytes);
  const what = `${scenario}: ${mb(big.fed)} of log retained ${mb(big.retained)}, ${mb(small.fed)} retained ${mb(small.retained)}`;
  assert.ok(big.fed >= megabytes * 1e6, what);
  assert.ok(big.retained - small.retained <= BOUND, `${what}: more than ${mb(BOUND)} beyond the small run`);
  assert.ok(big.cacheBytes <= CACHE_BYTES, `${what}: template cache accounts ${big.cacheBytes} bytes, budget ${CACHE_BYTES}`);
  assert.ok(big.summaryBytes <= SUMMARY_BYTES + 4096, `${what}: summary accounts ${big.summaryBytes} bytes, budget ${SUMMARY_BYTES} (+ its overflow entries)`);
  return { big, small };
}

void describe('memory bounds under adversarial log content', { timeout: 600_000 }, () => {
  void test('100+ MB of distinct giant failing statements (F5): none is cached, memory flat', async () => {
    const { big } = await bounded('failing', 120);
    assert.ok(big.events >= 1150, `${big.events} events (an ERROR and its STATEMENT line are one)`);
    assert.equal(big.cacheBytes, 0);
    assert.ok(big.cacheUncached >= 1150, `${big.cacheUncached} templates made afresh`);
  });

  void test('distinct cacheable statements: the cache evicts within its bytes, the summary overflows within its own', async () => {
    const { big } = await bounded('statements', 100);
    assert.ok(big.cacheEvictions > 0, 'the cache evicted');
    assert.ok(big.cacheBytes > CACHE_BYTES / 2, `the cache is used (${big.cacheBytes} bytes)`);
  });

  void test('csvlog rows with distinct giant user, database and application names', async () => {
    await bounded('names', 200);
  });

  void test('one stderr entry of millions of one-byte continuation lines', async () => {
    const { big } = await bounded('pending', 100);
    assert.equal(big.events, 1);
  });
});

void test('/metrics shows the template cache: bytes, entries, evictions, uncached templates', async () => {
  const metrics = new CollectorMetrics({ defaultMetrics: false });
  const cache = new TemplateCache({ maxBytes: 64 * 1024 });
  metrics.watchTemplateCache(cache);
  for (let i = 0; i < 500; i++) cache.template(`SELECT c${i} FROM t WHERE a = 1`);
  cache.template(`SELECT ${'x'.repeat(5000)}`);
  const value = (text: string, name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  const text = await metrics.metricsText();
  assert.equal(value(text, 'pglog_template_cache_bytes'), cache.bytes);
  assert.ok(cache.bytes > 0 && cache.bytes <= 64 * 1024);
  assert.equal(value(text, 'pglog_template_cache_entries'), cache.size);
  assert.equal(value(text, 'pglog_template_cache_evictions_total'), cache.evictions);
  assert.ok(cache.evictions > 0);
  assert.equal(value(text, 'pglog_template_cache_uncached_total'), 1);
  cache.template(`SELECT ${'y'.repeat(5000)}`);
  assert.equal(value(await metrics.metricsText(), 'pglog_template_cache_uncached_total'), 2, 'a counter that follows the cache between scrapes');
});
