/**
 * Which files of a log directory belong to an instance's log, and in which order they were
 * written. Pure: the probe script lists, this decides.
 *
 * PostgreSQL names stderr files by `log_filename` (default `postgresql-%Y-%m-%d_%H%M%S.log`);
 * for csvlog and jsonlog it replaces a `.log` suffix with `.csv`/`.json` (or appends it). So
 * the primary files of a format are `*.log`, `*.csv` or `*.json`. logrotate's copies and
 * renamed files add `.N` (`postgresql.log.1`) or a dateext suffix (`postgresql.log-20240101`);
 * compressed ones (`.gz`, ...) cannot be streamed and are left out.
 * A stderr log_filename without `.log` is found only through current_logfiles.
 */
import type { LogFormat } from '@pglog/common/api/postgres-target.ts';

export function formatSuffix(format: LogFormat): string {
  switch (format) {
    case 'stderr':
      return '.log';
    case 'csvlog':
      return '.csv';
    case 'jsonlog':
      return '.json';
  }
}

export interface LogFileName {
  /** The file is a primary log file (`*.log`), not a rotated copy. */
  primary: boolean;
  /**
   * Tie-breaker among files with equal mtimes: logrotate's `x.2` is older than `x.1`, which is
   * older than `x`; larger means older. 0 for primary and dateext names.
   */
  ageRank: number;
}

/** Classifies a base name for `format`, or null when it is not one of its log files. */
export function classifyLogFileName(name: string, format: LogFormat): LogFileName | null {
  const suffix = formatSuffix(format);
  if (name.endsWith(suffix) && name.length > suffix.length) return { primary: true, ageRank: 0 };
  const at = name.lastIndexOf(suffix);
  if (at <= 0) return null;
  const rest = name.slice(at + suffix.length);
  const numbered = /^\.(\d{1,9})$/.exec(rest);
  if (numbered !== null) return { primary: false, ageRank: Number(numbered[1]) };
  if (/^-\d+$/.test(rest)) return { primary: false, ageRank: 0 };
  return null;
}
