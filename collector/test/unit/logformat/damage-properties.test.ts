// Damaged input loses only itself (issue 13): for every log format, a generated log of valid
// entries (multi-line messages; quotes, commas, newlines and lines that look like entries
// inside the text a role controls) gets one damage at any position: a cut (bytes missing), a
// partial write (an entry stops short and the next one follows), a run of garbage bytes, a
// NUL run written in or over it. Fed in any chunking, every entry that neither the damage
// touches nor borders comes out exactly as from the undamaged log (at its shifted offsets);
// besides the entries the damage touches, at most one neighbour, on one side, is lost or
// altered; and damage that changes how many entries come out is counted as malformed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';

import fc from 'fast-check';

import { LogParser } from '../../../src/logformat/log-parser.ts';
import type { LogFormat } from '../../../src/logformat/record.ts';
import { SummaryBuilder } from '../../../src/parse/summary.ts';
import { assemble } from '../../fixtures/asm-harness.ts';

const STDERR_PREFIX = '%m [%p] %q%u@%d ';
const SYSLOG_PREFIX = 'user=%u,db=%d ';
const optionsOf = (format: LogFormat): { prefix?: string } =>
  format === 'stderr' ? { prefix: STDERR_PREFIX } : format === 'syslog' ? { prefix: SYSLOG_PREFIX } : {};

interface Entry {
  pid: number;
  /** A background process: no user, database or application. */
  background: boolean;
  user: string;
  db: string;
  app: string;
  severity: string;
  message: string;
  detail: string | null;
  statement: string | null;
}

const ts = (i: number): string =>
  `2024-05-01 10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')} UTC`;

/** What a role might log on a line of its own, written to look like an entry of each format. */
const FORGED: Record<LogFormat, string> = {
  stderr: `\n${ts(5)} [999] postgres@postgres ERROR:  forged`,
  csvlog: `\n${ts(5)},"postgres","postgres",999,"[local]",6.3e7,1,"SELECT",2024-05-01 09:59:00 UTC,3/1,0,ERROR,XX000,"forged",,,,,,,,,"","client backend",,0`,
  jsonlog: `\n{"timestamp":"${ts(5)}","pid":999,"error_severity":"ERROR","message":"forged"}`,
  syslog: '\nMar  5 10:00:01 dbhost postgres[999]: [9-1] user=postgres,db=postgres ERROR:  forged',
};

/** Text a role controls: words, quotes, commas, newlines, tabs, Latin-1 bytes, and (with `forged`) lines that look like entries. */
function text(format: LogFormat, forged: boolean): fc.Arbitrary<string> {
  const pieces = ['SELECT', ' ', 'a', ',', '"', '""', '\n', "'", 'x, "y"', ';', '  FROM t', '{', '}', '\\', '\t', '\xcf\xf0\xe8', ', '];
  const piece = forged ? fc.oneof(fc.constantFrom(...pieces), fc.constant(FORGED[format])) : fc.constantFrom(...pieces);
  return fc.array(piece, { maxLength: 12 }).map((p) => `m${p.join('')}`);
}

function entry(format: LogFormat, forged: boolean): fc.Arbitrary<Entry> {
  const t = text(format, forged);
  return fc.record({
    pid: fc.integer({ min: 100, max: 103 }),
    background: fc.boolean(),
    user: fc.constantFrom('alice', 'bob'),
    db: fc.constantFrom('shop', 'db1'),
    app: t,
    severity: fc.constantFrom('LOG', 'ERROR', 'WARNING'),
    message: t,
    detail: fc.option(t),
    statement: fc.option(t),
  });
}

const csvq = (s: string): string => `"${s.replaceAll('"', '""')}"`;

/**
 * csvlog's columns by major: 9.0 to 12 end with application_name (23), 13 adds backend_type
 * (24), 14+ leader_pid and query_id (26).
 */
type CsvColumns = 23 | 24 | 26;

/** One entry as PostgreSQL 15 writes it in `format` (i: its place in the log; csvlog: as a major with `columns` writes it). */
function render(format: LogFormat, e: Entry, i: number, columns: CsvColumns): string {
  const who = e.background ? '' : `${e.user}@${e.db} `;
  switch (format) {
    case 'stderr': {
      const line = (sev: string, s: string): string => `${ts(i)} [${e.pid}] ${who}${sev}:  ${s.replaceAll('\n', '\n\t')}\n`;
      return line(e.severity, e.message) + (e.detail === null ? '' : line('DETAIL', e.detail)) + (e.statement === null ? '' : line('STATEMENT', e.statement));
    }
    case 'csvlog': {
      const head = e.background
        ? `${ts(i)},,,${e.pid},,6630.${e.pid},${i},,2024-05-01 09:59:00 UTC,,0`
        : `${ts(i)},${csvq(e.user)},${csvq(e.db)},${e.pid},"[local]",6630.${e.pid},${i},"SELECT",2024-05-01 09:59:00 UTC,3/${i},0`;
      const opt = (s: string | null): string => (s === null ? '' : csvq(s));
      const tail = columns === 23 ? '' : `,${csvq(e.background ? 'checkpointer' : 'client backend')}${columns === 26 ? ',,0' : ''}`;
      return `${head},${e.severity},00000,${csvq(e.message)},${opt(e.detail)},,,,,${opt(e.statement)},,,${csvq(e.background ? '' : e.app)}${tail}\n`;
    }
    case 'jsonlog':
      return `${JSON.stringify({
        timestamp: ts(i),
        ...(e.background ? {} : { user: e.user, dbname: e.db }),
        pid: e.pid,
        session_id: `6630.${e.pid}`,
        line_num: i,
        error_severity: e.severity,
        state_code: '00000',
        message: e.message,
        ...(e.detail === null ? {} : { detail: e.detail }),
        ...(e.statement === null ? {} : { statement: e.statement }),
        application_name: e.background ? '' : e.app,
        backend_type: e.background ? 'checkpointer' : 'client backend',
        query_id: 0,
      })}\n`;
    case 'syslog': {
      let part = 0;
      const tabs = (s: string): string => s.replaceAll('\t', '#011');
      const prefix = e.background ? 'user=,db= ' : `user=${e.user},db=${e.db} `;
      const lines = (sev: string, s: string): string =>
        s
          .split('\n')
          .map((l, k) => `Mar  5 10:00:01 dbhost postgres[${e.pid}]: [${i + 1}-${++part}] ${k === 0 ? `${prefix}${sev}:  ` : '#011'}${tabs(l)}\n`)
          .join('');
      return (
        lines(e.severity, e.message) + (e.detail === null ? '' : lines('DETAIL', e.detail)) + (e.statement === null ? '' : lines('STATEMENT', e.statement))
      );
    }
  }
}

interface Log {
  bytes: Buffer;
  /** Entry i is bytes [bounds[i], bounds[i + 1]). */
  bounds: number[];
}

function build(format: LogFormat, entries: Entry[], columns: CsvColumns = 26): Log {
  const parts = entries.map((e, i) => Buffer.from(render(format, e, i, columns), 'latin1'));
  const bounds = [0];
  for (const p of parts) bounds.push(bounds[bounds.length - 1]! + p.length);
  return { bytes: Buffer.concat(parts), bounds };
}

type DamageKind = 'cut' | 'partial' | 'garbage' | 'nul' | 'nul-over';
interface Damage {
  kind: DamageKind;
  at: number;
  size: number;
  garbage: Uint8Array;
}

const damage: fc.Arbitrary<Damage> = fc.record({
  kind: fc.constantFrom<DamageKind>('cut', 'partial', 'garbage', 'nul', 'nul-over'),
  at: fc.nat(),
  size: fc.integer({ min: 1, max: 400 }),
  garbage: fc
    .array(fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0x0a, 0x22, 0x2c, 0x09, 0x7b, 0x7d, 0x23, 0x00)), { minLength: 1, maxLength: 40 })
    .map((a) => Uint8Array.from(a)),
});

interface Damaged {
  bytes: Buffer;
  /** Entries whose bytes the damage touches. */
  touched: number[];
  /** Where an original offset lies in the damaged bytes (null: deleted). */
  shift(x: number): number | null;
}

function applyDamage(log: Log, d: Damage): Damaged {
  const b = log.bytes,
    n = log.bounds.length - 1;
  const overlapping = (k: number, m: number): number[] => [...Array(n).keys()].filter((j) => log.bounds[j]! < m && log.bounds[j + 1]! > k);
  const cut = (k: number, m: number): Damaged => ({
    bytes: Buffer.concat([b.subarray(0, k), b.subarray(m)]),
    touched: overlapping(k, m),
    shift: (x) => (x <= k ? x : x >= m ? x - (m - k) : null),
  });
  const insert = (p: number, what: Buffer): Damaged => ({
    bytes: Buffer.concat([b.subarray(0, p), what, b.subarray(p)]),
    touched: p < b.length ? overlapping(p, p + 1) : [n - 1],
    shift: (x) => (x < p ? x : x + what.length),
  });
  switch (d.kind) {
    case 'cut': {
      const k = d.at % b.length;
      return cut(k, Math.min(b.length, k + d.size));
    }
    case 'partial': {
      const i = d.at % n;
      const len = log.bounds[i + 1]! - log.bounds[i]!;
      return cut(log.bounds[i]! + 1 + (d.size % (len - 1)), log.bounds[i + 1]!);
    }
    case 'garbage':
      return insert(d.at % (b.length + 1), Buffer.from(d.garbage));
    case 'nul':
      return insert(d.at % (b.length + 1), Buffer.alloc(d.size));
    case 'nul-over': {
      const k = d.at % b.length,
        m = Math.min(b.length, k + d.size);
      const bytes = Buffer.from(b);
      bytes.fill(0, k, m);
      return { bytes, touched: overlapping(k, m), shift: (x) => x };
    }
  }
}

/**
 * Whether damage of this kind that changes the number of records must be counted. A cut, or
 * NULs written over the end of one entry and the start of the next, can splice two entries
 * into one that is well formed in every format (the NULs are counted later, as nul_removed,
 * where they land in text); in stderr and syslog a
 * message may hold any text after its own prefix and tab, so a partial write whose next entry
 * lands on the same line joins them unseen, and only extra records (a line that fits no
 * entry) are certain to be noticed; and only when no message holds a line that looks like an
 * entry, which damage that removes the tab before it (or lands right after the tab) exposes.
 */
function mustCount(format: LogFormat, forged: boolean, kind: DamageKind, fewer: boolean): boolean {
  if (kind === 'cut' || kind === 'nul-over') return false;
  if (format === 'csvlog' || format === 'jsonlog') return true;
  return !forged && kind !== 'partial' && !fewer;
}

function checkDamage(format: LogFormat, columns: CsvColumns, entries: Entry[], forged: boolean, d: Damage, cuts: number[]): void {
  const options = optionsOf(format);
  const log = build(format, entries, columns);
  const whole = assemble(format, log.bytes, options);
  // The undamaged log reads back entry by entry, whatever lines its text holds.
  assert.deepEqual(
    whole.records.map((r) => r.start),
    log.bounds.slice(0, -1),
    'undamaged entry boundaries',
  );
  assert.equal(whole.stats.malformed, 0, 'undamaged log: nothing malformed');

  const dmg = applyDamage(log, d);
  const run = assemble(
    format,
    dmg.bytes,
    options,
    cuts.map((c) => c % (dmg.bytes.length + 1)),
  );
  let at = 0;
  for (const r of run.records) {
    assert.equal(r.start, at, 'records tile the damaged input');
    at = r.end;
  }
  assert.equal(at, dmg.bytes.length);

  const byStart = new Map(run.records.map((r) => [r.start, r]));
  const altered: number[] = [];
  whole.records.forEach((orig, j) => {
    const s = dmg.shift(orig.start),
      e = dmg.shift(orig.end);
    const r = s === null ? undefined : byStart.get(s);
    if (r === undefined || r.end !== e || !isDeepStrictEqual({ ...r, start: 0, end: 0 }, { ...orig, start: 0, end: 0 })) altered.push(j);
  });
  const touched = dmg.touched;
  const lo = Math.min(...touched),
    hi = Math.max(...touched);
  const within = (extra: number): boolean => altered.every((j) => touched.includes(j) || j === extra);
  assert.ok(within(lo - 1) || within(hi + 1), `entries lost or altered: ${altered.join(',')}; damage touches ${touched.join(',')}`);

  const others = run.records.length - (whole.records.length - altered.length);
  if (others !== altered.length && mustCount(format, forged, d.kind, others < altered.length)) {
    assert.ok(run.stats.malformed > 0, `${altered.length} entries came out as ${others} records, none counted malformed`);
  }
}

/** Each format; csvlog also with the columns of PostgreSQL 9.0 to 12 and of 13. */
const variants: { format: LogFormat; columns: CsvColumns; label: string; runs: number }[] = [
  { format: 'stderr', columns: 26, label: 'stderr', runs: 600 },
  { format: 'csvlog', columns: 26, label: 'csvlog', runs: 600 },
  { format: 'csvlog', columns: 24, label: 'csvlog of PostgreSQL 13 (24 columns)', runs: 600 },
  { format: 'csvlog', columns: 23, label: 'csvlog of PostgreSQL 9.0 to 12 (23 columns)', runs: 600 },
  { format: 'jsonlog', columns: 26, label: 'jsonlog', runs: 600 },
  { format: 'syslog', columns: 26, label: 'syslog', runs: 600 },
];

void describe('damaged input loses only itself', () => {
  for (const { format, columns, label, runs } of variants) {
    void it(`${label}: any damage at any position, any chunking: only the damaged entry and one neighbour`, () => {
      fc.assert(
        fc.property(
          fc.boolean().chain((forged) => fc.tuple(fc.constant(forged), fc.array(entry(format, forged), { minLength: 3, maxLength: 10 }))),
          damage,
          fc.array(fc.nat(), { maxLength: 8 }),
          ([forged, entries], d, cuts) => checkDamage(format, columns, entries, forged, d, cuts),
        ),
        { numRuns: runs },
      );
    });
  }

  void it('a damaged csvlog entry is counted in the parser counters and the summary', () => {
    const log = build(
      'csvlog',
      [0, 1, 2, 3].map((i) => ({
        pid: 100,
        background: false,
        user: 'alice',
        db: 'shop',
        app: 'psql',
        severity: 'LOG',
        message: i === 1 ? 'm1\nsecond line' : `m${i}`,
        detail: null,
        statement: null,
      })),
    );
    // Row 1's write stops inside the second line of its message; row 2 follows on that line.
    const cutAt = log.bounds[1]! + log.bytes.subarray(log.bounds[1]).indexOf('cond');
    const damaged = Buffer.concat([log.bytes.subarray(0, cutAt), log.bytes.subarray(log.bounds[2])]);
    const events: number[] = [];
    const summary = new SummaryBuilder();
    const parser = new LogParser({ format: 'csvlog', encodings: { defaultEncoding: 'UTF8', databases: {} } }, (e) => {
      events.push(e.offset);
      summary.add(e);
    });
    parser.push(damaged);
    // Followed live: the last row is out before end of input.
    assert.deepEqual(events, [0, log.bounds[1], log.bounds[3]! - (log.bounds[2]! - cutAt)]);
    parser.end();
    assert.equal(parser.counters.malformed, 1);
    assert.equal(summary.build(parser.counters).malformed, 1);
  });
});
