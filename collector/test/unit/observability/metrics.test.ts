// Collector metrics: names, labels and values in the exposition text, lag computed at scrape
// time, and forgetTarget removing every series of one target and nothing else.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EVENT_KINDS } from '../../../src/logformat/events.ts';
import { createCollectorMetrics } from '../../../src/observability/metrics.ts';
import { EVENT_TABLES } from '../../../src/store/event-tables.ts';

/** The value of one sample line, e.g. sample(text, 'pglog_read_bytes_total{target="a",instance="main"}'). */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

/** Each series of `expected` has that value in the exposition text. */
function assertSamples(text: string, expected: Record<string, number>): void {
  for (const [series, value] of Object.entries(expected)) assert.equal(sample(text, series), value, series);
}

function seriesOf(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

test('per instance counters and gauges carry target and instance labels', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  m.readBytes('db1', 'main', 100);
  m.readBytes('db1', 'main', 23);
  m.readLines('db1', 'main', 7);
  m.events('db1', 'main', 'statement', 5);
  m.events('db1', 'main', 'error');
  m.parseProblems('db1', 'main', 'truncated', 2);
  m.parseProblems('db1', 'main', 'nul_removed');
  m.skippedBytes('db1', 'main', 4096);
  m.lagBytes('db1', 'main', 1000);
  m.lagBytes('db1', 'main', 10);
  const text = await m.metricsText();
  const l = 'target="db1",instance="main"';
  assertSamples(text, {
    [`pglog_read_bytes_total{${l}}`]: 123,
    [`pglog_read_lines_total{${l}}`]: 7,
    [`pglog_events_total{${l},kind="statement"}`]: 5,
    [`pglog_events_total{${l},kind="error"}`]: 1,
    [`pglog_parse_problems_total{${l},problem="truncated"}`]: 2,
    [`pglog_parse_problems_total{${l},problem="nul_removed"}`]: 1,
    [`pglog_skipped_bytes_total{${l}}`]: 4096,
    [`pglog_lag_bytes{${l}}`]: 10,
  });
  assert.match(text, /# TYPE pglog_read_bytes_total counter/);
  assert.match(text, /# TYPE pglog_lag_bytes gauge/);
});

test('log errors by SQLSTATE class; every event kind and quarantine table counted from zero', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  m.readBytes('db1', 'main', 1);
  let text = await m.metricsText();
  // A rare event's first occurrence must show in increase(): its series exists at 0 before it.
  for (const kind of EVENT_KINDS) assert.equal(sample(text, `pglog_events_total{target="db1",instance="main",kind="${kind}"}`), 0, kind);
  for (const table of EVENT_TABLES) assert.equal(sample(text, `pglog_quarantined_rows_total{table="${table}"}`), 0, table);
  assert.deepEqual(seriesOf(text, 'pglog_log_errors_total'), []);
  m.logErrors('db1', 'main', '40', 2);
  m.logErrors('db1', 'main', '40');
  m.logErrors('db1', 'main', 'unknown');
  m.events('db1', 'main', 'deadlock');
  m.quarantined('error_events', 3);
  text = await m.metricsText();
  assertSamples(text, {
    'pglog_log_errors_total{target="db1",instance="main",sqlstate_class="40"}': 3,
    'pglog_log_errors_total{target="db1",instance="main",sqlstate_class="unknown"}': 1,
    'pglog_events_total{target="db1",instance="main",kind="deadlock"}': 1,
    'pglog_quarantined_rows_total{table="error_events"}': 3,
  });
  assert.match(text, /# TYPE pglog_log_errors_total counter/);
});

test('sidecar_up is absent until a sidecar is watched, then 1 or 0', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  // No sidecar (--sshproxy off) must not read as a sidecar that is down.
  assert.deepEqual(seriesOf(await m.metricsText(), 'pglog_sidecar_up'), []);
  m.sidecarUp(false);
  assert.equal(sample(await m.metricsText(), 'pglog_sidecar_up'), 0);
  m.sidecarUp(true);
  assert.equal(sample(await m.metricsText(), 'pglog_sidecar_up'), 1);
});

test('lag_seconds is now minus the newest committed entry, at scrape time', async () => {
  let now = Date.parse('2024-05-01T12:00:00Z');
  const m = createCollectorMetrics({ defaultMetrics: false, now: () => now });
  m.newestCommittedEntry('db1', 'main', Date.parse('2024-05-01T11:59:30Z'));
  const series = 'pglog_lag_seconds{target="db1",instance="main"}';
  assert.equal(sample(await m.metricsText(), series), 30);
  now += 15_000; // nothing committed meanwhile: the lag grows
  assert.equal(sample(await m.metricsText(), series), 45);
  m.newestCommittedEntry('db1', 'main', now);
  assert.equal(sample(await m.metricsText(), series), 0);
  m.newestCommittedEntry('db1', 'main', null);
  assert.equal(sample(await m.metricsText(), series), undefined);
});

test('target gauges: connected, the active transport, reconnects, errors by code, pending bytes and their sum', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  m.targetConnected('db1', true);
  m.targetConnected('db2', false);
  m.targetTransport('db1', 'inproc');
  m.targetTransport('db1', 'proxy');
  m.reconnect('db2');
  m.reconnect('db2');
  m.error('db2', 'SSH_CONNECT_FAILED');
  m.error('db2', 'UNKNOWN');
  m.pendingBytes('db1', 1000);
  m.pendingBytes('db2', 500);
  m.pendingBytes('db1', 700);
  m.pausedStreams(1);
  m.pausedStreams(1);
  m.pausedStreams(-1);
  const text = await m.metricsText();
  assertSamples(text, {
    'pglog_target_connected{target="db1"}': 1,
    'pglog_target_connected{target="db2"}': 0,
    'pglog_target_transport{target="db1",transport="proxy"}': 1,
    'pglog_target_transport{target="db1",transport="inproc"}': 0,
    'pglog_reconnects_total{target="db2"}': 2,
    'pglog_errors_total{target="db2",code="SSH_CONNECT_FAILED"}': 1,
    'pglog_errors_total{target="db2",code="UNKNOWN"}': 1,
    'pglog_pending_bytes_target{target="db1"}': 700,
    pglog_pending_bytes: 1200,
    pglog_paused_streams: 1,
  });
});

test('batches: outcomes counted from zero, histograms observe committed batches', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  let text = await m.metricsText();
  for (const outcome of ['committed', 'retried', 'fenced']) assert.equal(sample(text, `pglog_batches_total{outcome="${outcome}"}`), 0);
  m.batchCommitted(250, 40_000, 0.003, 1.5);
  m.batchCommitted(5, 800, 0.2, 0.05);
  m.batchRetried();
  m.batchFenced();
  m.storeError('STORE_UNAVAILABLE');
  m.quarantined('statement_events', 3);
  text = await m.metricsText();
  assertSamples(text, {
    'pglog_batches_total{outcome="committed"}': 2,
    'pglog_batches_total{outcome="retried"}': 1,
    'pglog_batches_total{outcome="fenced"}': 1,
    'pglog_store_errors_total{code="STORE_UNAVAILABLE"}': 1,
    'pglog_quarantined_rows_total{table="statement_events"}': 3,
    pglog_batch_rows_count: 2,
    pglog_batch_rows_sum: 255,
    'pglog_batch_rows_bucket{le="10"}': 1,
    pglog_batch_bytes_sum: 40_800,
    'pglog_copy_duration_seconds_bucket{le="0.001"}': 0,
    'pglog_copy_duration_seconds_bucket{le="0.005"}': 1,
    'pglog_copy_duration_seconds_bucket{le="10"}': 2,
    pglog_commit_latency_seconds_sum: 1.55,
  });
});

test('forgetTarget removes every series of that target and keeps the others', async () => {
  const m = createCollectorMetrics({ defaultMetrics: false });
  for (const target of ['gone', 'kept']) {
    for (const instance of ['a', 'b']) {
      m.readBytes(target, instance, 1);
      m.readLines(target, instance, 1);
      m.events(target, instance, 'statement');
      m.events(target, instance, 'checkpoint');
      m.parseProblems(target, instance, 'malformed');
      m.logErrors(target, instance, '42');
      m.skippedBytes(target, instance, 1);
      m.lagBytes(target, instance, 1);
      m.newestCommittedEntry(target, instance, Date.now());
    }
    m.targetConnected(target, true);
    m.targetTransport(target, 'inproc');
    m.reconnect(target);
    m.error(target, 'SSH_TIMEOUT');
    m.pendingBytes(target, 10);
  }
  m.forgetTarget('gone');
  const text = await m.metricsText();
  assert.doesNotMatch(text, /target="gone"/);
  for (const name of [
    'pglog_read_bytes_total',
    'pglog_read_lines_total',
    'pglog_skipped_bytes_total',
    'pglog_lag_bytes',
    'pglog_lag_seconds',
    'pglog_parse_problems_total',
  ]) {
    assert.equal(seriesOf(text, name).length, 2, name);
  }
  assert.equal(seriesOf(text, 'pglog_events_total').length, 2 * EVENT_KINDS.length);
  assert.equal(seriesOf(text, 'pglog_log_errors_total').length, 2);
  assert.equal(seriesOf(text, 'pglog_target_transport').length, 2);
  assert.equal(sample(text, 'pglog_pending_bytes'), 10);
  assert.equal(sample(text, 'pglog_errors_total{target="kept",code="SSH_TIMEOUT"}'), 1);
  // A target added again starts from zero.
  m.readBytes('gone', 'a', 5);
  assert.equal(sample(await m.metricsText(), 'pglog_read_bytes_total{target="gone",instance="a"}'), 5);
});

test('Node.js runtime metrics carry the prefix: event-loop delay, GC, heap, RSS', async () => {
  const m = createCollectorMetrics({ eventLoopMonitoringPrecision: 5 });
  const text = await m.metricsText();
  for (const name of [
    'pglog_nodejs_eventloop_lag_p50_seconds',
    'pglog_nodejs_eventloop_lag_p99_seconds',
    'pglog_nodejs_eventloop_lag_max_seconds',
    'pglog_nodejs_gc_duration_seconds',
    'pglog_nodejs_heap_size_used_bytes',
    'pglog_nodejs_heap_size_total_bytes',
    'pglog_process_resident_memory_bytes',
  ]) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
  }
  // Two collectors in one process (tests, or a restart in place) do not clash: own registries.
  const other = createCollectorMetrics();
  assert.notEqual(other.registry, m.registry);
  assert.match(m.contentType, /^text\/plain/);
});
