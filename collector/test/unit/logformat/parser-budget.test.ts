// What bounds one hostile entry's cost besides linear parsers (security review F1): messages
// longer than PostgreSQL ever writes for a parsed kind are kept as `other` events without
// their fields being looked for, and an entry that takes longer than its time budget is
// counted and reported with its offset. The clock is injected: no timing in these tests.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { PglogEvent } from '../../../src/logformat/events.ts';
import { DEFAULT_ENTRY_BUDGET_MS, ENTRY_BUDGET_MS_PER_KIB, LogParser, type SlowEntry } from '../../../src/logformat/log-parser.ts';
import { MAX_STRUCTURED_MESSAGE_BYTES } from '../../../src/logformat/message-kind.ts';
import { SummaryBuilder } from '../../../src/parse/summary.ts';

const encodings = { defaultEncoding: 'UTF8', databases: {} };
const HEAD = '2024-05-01 10:00:00.000 UTC [4242] ';
const CHECKPOINT = 'checkpoint complete: wrote 44272 buffers (4.2%); 0 WAL file(s) added, 0 removed, 38 recycled; write=26.895 s';

function parse(text: string, options: Partial<ConstructorParameters<typeof LogParser>[0]> = {}): { events: PglogEvent[]; parser: LogParser } {
  const events: PglogEvent[] = [];
  const parser = new LogParser({ format: 'stderr', prefix: '%m [%p] ', encodings, ...options }, (e) => events.push(e));
  parser.push(Buffer.from(text));
  parser.end();
  return { events, parser };
}

describe('messages longer than PostgreSQL writes for their kind', () => {
  test('a checkpoint message over the bound is an `other` event, counted as oversized', () => {
    const limit = MAX_STRUCTURED_MESSAGE_BYTES.checkpoint;
    const padded = (bytes: number): string => `${CHECKPOINT}${' '.repeat(bytes - CHECKPOINT.length)}`;
    const { events, parser } = parse(`${HEAD}LOG:  ${padded(limit)}\n${HEAD}LOG:  ${padded(limit + 1)}\n`);
    assert.deepEqual(
      events.map((e) => e.kind),
      ['checkpoint', 'other'],
    );
    const [first, second] = events;
    assert.equal(first?.kind === 'checkpoint' ? first.wal_recycled : null, 38);
    assert.equal(second?.kind === 'other' ? second.message.length : 0, limit + 1);
    assert.equal(parser.counters.oversized, 1);
  });

  test('every bounded kind: just over its bound is `other`, at it is parsed', () => {
    const messages: Record<keyof typeof MAX_STRUCTURED_MESSAGE_BYTES, string> = {
      lock: 'process 1 still waiting for ShareLock on relation 1 of database 5 after 1.0 ms',
      checkpoint: CHECKPOINT,
      connection: 'connection received: host=10.0.0.1 port=51234',
      disconnection: 'disconnection: session time: 0:00:01.234 user=alice database=app host=10.0.0.1 port=51234',
      temp_file: 'temporary file: path "base/pgsql_tmp/pgsql_tmp1.0", size 1024',
      maintenance: 'automatic analyze of table "db.public.t"',
    };
    for (const [kind, message] of Object.entries(messages) as Array<[keyof typeof messages, string]>) {
      const limit = MAX_STRUCTURED_MESSAGE_BYTES[kind];
      // The padding goes where each parser ignores it: into the SQL of a lock wait's object, a
      // connection's details, a file path, a table name; spaces after a checkpoint.
      const pad = (bytes: number): string => {
        const n = bytes - message.length;
        if (kind === 'lock') return message.replace('relation 1', `relation 1${'x'.repeat(n)}`);
        if (kind === 'temp_file') return message.replace('pgsql_tmp1.0', `pgsql_tmp1.0${'x'.repeat(n)}`);
        if (kind === 'maintenance') return message.replace('public.t', `public.t${'x'.repeat(n)}`);
        return `${message}${' '.repeat(n)}`;
      };
      const { events, parser } = parse(`${HEAD}LOG:  ${pad(limit)}\n${HEAD}LOG:  ${pad(limit + 1)}\n`);
      assert.notEqual(events[0]?.kind, 'other', `${kind} at its bound`);
      assert.equal(events[1]?.kind, 'other', `${kind} over its bound`);
      assert.equal(parser.counters.oversized, 1, kind);
    }
  });

  test('statements and errors are never bounded: SQL has any length', () => {
    const sql = `SELECT '${'x'.repeat(MAX_STRUCTURED_MESSAGE_BYTES.maintenance * 2)}'`;
    const { events, parser } = parse(`${HEAD}LOG:  duration: 1.0 ms  statement: ${sql}\n${HEAD}ERROR:  checkpoint complete: ${sql}\n`);
    assert.deepEqual(
      events.map((e) => e.kind),
      ['statement', 'error'],
    );
    assert.equal(parser.counters.oversized, 0);
  });
});

describe('the time budget of one entry', () => {
  /**
   * A clock that moves by `steps[i]` ms at its i-th reading (from 0). A LogParser reads it when
   * bytes are pushed (or at end()) and after each entry is parsed; the handlers run after that.
   */
  function scripted(steps: Record<number, number>): { clock: () => number; advance: (ms: number) => void } {
    let now = 1000;
    let reads = 0;
    return { clock: () => (now += steps[reads++] ?? 0), advance: (ms) => void (now += ms) };
  }

  test('an entry over its budget is counted, reported with its offsets, and still parsed', () => {
    const slow: SlowEntry[] = [];
    const lines = [`${HEAD}LOG:  checkpoint starting: time\n`, `${HEAD}LOG:  ${CHECKPOINT}\n`, `${HEAD}LOG:  checkpoint starting: xlog\n`];
    // Readings: 0 push, 1 first entry parsed, 2 second entry parsed.
    const { clock, advance } = scripted({ 2: DEFAULT_ENTRY_BUDGET_MS + 50 });
    const events: PglogEvent[] = [];
    const parser = new LogParser({ format: 'stderr', prefix: '%m [%p] ', encodings, clock, onSlowEntry: (e) => slow.push(e) }, (e) => {
      events.push(e);
      // What the caller does with an event is not the parser's time.
      advance(10 * DEFAULT_ENTRY_BUDGET_MS);
    });
    parser.push(Buffer.from(lines.join('')));
    parser.end();
    assert.equal(events.length, 3);
    assert.equal(parser.counters.slow, 1);
    assert.equal(slow.length, 1);
    const start = lines[0]!.length;
    assert.deepEqual({ offset: slow[0]!.offset, end: slow[0]!.end }, { offset: start, end: start + lines[1]!.length });
    assert.ok(slow[0]!.ms > slow[0]!.budgetMs);
  });

  test('the budget grows with the entry: ENTRY_BUDGET_MS_PER_KIB for each KiB', () => {
    const message = `duration: 1.0 ms  statement: SELECT '${'x'.repeat(64 * 1024)}'`;
    const entry = `${HEAD}LOG:  ${message}\n`;
    const budget = DEFAULT_ENTRY_BUDGET_MS + (entry.length / 1024) * ENTRY_BUDGET_MS_PER_KIB;
    for (const [cost, counted] of [
      [budget - 1, 0],
      [budget + 1, 1],
    ] as const) {
      // Readings: 0 push, 1 end(), 2 the entry (emitted at the end) parsed.
      const { parser } = parse(entry, { clock: scripted({ 2: cost }).clock });
      assert.equal(parser.counters.slow, counted, `${cost} ms against a budget of ${budget} ms`);
    }
  });

  test('pglog parse --summary shows both counts', () => {
    const { parser, events } = parse(`${HEAD}LOG:  ${CHECKPOINT}${' '.repeat(MAX_STRUCTURED_MESSAGE_BYTES.checkpoint)}\n`);
    const summary = new SummaryBuilder();
    for (const e of events) summary.add(e);
    const built = summary.build(parser.counters);
    assert.equal(built.oversized, 1);
    assert.equal(built.slow, 0);
  });
});
