/**
 * Autovacuum and autoanalyze reports (log_autovacuum_min_duration), vacuumlazy.c/analyze.c:
 *
 *   automatic [aggressive ]vacuum [to prevent wraparound ]of table "db.schema.table": index scans: 1
 *   pages: 0 removed, 443 remain, 443 scanned (100.00% of total)        (PG15+; PG13/14: "... skipped due to pins, N skipped frozen")
 *   tuples: 1000 removed, 100000 remain, 0 are dead but not yet removable
 *   ...
 *   avg read rate: 0.000 MB/s, avg write rate: 12.345 MB/s
 *   buffer usage: 900 hits, 0 misses, 10 dirtied                        (PG16+: "N hits, N reads, N dirtied")
 *   WAL usage: 1000 records, 10 full page images, 123456 bytes
 *   system usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.10 s
 *
 *   automatic analyze of table "db.schema.table"
 *   ... the same usage lines
 *
 * Each line is looked for on its own; missing ones give nulls. PG16+ "reads" are reported as
 * `buffer_misses` (the same thing: blocks not found in shared buffers).
 */
import type { AutovacuumEvent, EventCommon, MaintenanceStats } from '../events.ts';
import { groupNumbers, int, num } from './text.ts';

/** An autovacuum event's own fields. */
export type VacuumMessage = Omit<AutovacuumEvent, keyof EventCommon | 'kind'>;

const VACUUM = /^automatic (aggressive )?vacuum (to prevent wraparound )?of table "(.*)": index scans: (\d+)/;
const ANALYZE = /^automatic analyze of table "(.*)"/;
const PAGES = /pages: (\d+) removed, (\d+) remain(?:, (\d+) scanned)?/;
const TUPLES = /tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable/;
const BUFFERS = /buffer usage: (\d+) hits, (\d+) (?:misses|reads), (\d+) dirtied/;
const RATES = /avg read rate: (\d+(?:\.\d+)?) MB\/s, avg write rate: (\d+(?:\.\d+)?) MB\/s/;
const WAL = /WAL usage: (\d+) records, (\d+) full page images, (\d+) bytes/;
const SYSTEM = /system usage: CPU: user: (\d+(?:\.\d+)?) s, system: (\d+(?:\.\d+)?) s, elapsed: (\d+(?:\.\d+)?) s/;

function usage(table: string, message: string): MaintenanceStats {
  return {
    table,
    ...groupNumbers(message, BUFFERS, { buffer_hits: int, buffer_misses: int, buffer_dirtied: int }),
    ...groupNumbers(message, RATES, { read_rate_mbs: num, write_rate_mbs: num }),
    ...groupNumbers(message, SYSTEM, { cpu_user_s: num, cpu_system_s: num, elapsed_s: num }),
  };
}

export function parseAutovacuum(message: string): VacuumMessage | null {
  const firstLine = message.split('\n', 1)[0] ?? '';
  const v = VACUUM.exec(firstLine);
  if (v === null) return null;
  return {
    ...usage(v[3] ?? '', message),
    aggressive: v[1] !== undefined,
    wraparound: v[2] !== undefined,
    index_scans: int(v[4]),
    ...groupNumbers(message, PAGES, { pages_removed: int, pages_remain: int, pages_scanned: int }),
    ...groupNumbers(message, TUPLES, { tuples_removed: int, tuples_remain: int, tuples_dead_not_removable: int }),
    ...groupNumbers(message, WAL, { wal_records: int, wal_fpi: int, wal_bytes: int }),
  };
}

export function parseAutoanalyze(message: string): MaintenanceStats | null {
  const firstLine = message.split('\n', 1)[0] ?? '';
  const a = ANALYZE.exec(firstLine);
  if (a === null) return null;
  return usage(a[1] ?? '', message);
}
