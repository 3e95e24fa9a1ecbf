/**
 * ISO 8601 timestamps as the parser writes them (logformat/timestamp.ts) → microseconds since
 * 1970-01-01 UTC, exactly (pure): a number while that is a safe integer (years 1685 to 2255,
 * every real log), so no bigint is allocated per row; a bigint beyond. `Date.parse` keeps only milliseconds, and the
 * store keeps microseconds: `2024-01-02T03:04:05.123456+03:00` must arrive as ...123456, not
 * ...123000. Fractions beyond microseconds are rounded (half up), as the server rounds them.
 *
 * Accepted: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, which is every timestamp whose zone
 * the parser could convert. Anything else (the text as logged with an unknown zone) → null:
 * the caller stores the time it read the entry instead and keeps the text.
 */
import { toIsoTimestamp } from '../logformat/timestamp.ts';

const ISO_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysIn(year: number, month: number): number {
  if (month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)) return 29;
  return DAYS_IN_MONTH[month - 1] ?? 0;
}

/** Fraction digits → microseconds (0 .. 1_000_000: may carry into the next second). */
function fractionMicros(digits: string): number {
  return fractionAt(digits, 0, digits.length);
}

const SCALE = [1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];

/**
 * The fraction digits `text[from, to)` (all digits, at least one) → microseconds, rounded half
 * up beyond six digits (0 .. 1_000_000). Read in place: no slice, no padded copy, no Number().
 */
function fractionAt(text: string, from: number, to: number): number {
  const six = Math.min(to, from + 6);
  let us = 0;
  for (let i = from; i < six; i++) us = us * 10 + text.charCodeAt(i) - 48;
  if (to - from <= 6) return us * SCALE[six - from]!;
  return text.charCodeAt(six) >= 53 /* '5' */ ? us + 1 : us;
}

// Consecutive entries mostly share everything but the fraction: remember the last whole-second
// part (date, clock and zone) and its value, so most calls skip the calendar arithmetic.
let lastHead = '';
let lastZone = '';
let lastSecondsMs = 0;

/** Microseconds since 1970: a number when a safe integer, else a bigint (exact either way). */
export type Micros = number | bigint;

/** `secondsMs * 1000 + frac` exactly: a number when it is a safe integer. */
function micros(secondsMs: number, frac: number): Micros {
  const us = secondsMs * 1000 + frac;
  return Number.isSafeInteger(us) ? us : BigInt(secondsMs) * 1000n + BigInt(frac);
}

/**
 * `convert` with its last text and value remembered: the parser hands out one string for
 * every entry of a timestamp (logformat/timestamp.ts), and a busy server logs dozens of
 * entries per millisecond, so most calls compare two pointers and return.
 */
function rememberingLast(convert: (text: string) => Micros | null): (text: string) => Micros | null {
  let lastText = '';
  let lastValue: Micros | null = null;
  return (text) => {
    if (text === lastText) return lastValue;
    lastValue = convert(text);
    lastText = text;
    return lastValue;
  };
}

/** Microseconds since 1970 of an ISO 8601 timestamp with offset, or null when it is not one. */
export const isoToMicros = rememberingLast(parseIso);

function parseIso(text: string): Micros | null {
  // Fast path, no regular expression: the same second and zone as the last timestamp.
  const end = text.length - lastZone.length;
  if (lastHead !== '' && end >= 19 && text.startsWith(lastHead) && text.endsWith(lastZone)) {
    if (end === 19) return micros(lastSecondsMs, 0);
    if (end > 20 && text.charCodeAt(19) === 46 /* . */) {
      let digits = true;
      for (let i = 20; i < end && digits; i++) {
        const c = text.charCodeAt(i);
        digits = c >= 48 && c <= 57;
      }
      if (digits) return micros(lastSecondsMs, fractionAt(text, 20, end));
    }
  }
  const m = ISO_RE.exec(text);
  if (m === null) return null;
  const head = text.slice(0, 19);
  const zone = m[8] ?? '';
  const frac = m[7] === undefined ? 0 : fractionMicros(m[7]);
  let secondsMs: number;
  if (head === lastHead && zone === lastZone) {
    secondsMs = lastSecondsMs;
  } else {
    const year = Number(m[1]);
    const month = Number(m[2]);
    const day = Number(m[3]);
    const hour = Number(m[4]);
    const minute = Number(m[5]);
    const second = Number(m[6]);
    // Second 60 is a leap second: PostgreSQL accepts it as the next minute's first second.
    if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 60) return null;
    let offsetMinutes = 0;
    if (zone !== 'Z') {
      const oh = Number(zone.slice(1, 3));
      const om = Number(zone.slice(4, 6));
      if (oh > 15 || om > 59) return null;
      offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
    }
    const date = new Date(0);
    // setUTCFullYear, not Date.UTC: Date.UTC maps years 0-99 to 1900-1999.
    date.setUTCFullYear(year, month - 1, day);
    date.setUTCHours(hour, minute, second, 0);
    secondsMs = date.getTime() - offsetMinutes * 60_000;
    lastHead = head;
    lastZone = zone;
    lastSecondsMs = secondsMs;
  }
  return micros(secondsMs, frac);
}

// The last log timestamp with a fraction that logTimeMicros converted, by parts: `%m`
// timestamps of consecutive entries mostly differ only in their fraction.
let lastLogText = '';
/** Index of the space before the zone in lastLogText. */
let lastLogFractionEnd = 0;
/** lastLogText's value without its fraction: the whole second, in ms (as micros() takes it). */
let lastLogSecondMs = 0;

/**
 * Microseconds since 1970 of a timestamp as logged (`%m`, `%t`, `%n`, csvlog's), or null when
 * its zone cannot be converted: exactly `isoToMicros(toIsoTimestamp(text))`, without making the
 * ISO text while the date, the clock up to the second and the zone are the last one's (the
 * fraction is then read in place).
 */
export const logTimeMicros = rememberingLast(logTimeMicrosOf);

function logTimeMicrosOf(text: string): Micros | null {
  const last = lastLogText;
  const end = lastLogFractionEnd;
  const n = text.length;
  if (n === last.length && n > 0 && text.charCodeAt(19) === 46 /* . */ && end > 20) {
    let same = true;
    for (let k = 18; k >= 0 && same; k--) same = text.charCodeAt(k) === last.charCodeAt(k);
    for (let k = 20; k < end && same; k++) {
      const c = text.charCodeAt(k);
      same = c >= 48 && c <= 57;
    }
    for (let k = end; k < n && same; k++) same = text.charCodeAt(k) === last.charCodeAt(k);
    if (same) return micros(lastLogSecondMs, fractionAt(text, 20, end));
  }
  const value = isoToMicros(toIsoTimestamp(text));
  if (typeof value === 'number' && n > 20 && text.charCodeAt(10) === 32 && text.charCodeAt(19) === 46) {
    let i = 20;
    while (i < n && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
    if (i > 20 && text.charCodeAt(i) === 32) {
      lastLogText = text;
      lastLogFractionEnd = i;
      lastLogSecondMs = (value - fractionAt(text, 20, i)) / 1000;
    }
  }
  return value;
}

/** Microseconds since 1970 of a millisecond timestamp (e.g. `Date.now()`). */
export function msToMicros(ms: number): Micros {
  return micros(Math.trunc(ms), 0);
}

/** ISO 8601 (UTC) with all six fraction digits, for messages and quarantined rows. */
export function microsToIso(value: Micros): string {
  const us = BigInt(value);
  const ms = Number(us / 1000n) - (us % 1000n < 0n ? 1 : 0);
  const micros = Number(((us % 1_000_000n) + 1_000_000n) % 1_000_000n);
  const iso = new Date(ms).toISOString(); // ...ss.mmmZ
  return `${iso.slice(0, -5)}.${String(micros).padStart(6, '0')}Z`;
}
