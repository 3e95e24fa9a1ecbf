/**
 * What a simulated server's log directory looks like (pure): the names its log files take as
 * they rotate, the `current_logfiles` line that points at the newest, and the marker statements
 * a checker finds in the store (the seq-load form, so checker.ts reads them from the files too).
 */
import { LOG_LINE_PREFIX } from '../statement-log.ts';

/** The prefix of every simulated server's entries (log_line_prefix). */
export const FLEET_LOG_LINE_PREFIX = LOG_LINE_PREFIX;

/** The log file of rotation `generation` (0 is the first): names that sort in the order written. */
export function rotatedLogName(generation: number): string {
  return `postgresql-${String(generation).padStart(6, '0')}.log`;
}

/** current_logfiles as PostgreSQL writes it for a stderr log at `relativePath` (from the data directory). */
export function currentLogfilesLine(relativePath: string): string {
  return `stderr ${relativePath}\n`;
}

/**
 * Marker `n` of run `run`: a statement entry as PostgreSQL logs it with log_min_duration_statement
 * = 0, `SELECT 'TAG:RUN:N'` (seq-load.ts's form), stamped `ts`.
 */
export function markerEntry(ts: string, tagPrefix: string, run: string, n: number): Buffer {
  return Buffer.from(`${ts} [4242] app@bench LOG:  duration: 0.042 ms  statement: SELECT '${tagPrefix}:${run}:${n}'\n`, 'latin1');
}
