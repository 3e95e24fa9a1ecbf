/**
 * The SQL text of an activity snapshot, built from the server version (pure, so each version's
 * text is unit-tested). One statement, one round trip, one row per (session, blocker):
 *
 * - `a`: pg_stat_activity without the snapshot's own backend, for the processes that run
 *   queries or hold locks (client backends, parallel and other background workers, autovacuum
 *   workers, walsenders). pg_blocking_pids() takes the lock manager's partition locks, so it
 *   is called only for sessions that wait on a heavyweight lock (wait_event_type = 'Lock'):
 *   on a server with thousands of idle sessions that is a handful of calls, not thousands.
 * - `l`: pg_locks, read once (a CTE, materialized) and only for the waiters and their
 *   blockers; SIReadLock (serializable predicate locks) never blocks anyone and is left out.
 * - `e`: for each waiter and each pid pg_blocking_pids() gives, the lock it waits for, the
 *   strongest mode the blocker (or, 13+, one of its parallel workers) holds on the same
 *   lockable object, and the mode the blocker waits for there when it is queued ahead.
 *
 * Everything is in one statement because pg_locks and pg_blocking_pids() are read live, not
 * from the transaction's activity snapshot: two statements could see a chain change between
 * them. The rows carry `statement_timestamp()` and come from a one-row relation LEFT JOINed to
 * the sessions, so the time is there even when there is no other session.
 *
 * Only pg_catalog is searched (sampler/sql-session.ts pins search_path), and every function and
 * relation is qualified besides; comparisons are between equal types (`0::oid`, not `0`):
 * pg_catalog has an operator for them, so none planted elsewhere can be a better match, even
 * on a path where pg_catalog comes first but others follow (snapshot-sql-audit.test.ts checks
 * the texts, snapshot-hostile-schema.test.ts a real server with hostile schemas).
 *
 * By version: `leader_pid` (13+; NULL before, and a blocker's locks are then only its own),
 * `pg_locks.waitstart` (14+; before, the waiter's `state_change`, when its current statement
 * began), `AS MATERIALIZED` (12+; CTEs are always materialized before 12).
 */
import { assertSupported } from './server-info.ts';

export interface ActivitySqlOptions {
  /** All sessions (true), or with `locks` only the sessions of a blocking chain (false). */
  sessions: boolean;
  /** Blocking edges from pg_locks / pg_blocking_pids(). */
  locks: boolean;
}

/** Lock modes from weakest to strongest, to pick the strongest a blocker holds. */
const MODE_STRENGTH = `CASE h.mode
      WHEN 'AccessExclusiveLock' THEN 8 WHEN 'ExclusiveLock' THEN 7 WHEN 'ShareRowExclusiveLock' THEN 6
      WHEN 'ShareLock' THEN 5 WHEN 'ShareUpdateExclusiveLock' THEN 4 WHEN 'RowExclusiveLock' THEN 3
      WHEN 'RowShareLock' THEN 2 WHEN 'AccessShareLock' THEN 1 ELSE 0 END`;

/** The same lockable object as the waiter's lock `wl` (pg_locks' identifying columns). */
function sameObject(alias: string): string {
  return ['locktype', 'database', 'relation', 'page', 'tuple', 'virtualxid', 'transactionid', 'classid', 'objid', 'objsubid']
    .map((c) => (c === 'locktype' ? `${alias}.locktype = wl.locktype` : `${alias}.${c} IS NOT DISTINCT FROM wl.${c}`))
    .join(' AND ');
}

/** The activity snapshot statement for `versionNum` (server_version_num). */
export function activitySql(versionNum: number, options: ActivitySqlOptions): string {
  assertSupported(versionNum);
  const materialized = versionNum >= 120000 ? 'MATERIALIZED ' : '';
  const hasLeader = versionNum >= 130000;
  const leaderPid = hasLeader ? 'a.leader_pid' : 'NULL::int';
  const waitStart = versionNum >= 140000 ? 'l.waitstart' : 'NULL::timestamptz';

  const activity = `a AS ${materialized}(
  SELECT a.pid, ${leaderPid} AS leader_pid,
         a.datname::text AS database, a.usename::text AS username, a.application_name AS application,
         CASE WHEN a.client_addr IS NOT NULL THEN pg_catalog.host(a.client_addr)
              WHEN a.client_port = -1 THEN 'local' END AS client,
         a.backend_type, a.state, a.wait_event_type, a.wait_event,
         a.backend_start, a.xact_start, a.query_start, a.state_change,
         pg_catalog.textsend(a.query) AS query_bytes, pg_catalog.pg_encoding_to_char(qd.encoding) AS query_encoding,
         CASE WHEN a.wait_event_type = 'Lock' THEN pg_catalog.pg_blocking_pids(a.pid) ELSE '{}'::int[] END AS blocked_by
  FROM pg_catalog.pg_stat_activity a
  LEFT JOIN pg_catalog.pg_database qd ON qd.oid = a.datid
  WHERE a.pid <> pg_catalog.pg_backend_pid()
    AND a.backend_type IN ('client backend', 'parallel worker', 'background worker', 'autovacuum worker', 'walsender')
)`;

  // Without `sessions`, only the sessions of a chain: the waiters and whom they wait for.
  const sessionFilter = options.sessions
    ? ''
    : options.locks
      ? '\n  WHERE pg_catalog.cardinality(a.blocked_by) > 0 OR a.pid IN (SELECT pg_catalog.unnest(w.blocked_by) FROM a w)'
      : '\n  WHERE false';
  const sessions = `s AS (
  SELECT a.* FROM a${sessionFilter}
)`;

  if (!options.locks) {
    return `WITH ${activity},
${sessions}
SELECT t.ts, s.*
FROM (SELECT pg_catalog.statement_timestamp() AS ts) t
LEFT JOIN s ON true
ORDER BY s.pid`;
  }

  // A blocker's lock may be held by one of its parallel workers (pg_blocking_pids() names the
  // leader): group_pid is the leader of the lock's holder. A prepared transaction's locks have
  // no pid: they are pid 0, as pg_blocking_pids() reports such a blocker.
  const groupPid = hasLeader ? 'COALESCE(g.leader_pid, l.pid, 0)' : 'COALESCE(l.pid, 0)';
  const groupJoin = hasLeader ? '\n  LEFT JOIN a g ON g.pid = l.pid' : '';
  const locks = `l AS ${materialized}(
  SELECT COALESCE(l.pid, 0) AS pid, ${groupPid} AS group_pid,
         l.locktype, l.database, l.relation, l.page, l.tuple, l.virtualxid, l.transactionid,
         l.classid, l.objid, l.objsubid, l.mode, l.granted, ${waitStart} AS waitstart
  FROM pg_catalog.pg_locks l${groupJoin}
  WHERE l.mode <> 'SIReadLock'
    AND (COALESCE(l.pid, 0) IN (SELECT a.pid FROM a WHERE pg_catalog.cardinality(a.blocked_by) > 0)
         OR ${groupPid} IN (SELECT pg_catalog.unnest(a.blocked_by) FROM a))
)`;

  // pg_class holds only this database's relations (and the shared catalogs, database 0): a
  // relation locked in another database cannot be named from here and is given as its oid.
  const edges = `e AS (
  SELECT w.pid, b.blocking_pid, wl.locktype, wl.mode AS wait_mode,
         held.mode AS held_mode, queued.mode AS blocker_wait_mode,
         CASE WHEN wl.relation IS NULL THEN NULL
              ELSE COALESCE(
                (SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
                 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = wl.relation
                   AND (wl.database = 0::oid OR wl.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()))),
                wl.relation::text)
         END AS relation,
         COALESCE(wl.waitstart, w.state_change) AS wait_start
  FROM a w
  CROSS JOIN LATERAL pg_catalog.unnest(w.blocked_by) AS b(blocking_pid)
  JOIN l wl ON wl.pid = w.pid AND NOT wl.granted
  LEFT JOIN LATERAL (
    SELECT h.mode FROM l h
    WHERE h.group_pid = b.blocking_pid AND h.granted AND ${sameObject('h')}
    ORDER BY ${MODE_STRENGTH} DESC
    LIMIT 1
  ) held ON true
  LEFT JOIN LATERAL (
    SELECT h.mode FROM l h
    WHERE h.group_pid = b.blocking_pid AND NOT h.granted AND ${sameObject('h')}
    LIMIT 1
  ) queued ON true
)`;

  return `WITH ${activity},
${sessions},
${locks},
${edges}
SELECT t.ts, s.*, e.blocking_pid, e.locktype, e.wait_mode, e.held_mode, e.blocker_wait_mode, e.relation, e.wait_start
FROM (SELECT pg_catalog.statement_timestamp() AS ts) t
LEFT JOIN s ON true
LEFT JOIN e ON e.pid = s.pid
ORDER BY s.pid, e.blocking_pid`;
}
