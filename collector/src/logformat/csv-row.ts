/**
 * Reading csvlog rows, apart from assembling them into entries: the column reader, the test
 * for a line that starts a row, and the shape check that tells a damaged entry from a genuine
 * one.
 *
 * What PostgreSQL writes (csvlog.c, elog.c before 15; one row per entry): the log time first,
 * then 22 more columns (9.0 to 12: up to application_name), 23 (13: backend_type) or 25 (14+:
 * leader_pid, query_id). Every column a role can put text into (user, database,
 * message, detail, hint, statement, context, application_name, ...) is a quoted field with
 * each `"` of the text doubled; the other columns are numbers, times and words without `"`,
 * `,` or newlines. So whatever a role writes, a genuine row (and every prefix of one) reads
 * under strict RFC 4180 with
 *   - a `"` inside a quoted field either doubled or closing the field, followed by `,` or the
 *     row's end,
 *   - no `"` inside an unquoted field,
 *   - at most MAX_WRITTEN_COLUMNS columns,
 *   - a first line that starts like a row (looksLikeCsvRow).
 * These are the damage signals (CsvRowShape): a role cannot produce them, because its text
 * only ever lands inside a quoted field with its quotes doubled. A line that merely looks like
 * the start of a row is not such a signal: a role can write one on a line of its own message.
 */

export const QUOTE = 0x22;
export const COMMA = 0x2c;

/**
 * Most columns PostgreSQL writes (14 to 18: 26). More means two rows ran together; raise it
 * when a new PostgreSQL version adds a column.
 */
export const MAX_WRITTEN_COLUMNS = 26;
/** Column counts of a complete row of older majors: 9.0 to 12 (no backend_type), 13 (no leader_pid, query_id). */
const ROW_COLUMNS_PG12 = 23;
const ROW_COLUMNS_PG13 = 24;
/** Columns the reader keeps (the rest of an overlong row is not read). */
export const MAX_COLUMNS = 32;

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

/** True when b[s..e) starts like a csvlog row: `YYYY-MM-DD HH:MM:SS.mmm ZONE,`. */
export function looksLikeCsvRow(b: Buffer, s: number, e: number): boolean {
  if (e - s < 26) return false;
  if (!(
    isDigit(b[s]) &&
    isDigit(b[s + 3]) &&
    b[s + 4] === 0x2d &&
    b[s + 7] === 0x2d &&
    b[s + 10] === 0x20 &&
    b[s + 13] === 0x3a &&
    b[s + 16] === 0x3a &&
    b[s + 19] === 0x2e &&
    isDigit(b[s + 22]) &&
    b[s + 23] === 0x20
  ))
    return false;
  for (let i = s + 24; i < e && i < s + 40; i++) {
    const c = b[i]!;
    if (c === COMMA) return i > s + 24;
    if (c === 0x20 || c === QUOTE) return false;
  }
  return false;
}

/** Column k of the row read is empty or quoted (user_name, database_name: PostgreSQL always quotes them). */
function emptyOrQuoted(r: CsvRowReader, b: Buffer, k: number): boolean {
  const s = r.fs[k]!;
  return r.fe[k] === s || b[s - 1] === QUOTE;
}

/** Column k of the row read is a number (process_id: always written). */
function digits(r: CsvRowReader, b: Buffer, k: number): boolean {
  const s = r.fs[k]!,
    e = r.fe[k]!;
  if (e <= s) return false;
  for (let i = s; i < e; i++) if (!isDigit(b[i])) return false;
  return true;
}

/**
 * A complete row (not open) read by CsvRowReader has the shape PostgreSQL writes: one of the
 * column counts, and user, database and process id as PostgreSQL writes them. The counts of
 * the majors differ by 1 to 3, so a row whose write stopped after its first columns, run
 * together with the next row, can have a valid count (the log time and a 23-column row: 24);
 * the next row's log time then lands, unquoted, in one of the columns 1 to 3, which this check
 * refuses.
 */
export function isWrittenRow(r: CsvRowReader, b: Buffer, s: number, e: number): boolean {
  const n = r.count;
  return (
    r.strict &&
    (n === MAX_WRITTEN_COLUMNS || n === ROW_COLUMNS_PG13 || n === ROW_COLUMNS_PG12) &&
    looksLikeCsvRow(b, s, e) &&
    emptyOrQuoted(r, b, 1) &&
    emptyOrQuoted(r, b, 2) &&
    digits(r, b, 3)
  );
}

/**
 * Reads the fields of one row in `b[s, e)`. Field k is `b[fs[k], fe[k])`; `fx[k]` is 1 when
 * the field holds `""` escapes. Returns the field count; `open` tells whether the row ended
 * inside a quoted field, `strict` whether it read without bending RFC 4180 (text between a
 * closing quote and the comma, a `"` inside an unquoted field: both only in damaged rows).
 */
export class CsvRowReader {
  readonly fs = new Int32Array(MAX_COLUMNS);
  readonly fe = new Int32Array(MAX_COLUMNS);
  readonly fx = new Uint8Array(MAX_COLUMNS);
  count = 0;
  open = false;
  strict = true;

  read(b: Buffer, s: number, e: number): number {
    const fs = this.fs,
      fe = this.fe,
      fx = this.fx;
    let k = 0;
    let i = s;
    let strict = true;
    this.open = false;
    for (;;) {
      if (k >= MAX_COLUMNS) break;
      if (i < e && b[i] === QUOTE) {
        let j = i + 1;
        let esc = 0;
        let close = -1;
        for (;;) {
          // Short fields: a loop; long ones: memchr. No quote before `e`: still open at the row's end.
          let q = -1;
          const stop = j + 24 < e ? j + 24 : e;
          for (let x = j; x < stop; x++)
            if (b[x] === QUOTE) {
              q = x;
              break;
            }
          if (q < 0 && stop < e) q = b.indexOf(QUOTE, stop);
          if (q < 0 || q >= e) break;
          if (q + 1 < e && b[q + 1] === QUOTE) {
            esc = 1;
            j = q + 2;
            continue;
          }
          close = q;
          break;
        }
        fs[k] = i + 1;
        fx[k] = esc;
        if (close < 0) {
          fe[k] = e;
          k++;
          this.open = true;
          break;
        }
        fe[k] = close;
        k++;
        i = close + 1;
        // Anything between the closing quote and the comma is not RFC 4180; skip it.
        if (i < e && b[i] !== COMMA) {
          strict = false;
          while (i < e && b[i] !== COMMA) i++;
        }
      } else {
        let j = i;
        for (; j < e; j++) {
          const c = b[j];
          if (c === COMMA) break;
          if (c === QUOTE) strict = false;
        }
        fs[k] = i;
        fe[k] = j;
        fx[k] = 0;
        k++;
        i = j;
      }
      if (i >= e) break;
      i++; // the comma
    }
    this.count = k;
    this.strict = strict;
    return k;
  }
}

/**
 * The shape of an entry that spans lines, checked as its lines arrive (each byte once): a
 * strict RFC 4180 reading that stops at the first damage signal (see the file comment), and
 * the quote parity that says whether the entry goes on past a line end.
 *
 * While `damaged` is false the text seen so far can be the beginning of a row PostgreSQL
 * wrote, whatever any role logged; so an entry is never cut short unless it is `damaged`.
 */
export class CsvRowShape {
  /** The text so far cannot be (the start of) a row PostgreSQL wrote. */
  damaged = false;
  /** Odd number of `"` so far: the entry continues on the next line. */
  open = false;
  /** Columns begun (the current one included). */
  private columns = 0;
  private quoted = false;
  private fieldStart = true;
  private afterClose = false;

  /** The entry's first line. */
  begin(b: Buffer, from: number, to: number): void {
    this.damaged = !looksLikeCsvRow(b, from, to);
    this.open = false;
    this.columns = 1;
    this.quoted = false;
    this.fieldStart = true;
    this.afterClose = false;
    this.scan(b, from, to);
  }

  /** A further line (the newline before it is text of the open quoted field). */
  next(b: Buffer, from: number, to: number): void {
    this.scan(b, from, to);
  }

  private scan(b: Buffer, from: number, to: number): void {
    let i = from;
    if (!this.damaged) {
      i = this.strictUntilDamage(b, from, to);
      if (i === to) {
        this.open = this.quoted;
        return;
      }
      this.damaged = true;
      // Before the offending byte the reading was strict, so its parity is the quote state.
      this.open = this.quoted;
    }
    let odd = this.open;
    for (; i < to; i++) if (b[i] === QUOTE) odd = !odd;
    this.open = odd;
  }

  /** Reads strictly from `from`; returns `to`, or the index of the first byte a genuine row cannot have there. */
  private strictUntilDamage(b: Buffer, from: number, to: number): number {
    let quoted = this.quoted,
      fieldStart = this.fieldStart,
      afterClose = this.afterClose,
      columns = this.columns;
    let i = from;
    for (; i < to; i++) {
      const c = b[i];
      if (quoted) {
        if (c !== QUOTE) continue;
        if (i + 1 < to && b[i + 1] === QUOTE) {
          i++;
          continue;
        }
        quoted = false;
        afterClose = true;
        continue;
      }
      if (c === COMMA) {
        if (++columns > MAX_WRITTEN_COLUMNS) break;
        fieldStart = true;
        afterClose = false;
        continue;
      }
      if (afterClose) break;
      if (c === QUOTE) {
        if (!fieldStart) break;
        quoted = true;
      }
      fieldStart = false;
    }
    this.quoted = quoted;
    this.fieldStart = fieldStart;
    this.afterClose = afterClose;
    this.columns = columns;
    return i;
  }
}
