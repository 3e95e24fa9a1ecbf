// The monitoring set-up docs/snapshots.md recommends, on a test PostgreSQL: a role with only
// pg_monitor, logging in over the Unix socket by peer authentication mapped from the OS users
// given (over SSH the peer is the SSH login user). SQL snapshots refuse a superuser unless a
// target allows it (ADR 0032): the tests take them as this role.
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import pg from 'pg';

import type { LogServer } from './log-server.ts';

export const MONITOR_ROLE = 'pglog_monitor';

export async function setUpMonitoringRole(server: LogServer, osUsers: readonly string[]): Promise<void> {
  const hba = join(server.dataDirectory, 'pg_hba.conf');
  writeFileSync(hba, `local all ${MONITOR_ROLE} peer map=pglog\n${readFileSync(hba, 'utf8')}`);
  appendFileSync(join(server.dataDirectory, 'pg_ident.conf'), [...new Set(osUsers)].map((u) => `pglog ${u} ${MONITOR_ROLE}\n`).join(''));
  const c = new pg.Client({ connectionString: server.url });
  await c.connect();
  try {
    await c.query(`CREATE ROLE ${MONITOR_ROLE} LOGIN IN ROLE pg_monitor`);
    await c.query('SELECT pg_reload_conf()');
  } finally {
    await c.end();
  }
}
