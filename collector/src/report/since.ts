/**
 * Time bounds of `pglog report --since/--until`: a duration before now (`30s`, `15m`, `1h`,
 * `2d`, `1w`, combined as `1h30m`) or an ISO 8601 timestamp (`2024-05-01`,
 * `2024-05-01T10:00`, `2024-05-01 10:00:00+02`). Timestamps without an offset are UTC, so a
 * report means the same on every machine. Pure: "now" is an argument.
 */
import { PglogError } from '@pglog/common/errors.ts';

/** A bound as given: some time before now, or an absolute instant. */
export type TimeBound = { agoMs: number } | { at: Date };

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};
const DURATION = /^(?:\d+(?:\.\d+)?(?:ms|[smhdw]))+$/;
const DURATION_PART = /(?<![\d.])(\d+(?:\.\d+)?)(ms|[smhdw])/g;
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** Milliseconds of a duration such as `90s`, `15m`, `1h30m`; null when it is not one. */
export function parseDuration(text: string): number | null {
  if (!DURATION.test(text)) return null;
  let ms = 0;
  for (const m of text.matchAll(DURATION_PART)) ms += Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? Number.NaN);
  return Number.isFinite(ms) ? Math.round(ms) : null;
}

/** The instant of an ISO 8601 timestamp (UTC when it has no offset); null when it is not one. */
export function parseTimestamp(text: string): Date | null {
  const m = TIMESTAMP.exec(text.trim());
  if (m === null) return null;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map((v) => Number(v ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, fraction);
  // Date.UTC rolls 2024-02-30 over into March: refuse days the month does not have.
  if (new Date(utc).getUTCDate() !== day) return null;
  return new Date(utc - offsetMinutes(m[8]) * 60_000);
}

function offsetMinutes(zone: string | undefined): number {
  if (zone === undefined || zone.toUpperCase() === 'Z') return 0;
  const sign = zone.startsWith('-') ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  return sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || 0));
}

/** Parses the value of `--since` or `--until`; `option` names it in the error. */
export function parseTimeBound(text: string, option: string): TimeBound {
  const agoMs = parseDuration(text);
  if (agoMs !== null) return { agoMs };
  const at = parseTimestamp(text);
  if (at !== null) return { at };
  throw new PglogError(
    'USAGE',
    `${option} ${text}: expected a duration before now (30s, 15m, 1h, 2d, 1w, 1h30m) or an ISO timestamp (2024-05-01, 2024-05-01T10:00:00Z; UTC when no offset is given)`,
  );
}

export function resolveTimeBound(bound: TimeBound, nowMs: number): Date {
  return 'at' in bound ? bound.at : new Date(nowMs - bound.agoMs);
}

/** The report window [since, until); refuses an empty or reversed one. */
export function resolveWindow(since: TimeBound, until: TimeBound, nowMs: number): { since: Date; until: Date } {
  const window = { since: resolveTimeBound(since, nowMs), until: resolveTimeBound(until, nowMs) };
  if (window.since.getTime() >= window.until.getTime()) {
    throw new PglogError('USAGE', `--since ${window.since.toISOString()} is not before --until ${window.until.toISOString()}`);
  }
  return window;
}
