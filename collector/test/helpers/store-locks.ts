// Holds table locks in the store from a session of the test, to stop a collector at a chosen
// stage of its start-up: a SHARE lock on pglog.stream_claims blocks its claim (an INSERT ... ON
// CONFLICT DO UPDATE), one on pglog.read_position_state blocks the stored start and every
// commit of a position, while reading the tables goes on. Whether a collector waits for the
// test's session is read from pg_blocking_pids.
import pg from 'pg';

export type StoreTable = 'stream_claims' | 'read_position_state';

export interface StoreLocks {
  /** Takes SHARE locks on the tables (in this order), in one transaction until release(). */
  hold(tables: readonly StoreTable[]): Promise<void>;
  /** Ends the transaction: every lock is released. */
  release(): Promise<void>;
  /** How many sessions wait for a lock this session holds. */
  waiting(): Promise<number>;
  close(): Promise<void>;
}

export async function connectStoreLocks(storeUrl: string): Promise<StoreLocks> {
  const holder = new pg.Client({ connectionString: storeUrl, application_name: 'pglog-test-locks' });
  const observer = new pg.Client({ connectionString: storeUrl, application_name: 'pglog-test-locks-observer' });
  await Promise.all([holder.connect(), observer.connect()]);
  const holderPid = Number((await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid);
  let open = false;
  return {
    async hold(tables) {
      if (!open) {
        await holder.query('BEGIN');
        open = true;
      }
      for (const t of tables) await holder.query(`LOCK TABLE pglog.${t} IN SHARE MODE`);
    },
    async release() {
      if (!open) return;
      open = false;
      await holder.query('ROLLBACK');
    },
    async waiting() {
      const r = await observer.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))', [holderPid]);
      return r.rows[0]?.n ?? 0;
    },
    async close() {
      await Promise.allSettled([holder.end(), observer.end()]);
    },
  };
}
