// The series of cli/test/operator/chart-alerts.test.ts: for each alert of the chart's
// PrometheusRule, cases in which it fires (with the labels it must carry and how its `$value`
// reads) and cases in which it must stay quiet. Series are written as Prometheus stores a
// collector's metrics scraped through the chart's ServiceMonitor: the scrape's labels
// (SCRAPE_LABELS) beside the collector's own, its `instance` kept as `exported_instance`.
// Values use promtool's expanding notation at one sample a minute: `0+10x5` is 0 10 20 30 40
// 50, `_` a missing sample.

export interface InputSeries {
  name: string;
  labels: Record<string, string>;
  values: string;
}
export interface AlertCase {
  alert: string;
  name: string;
  series: InputSeries[];
  /** When the rules are evaluated, e.g. `10m`. */
  evalTime: string;
  /** The alerts expected then (empty: none), each with its labels (severity and the chart's added), and `$value` as printed. */
  fires: Array<{ labels: Record<string, string>; value?: string }>;
}

/** What Prometheus adds to every series of a collector pod it scrapes through the chart's ServiceMonitor. */
export const SCRAPE_LABELS = {
  namespace: 'pglog-system',
  pod: 'main-0',
  instance: '10.1.0.5:9187',
  job: 'main-metrics',
  service: 'main-metrics',
  endpoint: 'http-metrics',
  container: 'collector',
  app_kubernetes_io_component: 'collector',
} as const;
const POD1 = { ...SCRAPE_LABELS, pod: 'main-1', instance: '10.1.0.6:9187' };
const OPERATOR = {
  ...SCRAPE_LABELS,
  pod: 'pglog-operator-7c9d-x2x',
  instance: '10.1.0.9:8080',
  job: 'pglog-operator-metrics',
  service: 'pglog-operator-metrics',
  container: 'operator',
  app_kubernetes_io_component: 'operator',
};
const DB1 = { target: 'db1', exported_instance: 'main' };
const DB2 = { target: 'db2', exported_instance: 'replica' };
const MiB = 1024 * 1024;
const at = (ns: string, extra: Record<string, string>): Record<string, string> => ({ namespace: ns, ...extra });

export const ALERT_CASES: AlertCase[] = [
  {
    alert: 'PglogCollectorDown',
    name: 'a collector pod not scraped for 6 minutes',
    series: [
      { name: 'up', labels: SCRAPE_LABELS, values: '1 1 0x10' },
      { name: 'up', labels: POD1, values: '1x12' },
    ],
    evalTime: '8m',
    fires: [{ labels: { ...SCRAPE_LABELS, severity: 'critical' } }],
  },
  {
    alert: 'PglogCollectorDown',
    name: 'down for 3 minutes, and the operator down (not a collector)',
    series: [
      { name: 'up', labels: SCRAPE_LABELS, values: '1x4 0x3 1x5' },
      { name: 'up', labels: OPERATOR, values: '0x12' },
    ],
    evalTime: '8m',
    fires: [],
  },
  {
    alert: 'PglogTargetDown',
    name: 'no SSH connection for 7 minutes',
    series: [
      { name: 'pglog_target_connected', labels: { ...SCRAPE_LABELS, target: 'db1' }, values: '1 0x10' },
      { name: 'pglog_target_connected', labels: { ...SCRAPE_LABELS, target: 'db2' }, values: '1x11' },
    ],
    evalTime: '8m',
    fires: [{ labels: { ...at('pglog-system', { target: 'db1' }), severity: 'warning' } }],
  },
  {
    alert: 'PglogTargetDown',
    name: 'a target moving between pods: the old one reports 0, the new one 1',
    series: [
      { name: 'pglog_target_connected', labels: { ...SCRAPE_LABELS, target: 'db1' }, values: '1 0x10' },
      { name: 'pglog_target_connected', labels: { ...POD1, target: 'db1' }, values: '_ 1x10' },
    ],
    evalTime: '8m',
    fires: [],
  },
  {
    alert: 'PglogLagGrowing',
    name: 'the unread log grows by 10 MiB a minute',
    series: [
      { name: 'pglog_lag_bytes', labels: { ...SCRAPE_LABELS, ...DB1 }, values: `0+${10 * MiB}x40` },
      { name: 'pglog_lag_bytes', labels: { ...SCRAPE_LABELS, ...DB2 }, values: '0x40' },
    ],
    evalTime: '30m',
    fires: [{ labels: { ...at('pglog-system', DB1), severity: 'warning' }, value: '300Mi' }],
  },
  {
    alert: 'PglogLagGrowing',
    name: 'a large lag that does not grow, and a small one that does',
    series: [
      { name: 'pglog_lag_bytes', labels: { ...SCRAPE_LABELS, ...DB1 }, values: `${100 * MiB}x40` },
      { name: 'pglog_lag_bytes', labels: { ...SCRAPE_LABELS, ...DB2 }, values: '0+1024x40' },
    ],
    evalTime: '30m',
    fires: [],
  },
  {
    alert: 'PglogStoreUnavailable',
    name: 'commits retried, none committed',
    series: [
      { name: 'pglog_batches_total', labels: { ...SCRAPE_LABELS, outcome: 'retried' }, values: '0+2x30' },
      { name: 'pglog_batches_total', labels: { ...SCRAPE_LABELS, outcome: 'committed' }, values: '500x30' },
      { name: 'pglog_batches_total', labels: { ...POD1, outcome: 'retried' }, values: '0x30' },
      { name: 'pglog_batches_total', labels: { ...POD1, outcome: 'committed' }, values: '0+60x30' },
    ],
    evalTime: '12m',
    fires: [{ labels: { ...SCRAPE_LABELS, severity: 'critical' } }],
  },
  {
    alert: 'PglogStoreUnavailable',
    name: 'some commits retried while others commit',
    series: [
      { name: 'pglog_batches_total', labels: { ...SCRAPE_LABELS, outcome: 'retried' }, values: '0+2x30' },
      { name: 'pglog_batches_total', labels: { ...SCRAPE_LABELS, outcome: 'committed' }, values: '0+60x30' },
    ],
    evalTime: '12m',
    fires: [],
  },
  {
    alert: 'PglogQuarantinedRows',
    name: 'three error rows refused',
    series: [
      { name: 'pglog_quarantined_rows_total', labels: { ...SCRAPE_LABELS, table: 'error_events' }, values: '0x10 3x30' },
      { name: 'pglog_quarantined_rows_total', labels: { ...SCRAPE_LABELS, table: 'statement_events' }, values: '0x40' },
    ],
    evalTime: '15m',
    fires: [{ labels: { ...at('pglog-system', { pod: 'main-0', table: 'error_events' }), severity: 'warning' }, value: '3' }],
  },
  {
    alert: 'PglogQuarantinedRows',
    name: 'rows refused long ago, none since',
    series: [{ name: 'pglog_quarantined_rows_total', labels: { ...SCRAPE_LABELS, table: 'error_events' }, values: '0x5 3x60' }],
    evalTime: '60m',
    fires: [],
  },
  {
    alert: 'PglogSidecarDown',
    name: 'the sidecar stale for 7 minutes',
    series: [{ name: 'pglog_sidecar_up', labels: SCRAPE_LABELS, values: '1 0x10' }],
    evalTime: '8m',
    fires: [{ labels: { ...SCRAPE_LABELS, severity: 'warning' } }],
  },
  {
    alert: 'PglogSidecarDown',
    name: 'a sidecar up, and a collector without one (--sshproxy off: no series)',
    series: [
      { name: 'pglog_sidecar_up', labels: SCRAPE_LABELS, values: '1x10' },
      { name: 'pglog_batches_total', labels: { ...POD1, outcome: 'committed' }, values: '0+1x10' },
    ],
    evalTime: '8m',
    fires: [],
  },
  {
    alert: 'PglogDeadlocks',
    name: 'one deadlock',
    series: [
      { name: 'pglog_events_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'deadlock' }, values: '0x5 1x20' },
      { name: 'pglog_events_total', labels: { ...SCRAPE_LABELS, ...DB2, kind: 'deadlock' }, values: '0x25' },
    ],
    evalTime: '10m',
    fires: [{ labels: { ...at('pglog-system', DB1), severity: 'warning' }, value: '1' }],
  },
  {
    alert: 'PglogDeadlocks',
    name: 'errors and lock waits but no deadlock',
    series: [
      { name: 'pglog_events_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'deadlock' }, values: '0x25' },
      { name: 'pglog_events_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'error' }, values: '0+50x25' },
      { name: 'pglog_events_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'lock_wait' }, values: '0+5x25' },
    ],
    evalTime: '10m',
    fires: [],
  },
  {
    alert: 'PglogErrorRateRising',
    name: 'class 23 from 0.1/s to 1/s',
    series: [
      { name: 'pglog_log_errors_total', labels: { ...SCRAPE_LABELS, ...DB1, sqlstate_class: '23' }, values: '0+6x80 540+60x40' },
      { name: 'pglog_log_errors_total', labels: { ...SCRAPE_LABELS, ...DB1, sqlstate_class: '42' }, values: '0+60x120' },
    ],
    evalTime: '100m',
    fires: [{ labels: { ...at('pglog-system', { target: 'db1', sqlstate_class: '23' }), severity: 'warning' }, value: '1.00' }],
  },
  {
    alert: 'PglogErrorRateRising',
    name: 'a class the target never logged before, at 1/s',
    series: [{ name: 'pglog_log_errors_total', labels: { ...SCRAPE_LABELS, ...DB1, sqlstate_class: '57' }, values: '_x70 0+60x40' }],
    evalTime: '90m',
    fires: [{ labels: { ...at('pglog-system', { target: 'db1', sqlstate_class: '57' }), severity: 'warning' }, value: '1.00' }],
  },
  {
    alert: 'PglogErrorRateRising',
    name: 'a steady 1/s, and a rise that stays under minPerSecond',
    series: [
      { name: 'pglog_log_errors_total', labels: { ...SCRAPE_LABELS, ...DB1, sqlstate_class: '42' }, values: '0+60x120' },
      { name: 'pglog_log_errors_total', labels: { ...SCRAPE_LABELS, ...DB2, sqlstate_class: '28' }, values: '0x80 0+3x40' },
    ],
    evalTime: '100m',
    fires: [],
  },
  {
    alert: 'PglogBlockingWaitLong',
    name: 'a session blocked over 300 s',
    series: [
      { name: 'pglog_longest_blocking_wait_seconds', labels: { ...SCRAPE_LABELS, ...DB1 }, values: '0x5 400x10' },
      { name: 'pglog_longest_blocking_wait_seconds', labels: { ...SCRAPE_LABELS, ...DB2 }, values: '0x15' },
    ],
    evalTime: '8m',
    fires: [{ labels: { ...at('pglog-system', DB1), severity: 'warning' }, value: '6m 40s' }],
  },
  {
    alert: 'PglogBlockingWaitLong',
    name: 'waits under 300 s, and one over it for a single snapshot',
    series: [
      { name: 'pglog_longest_blocking_wait_seconds', labels: { ...SCRAPE_LABELS, ...DB1 }, values: '200x15' },
      { name: 'pglog_longest_blocking_wait_seconds', labels: { ...SCRAPE_LABELS, ...DB2 }, values: '0 0 400 0x12' },
    ],
    evalTime: '8m',
    fires: [],
  },
  {
    alert: 'PglogSnapshotsFailing',
    name: 'activity snapshots failing since the start, none succeeded',
    series: [{ name: 'pglog_snapshot_failures_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'activity', code: 'SQL_CONNECT_FAILED' }, values: '1+4x30' }],
    evalTime: '10m',
    fires: [{ labels: { ...at('pglog-system', { ...DB1, kind: 'activity' }), severity: 'warning' } }],
  },
  {
    alert: 'PglogSnapshotsFailing',
    name: 'the last success 10 minutes old, no failure counted',
    series: [{ name: 'pglog_snapshot_last_success_timestamp_seconds', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'statistics' }, values: '0+60x5 300x30' }],
    evalTime: '16m',
    fires: [{ labels: { ...at('pglog-system', { ...DB1, kind: 'statistics' }), severity: 'warning' } }],
  },
  {
    alert: 'PglogSnapshotsFailing',
    name: 'a few failures among successes',
    series: [
      { name: 'pglog_snapshot_failures_total', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'activity', code: 'SQL_TIMEOUT' }, values: '1x10 2x20' },
      { name: 'pglog_snapshot_duration_seconds_count', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'activity' }, values: '0+4x30' },
      { name: 'pglog_snapshot_last_success_timestamp_seconds', labels: { ...SCRAPE_LABELS, ...DB1, kind: 'activity' }, values: '0+60x30' },
    ],
    evalTime: '16m',
    fires: [],
  },
];
