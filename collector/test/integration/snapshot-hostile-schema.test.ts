// The monitored server cannot attack its monitor (security review F2, issue 13): on a real
// PostgreSQL 15 where PUBLIC may CREATE in `public` (the default before 15, kept by
// pg_upgrade), an unprivileged role plants catch-all objects that would win the resolution of
// an unqualified operator or function on the default search_path: an operator for every
// comparison and `||` between common catalog types that pg_catalog has no exact one for (the
// review's `=(oid,integer)` among them), and functions shadowing pg_catalog's for the
// argument types the snapshot SQL passes. Each records that it ran: a WARNING to the client,
// and as a superuser the review's attack itself, COPY ... TO PROGRAM appending to a file.
// A second database is owned by that role, which puts `public` before pg_catalog on its
// search_path (ALTER DATABASE ... SET) and plants operators with pg_catalog's exact
// signatures there too. A real lock wait makes the locks snapshot compute its edge.
//
// Every monitoring statement then runs through the real SqlSession (over a Unix socket, as
// through the sidecar's forward; the ssh2 channel carries the same bytes) as a SUPERUSER and
// as a pg_monitor role: none of the planted code runs, the session's search_path is
// pg_catalog then pg_temp, nothing outside pg_catalog is visible on it, and EXPLAIN VERBOSE
// of each statement names no operator or function outside pg_catalog (but the extension's).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';

import { type Cluster, startCluster } from '@pglog/test-support/pg-cluster.ts';
import type pg from 'pg';

import { SqlSession } from '../../src/sampler/sql-session.ts';
import { readActivity } from '../../src/snapshot/activity-query.ts';
import { readServerInfo, type ServerInfo } from '../../src/snapshot/server-info.ts';
import { readStatistics } from '../../src/snapshot/statistics-query.ts';
import { ClusterClients } from '../helpers/cluster-clients.ts';
import { everyMonitoringSql } from '../helpers/monitoring-sql.ts';

const TIMEOUT = { timeout: 180_000 };

/** Types of the catalog columns and expressions monitoring SQL compares. */
const TYPES = ['oid', 'int2', 'int4', 'int8', 'text', 'name', 'xid', '"char"', 'bool', 'timestamptz', 'inet', 'regclass', 'int4[]'];
const OPERATORS = ['=', '<>', '<', '<=', '>', '>=', '||'];

let cluster: Cluster;
let recordFile: string;
const clients = new ClusterClients(() => cluster);

function connect(user: string, database: string, applicationName?: string): Promise<pg.Client> {
  return clients.connect(user, database, applicationName);
}

/**
 * The recorder and the catch-all objects, created by `mallory` in `public` of the current
 * database. `exactToo`: also where pg_catalog has the exact signature (they win only where
 * public comes first on the search path). Every body runs on a pinned search_path itself,
 * so the planted operators do not call each other.
 */
function plantSql(exactToo: boolean): string {
  const types = TYPES.map((t) => `'${t.replaceAll("'", "''")}'`).join(', ');
  const ops = OPERATORS.map((o) => `'${o}'`).join(', ');
  return `
SET search_path = pg_catalog;
CREATE FUNCTION public.mallory_ran(what text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN
  RAISE WARNING 'pglog-hostile-ran: % as % (%)', what, current_user, current_setting('application_name');
  IF current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN
    EXECUTE format('COPY (SELECT %L) TO PROGRAM %L', what OPERATOR(pg_catalog.||) ' as ' OPERATOR(pg_catalog.||) current_user::text,
                   'cat >> ${recordFile}');
  END IF;
END $f$;
DO $do$
DECLARE l text; r text; op text; n int := 0; lt oid; rt oid;
BEGIN
  FOREACH l IN ARRAY ARRAY[${types}] LOOP
    FOREACH r IN ARRAY ARRAY[${types}] LOOP
      lt := l::regtype::oid; rt := r::regtype::oid;
      n := n OPERATOR(pg_catalog.+) 1;
      EXECUTE format('CREATE FUNCTION public.mallory_op_%s(%s, %s) RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
        n, l, r, format('BEGIN PERFORM public.mallory_ran(%L); RETURN NULL; END', 'operator ' OPERATOR(pg_catalog.||) l OPERATOR(pg_catalog.||) ',' OPERATOR(pg_catalog.||) r));
      FOREACH op IN ARRAY ARRAY[${ops}] LOOP
        IF ${exactToo ? 'true' : 'false'} OR NOT EXISTS (SELECT 1 FROM pg_operator o WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
                         AND o.oprname OPERATOR(pg_catalog.=) op AND o.oprleft OPERATOR(pg_catalog.=) lt AND o.oprright OPERATOR(pg_catalog.=) rt) THEN
          EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.mallory_op_%s)', op, l, r, n);
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;
END $do$;
-- Shadows of the functions the snapshot SQL calls, exact for the argument types it passes
-- (pg_catalog's take anyarray or text): they win wherever a call is not qualified.
CREATE FUNCTION public.unnest(int4[]) RETURNS SETOF int4 LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN PERFORM public.mallory_ran('unnest(int4[])'); RETURN QUERY SELECT pg_catalog.unnest($1); END $f$;
CREATE FUNCTION public.cardinality(int4[]) RETURNS int4 LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN PERFORM public.mallory_ran('cardinality(int4[])'); RETURN pg_catalog.cardinality($1); END $f$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN PERFORM public.mallory_ran('quote_ident(name)'); RETURN pg_catalog.quote_ident($1::text); END $f$;
CREATE FUNCTION public.host(inet) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
BEGIN PERFORM public.mallory_ran('host(inet)'); RETURN pg_catalog.host($1); END $f$;
CREATE TABLE public.mallory_t (id int);`;
}

before(async () => {
  cluster = await startCluster({ dirPrefix: 'pglog-hostile-', settings: ["shared_preload_libraries = 'pg_stat_statements'"] });
  recordFile = join(cluster.dir, 'hostile-ran.log'); // the cluster's directory: the server's OS user writes there
  const admin = await connect('postgres', 'postgres');
  await admin.query(`
    CREATE EXTENSION pg_stat_statements;
    GRANT CREATE ON SCHEMA public TO PUBLIC;
    CREATE ROLE mallory LOGIN;
    CREATE ROLE monitor LOGIN IN ROLE pg_monitor;`);
  await admin.query('CREATE DATABASE tenant OWNER mallory');
  // In the tenant's database the extension lives in a schema only the superuser owns.
  const tenantAdmin = await connect('postgres', 'tenant');
  await tenantAdmin.query('CREATE SCHEMA monitoring; CREATE EXTENSION pg_stat_statements SCHEMA monitoring; GRANT USAGE ON SCHEMA monitoring TO PUBLIC');
  await tenantAdmin.end();

  const mallory = await connect('mallory', 'postgres');
  await mallory.query(plantSql(false));
  const tenantOwner = await connect('mallory', 'tenant');
  await tenantOwner.query(plantSql(true));
  await tenantOwner.query('ALTER DATABASE tenant SET search_path = public, pg_catalog');
  await Promise.all([mallory.end(), tenantOwner.end()]);
});

after(async () => {
  await clients.endAll();
  await cluster?.dispose();
});

/** The SqlSession the collector opens, reaching the server's socket directly (the sidecar's forward is a Unix socket too). */
function monitoringSession(user: string, database: string, onInfo: (info: ServerInfo) => void): SqlSession {
  const socket = `${cluster.socketDir}/.s.PGSQL.${cluster.port}`;
  return new SqlSession({
    place: `hostile/main (${socket} as ${user}@${database})`,
    user,
    database,
    timeoutMs: 10_000,
    open: () =>
      new Promise<Duplex>((resolve, reject) => {
        const s = netConnect(socket);
        s.once('connect', () => resolve(s));
        s.once('error', reject);
      }),
    prepare: async (client) => onInfo(await readServerInfo(client)),
  });
}

/** Schema-qualified names in an EXPLAIN VERBOSE text that are neither pg_catalog's nor the extension's. */
function foreignNames(plan: string, extensionSchema: string | null): string[] {
  const found: string[] = [];
  for (const m of plan.matchAll(/OPERATOR\([^)]*\)/g)) found.push(m[0]); // pg_catalog's are visible: never printed so
  for (const m of plan.matchAll(/(?<![\w.])("?[A-Za-z_][\w$]*"?)\.("?[A-Za-z_][\w$]*"?)\(/g)) {
    const schema = m[1]!.replaceAll('"', '');
    const name = m[2]!.replaceAll('"', '');
    if (schema === 'pg_catalog') continue;
    if (schema === extensionSchema && /^pg_stat_statements(?:_info)?$/.test(name)) continue;
    found.push(`${schema}.${name}(`);
  }
  for (const m of plan.matchAll(/mallory\w*/g)) found.push(m[0]);
  return found;
}

void describe('hostile objects in schemas on the default search_path (review F2)', () => {
  let waiterPid = 0;
  let holderDone: Promise<unknown>;
  let holder: pg.Client;
  let waiter: pg.Client;

  before(async () => {
    // The review's lock wait: mallory holds her table, a second session of hers waits for it.
    holder = await connect('mallory', 'postgres', 'holder');
    waiter = await connect('mallory', 'postgres', 'waiter');
    waiterPid = (await waiter.query<{ pid: number }>('SELECT pg_catalog.pg_backend_pid() AS pid')).rows[0]!.pid;
    await holder.query('BEGIN; LOCK TABLE public.mallory_t IN ACCESS EXCLUSIVE MODE');
    holderDone = waiter.query('SELECT * FROM public.mallory_t');
    const observer = await connect('postgres', 'postgres');
    const deadline = Date.now() + 10_000;
    while (
      (
        await observer.query(
          "SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid OPERATOR(pg_catalog.=) $1::int4 AND wait_event_type OPERATOR(pg_catalog.=) 'Lock'",
          [waiterPid],
        )
      ).rowCount !== 1
    ) {
      if (Date.now() > deadline) throw new Error('the waiter never waited for the lock');
      await new Promise((r) => setTimeout(r, 25));
    }
  });

  after(async () => {
    await holder.query('ROLLBACK').catch(() => {
      /* ended */
    });
    await holderDone.catch(() => {
      /* ended */
    });
  });

  for (const database of ['postgres', 'tenant']) {
    for (const user of ['postgres', 'monitor']) {
      test(
        `as ${user === 'postgres' ? 'the superuser postgres' : 'a pg_monitor role'} in database ${database}: no planted code runs, only pg_catalog resolves`,
        TIMEOUT,
        async () => {
          const seen: { info: ServerInfo | null } = { info: null };
          const session = monitoringSession(user, database, (i) => {
            seen.info = i;
          });
          const warnings: string[] = [];
          const sizeBefore = existsSync(recordFile) ? readFileSync(recordFile, 'utf8').length : 0;
          try {
            const onNotice = (n: { message?: string }): void => {
              warnings.push(n.message ?? '');
            };
            const run = <T>(during: string, fn: (c: pg.ClientBase) => Promise<T>): Promise<T> =>
              session.readOnly(during, async (c) => {
                c.on('notice', onNotice);
                try {
                  return await fn(c);
                } finally {
                  c.removeListener('notice', onNotice);
                }
              });

            // The snapshots the collector takes, each option set, on a real lock wait. What they
            // ran is checked first: a hijacked statement may also fail or return nothing.
            const snapshots = (async () => {
              const activity = await run('activity', (c) => readActivity(c, seen.info!, { sessions: true, locks: true }));
              await run('activity', (c) => readActivity(c, seen.info!, { sessions: false, locks: true }));
              await run('activity', (c) => readActivity(c, seen.info!, { sessions: true, locks: false }));
              await run('statistics', (c) => readStatistics(c, seen.info!, { statements: true, databases: true }));
              await run('statistics', (c) => readStatistics(c, seen.info!, { statements: false, databases: false }));
              return activity;
            })();
            const [outcome] = await Promise.allSettled([snapshots]);
            const failed = outcome.status === 'rejected' ? ` (the snapshots failed: ${String(outcome.reason)})` : '';
            assert.deepEqual(
              warnings.filter((w) => w.includes('pglog-hostile-ran')),
              [],
              `no planted function ran${failed}`,
            );
            assert.equal(
              readFileSync(recordFile, { encoding: 'utf8', flag: 'a+' }).slice(sizeBefore),
              '',
              `no planted function ran COPY ... TO PROGRAM as the superuser${failed}`,
            );
            const activity = await snapshots;
            const edge = activity.blocking.find((b) => b.pid === waiterPid);
            assert.ok(edge !== undefined, `the locks snapshot has the waiter's edge: ${JSON.stringify(activity.blocking)}`);
            if (database === 'postgres') assert.equal(edge.relation, 'public.mallory_t');

            const resolved = await run(
              'probe',
              async (c) =>
                (
                  await c.query<{ path: string; ops: string; funcs: string }>(`
            SELECT pg_catalog.current_setting('search_path') AS path,
                   (SELECT pg_catalog.string_agg(o.oid::regoperator::text, ' ') FROM pg_catalog.pg_operator o
                     WHERE o.oprnamespace <> 'pg_catalog'::regnamespace AND pg_catalog.pg_operator_is_visible(o.oid)) AS ops,
                   (SELECT pg_catalog.string_agg(p.oid::regprocedure::text, ' ') FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace <> 'pg_catalog'::regnamespace AND pg_catalog.pg_function_is_visible(p.oid)) AS funcs`)
                ).rows[0]!,
            );
            assert.equal(resolved.path, 'pg_catalog,pg_temp', 'the session pins its search_path (pg_temp last)');
            assert.equal(resolved.ops, null, 'no operator outside pg_catalog is visible to the session');
            assert.equal(resolved.funcs, null, 'no function outside pg_catalog is visible to the session');

            const i = seen.info!;
            for (const { name, sql } of everyMonitoringSql(i)) {
              const plan = await run(`explain ${name}`, async (c) =>
                (await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN (VERBOSE) ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n'),
              );
              assert.deepEqual(
                foreignNames(plan, i.statStatementsSchema),
                [],
                `${name}: EXPLAIN VERBOSE names only pg_catalog's operators and functions:\n${plan}`,
              );
            }
          } finally {
            await session.close();
          }
          assert.deepEqual(
            warnings.filter((w) => w.includes('pglog-hostile-ran')),
            [],
            'no planted function ran (EXPLAIN plans)',
          );
        },
      );
    }
  }
});
