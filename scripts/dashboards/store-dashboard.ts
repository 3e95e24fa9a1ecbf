// The chart's store dashboard (charts/pglog/dashboards/pglog-store.json): what a DBA reads in
// `pglog report`, over any window of the store, on a PostgreSQL data source connected to it;
// with several stores chosen (pools writing different stores), each row once per store.
// Pure; scripts/gen-dashboards.ts writes it. See docs/install.md ("The store dashboard").
import { DATASOURCE_TYPE, layout, queryVariable, type Section, textboxVariable } from './grafana.ts';
import { ALL, byTarget } from './store-filters.ts';
import { errors, lockWaits, overview, statements } from './store-panels-log.ts';
import { checkpoints, connections, deadlocks, maintenance, tempFiles } from './store-panels-maintenance.ts';
import { blocking, sessions } from './store-panels-snapshots.ts';

export const STORE_DASHBOARD_FILE = 'charts/pglog/dashboards/pglog-store.json';

const sections: Section[] = [overview, statements, errors, lockWaits, deadlocks, blocking, sessions, connections, checkpoints, maintenance, tempFiles];

/** Targets: every stream with a read position (log collection), and those with snapshots in the range. */
const TARGETS_SQL = `SELECT target FROM pglog.read_positions
UNION
SELECT DISTINCT target FROM pglog.snapshot_runs WHERE $__timeFilter(ts)
ORDER BY 1`;

/**
 * Databases of the selected targets: those of the statistics snapshots in the range, and those
 * of the statements logged in the range's last hour (a DISTINCT over every statement of a long
 * range would read them all).
 */
const DATABASES_SQL = `SELECT DISTINCT database FROM pglog.database_stats WHERE $__timeFilter(ts) AND ${byTarget()}
UNION
SELECT DISTINCT database FROM pglog.statements
 WHERE ts BETWEEN greatest($__timeFrom()::timestamptz, $__timeTo()::timestamptz - interval '1 hour') AND $__timeTo()
   AND database IS NOT NULL AND ${byTarget()}
ORDER BY 1`;

/** Each row once per store chosen in the Store variable, its title naming the store (the data source's name). */
export const STORE_REPEAT = { variable: 'datasource', title: ' · ${datasource:text}' } as const;

export function storeDashboard(): Record<string, unknown> {
  return {
    title: 'pglog store',
    uid: 'pglog-store',
    description:
      'What the pglog store holds about the monitored databases: statements, errors, locks, deadlocks, blocking, sessions, connections, checkpoints, autovacuum, temporary files. Read from the stable views of the store (docs/store.md).',
    tags: ['pglog', 'postgresql'],
    timezone: 'browser',
    schemaVersion: 39,
    version: 1,
    refresh: '1m',
    time: { from: 'now-6h', to: 'now' },
    templating: {
      list: [
        {
          name: 'datasource',
          label: 'Store',
          type: 'datasource',
          query: DATASOURCE_TYPE,
          // Several stores (pools writing different stores): every row is repeated per store chosen.
          multi: true,
          includeAll: false,
          description:
            'One or more PostgreSQL data sources, each connected to a pglog store as a role that may read schema pglog. ' +
            'Every row of panels is repeated for each store chosen. The Target and Database lists come from the first store chosen.',
        },
        queryVariable('target', 'Target', 'PostgresTarget names.', TARGETS_SQL, ALL),
        queryVariable('database', 'Database', 'Databases of the selected targets.', DATABASES_SQL, ALL),
        textboxVariable('fingerprint', 'Template', "A query template's fingerprint, for the selected-template panel: click one in a top-templates table."),
      ],
    },
    panels: layout(sections, STORE_REPEAT),
  };
}

/** The file's text: two-space JSON and a final newline. */
export function storeDashboardText(): string {
  return `${JSON.stringify(storeDashboard(), null, 2)}\n`;
}
