// Log records to typed events, on hand-built records with the messages PostgreSQL writes:
// statements (simple, extended, steps, malformed durations), auto_explain plans in every format,
// errors, deadlocks, lock waits, checkpoints, autovacuum/analyze across versions, temp files,
// connections; WIN1251/KOI8R text. Properties: statements read on the bytes give the same event
// as the text parser on the decoded message, and no record makes it throw or yield NaN.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import fc from 'fast-check';
import iconv from 'iconv-lite';

import { Decoder, type EncodingConfig } from '../../../src/logformat/decode.ts';
import { EventParser } from '../../../src/logformat/event-parser.ts';
import { EVENT_KINDS, type PglogEvent } from '../../../src/logformat/events.ts';
import { parseStatementMessage } from '../../../src/logformat/messages/statement.ts';
import { fingerprintOf, normalizeQuery, TemplateCache } from '../../../src/logformat/normalize/normalize.ts';
import { emptyRecord, type LogRecord } from '../../../src/logformat/record.ts';

const ENCODINGS: EncodingConfig = { defaultEncoding: 'UTF8', databases: { win: 'WIN1251', koi: 'KOI8R' } };

interface Fields {
  severity?: string;
  detail?: string;
  hint?: string;
  context?: string;
  statement?: string;
  internalQuery?: string;
  sqlstate?: string;
  database?: string;
}

function record(message: string | Buffer, f: Fields = {}): LogRecord {
  const r = emptyRecord(100, 200, f.severity ?? 'LOG', typeof message === 'string' ? Buffer.from(message) : message);
  const b = (s: string | undefined): Buffer | null => (s === undefined ? null : Buffer.from(s));
  r.detail = b(f.detail);
  r.hint = b(f.hint);
  r.context = b(f.context);
  r.statement = b(f.statement);
  r.internalQuery = b(f.internalQuery);
  r.sqlstate = f.sqlstate ?? null;
  r.database = b(f.database);
  return r;
}

function parser(): EventParser {
  return new EventParser({ decoder: new Decoder(ENCODINGS), templates: new TemplateCache() });
}

function parse(message: string | Buffer, f: Fields = {}): PglogEvent {
  return parser().parse(record(message, f));
}

function expectKind<K extends PglogEvent['kind']>(e: PglogEvent, kind: K): Extract<PglogEvent, { kind: K }> {
  assert.equal(e.kind, kind, JSON.stringify(e));
  return e as Extract<PglogEvent, { kind: K }>;
}

void describe('common fields', () => {
  void test('offsets, timestamp, names, prefix fields', () => {
    const r = record('checkpoint starting: time');
    Object.assign(r, {
      time: '2024-03-01 10:00:00.250 UTC',
      pid: 4242,
      user: Buffer.from('alice'),
      database: Buffer.from('app'),
      application: Buffer.from('psql'),
      remoteHost: '10.0.0.5',
      sessionId: '65e1a.1092',
      sessionLine: 7,
      backendType: 'checkpointer',
      queryId: '-123',
      sqlstate: '00000',
      truncated: true,
    });
    const e = parser().parse(r);
    assert.deepEqual(
      { ...e },
      {
        kind: 'checkpoint',
        offset: 100,
        end: 200,
        ts: '2024-03-01T10:00:00.250Z',
        pid: 4242,
        database: 'app',
        user: 'alice',
        application: 'psql',
        remote_host: '10.0.0.5',
        session_id: '65e1a.1092',
        session_line: 7,
        backend_type: 'checkpointer',
        query_id: '-123',
        severity: 'LOG',
        sqlstate: '00000',
        truncated: true,
        checkpoint_kind: 'checkpoint',
        phase: 'starting',
        reason: 'time',
        buffers_written: null,
        buffers_pct: null,
        wal_added: null,
        wal_removed: null,
        wal_recycled: null,
        write_s: null,
        sync_s: null,
        total_s: null,
        sync_files: null,
        longest_sync_s: null,
        average_sync_s: null,
        distance_kb: null,
        estimate_kb: null,
      },
    );
  });
});

void describe('statements', () => {
  void test('simple protocol with duration', () => {
    const e = expectKind(parse('duration: 12.345 ms  statement: SELECT * FROM t WHERE id = 42'), 'statement');
    assert.equal(e.duration_ms, 12.345);
    assert.equal(e.protocol, 'simple');
    assert.equal(e.statement_name, null);
    assert.equal(e.query, 'SELECT * FROM t WHERE id = 42');
    assert.equal(e.normalized, 'select * from t where id = ?');
    assert.equal(e.fingerprint, fingerprintOf('select * from t where id = ?'));
    assert.equal(e.parameters, null);
  });

  void test('extended protocol execute with parameters; shares the template of the simple form', () => {
    const e = expectKind(parse('duration: 0.512 ms  execute <unnamed>: SELECT * FROM t WHERE id = $1', { detail: "parameters: $1 = '42'" }), 'statement');
    assert.equal(e.protocol, 'extended');
    assert.equal(e.statement_name, '<unnamed>');
    assert.equal(e.parameters, "$1 = '42'");
    assert.equal(e.duration_ms, 0.512);
    assert.equal(e.fingerprint, fingerprintOf('select * from t where id = ?'));
    const named = expectKind(
      parse('duration: 1.000 ms  execute S_1: UPDATE t SET a = $1 WHERE id = $2', { detail: "parameters: $1 = 'x', $2 = '5'" }),
      'statement',
    );
    assert.equal(named.statement_name, 'S_1');
    assert.equal(named.query, 'UPDATE t SET a = $1 WHERE id = $2');
    const fetch = expectKind(parse('duration: 2.000 ms  execute fetch from S_3/C_4: SELECT x FROM big'), 'statement');
    assert.equal(fetch.statement_name, 'S_3/C_4');
    assert.equal(fetch.query, 'SELECT x FROM big');
  });

  void test('log_statement forms have no duration', () => {
    const s = expectKind(parse('statement: BEGIN'), 'statement');
    assert.equal(s.duration_ms, null);
    assert.equal(s.query, 'BEGIN');
    const x = expectKind(parse('execute S_2: SELECT 1', { detail: "parameters: $1 = '1'" }), 'statement');
    assert.equal(x.duration_ms, null);
    assert.equal(x.protocol, 'extended');
    assert.equal(x.parameters, "$1 = '1'");
  });

  void test('multi-line statements keep their text', () => {
    const e = expectKind(parse('duration: 3.000 ms  statement: SELECT a,\n       b\nFROM t\nWHERE c = 1'), 'statement');
    assert.equal(e.query, 'SELECT a,\n       b\nFROM t\nWHERE c = 1');
    assert.equal(e.normalized, 'select a, b from t where c = ?');
  });

  void test('parse and bind steps, bare duration: other with subtype and duration', () => {
    const p = expectKind(parse('duration: 0.100 ms  parse <unnamed>: SELECT 1'), 'other');
    assert.equal(p.subtype, 'parse');
    assert.equal(p.duration_ms, 0.1);
    const b = expectKind(parse('duration: 0.200 ms  bind S_1/C_1: SELECT 1', { detail: "parameters: $1 = '1'" }), 'other');
    assert.equal(b.subtype, 'bind');
    assert.equal(b.duration_ms, 0.2);
    assert.equal(b.detail, "parameters: $1 = '1'");
    const d = expectKind(parse('duration: 5.123 ms'), 'other');
    assert.equal(d.subtype, 'duration');
    assert.equal(d.duration_ms, 5.123);
  });

  void test('malformed durations: other, never NaN', () => {
    for (const m of [
      'duration: abc ms  statement: SELECT 1',
      'duration: ',
      'duration: 1.5',
      'duration: -1 ms  statement: x',
      'duration: 1e999 ms',
      'execute no colon here',
      'duration: 1 ms  something else',
    ]) {
      const e = expectKind(parse(m), 'other');
      assert.equal(e.message, m);
      assert.ok(e.duration_ms === null);
    }
  });
});

void describe('statements read on the bytes', () => {
  /** The event must be what the text parser makes of the decoded message, counters included. */
  function agrees(message: Buffer, detail: Buffer | null, database: string | null): void {
    const decoder = new Decoder(ENCODINGS);
    const r = record(message, database === null ? {} : { database });
    r.detail = detail;
    const e = new EventParser({ decoder }).parse(r);
    const reference = new Decoder(ENCODINGS);
    const db = database === null ? null : Buffer.from(database);
    const text = reference.decode(message, db) ?? '';
    // Which parser applies is told from the message's first bytes (before NULs are removed).
    const statementLike = ['duration: ', 'statement: ', 'execute '].some((w) => message.subarray(0, w.length).equals(Buffer.from(w)));
    const s = statementLike ? parseStatementMessage(text) : null;
    const what = JSON.stringify(text);
    if (s?.type === 'statement') {
      const x = expectKind(e, 'statement');
      assert.deepEqual([x.duration_ms, x.protocol, x.statement_name, x.query], [s.duration, s.protocol, s.name, s.query], what);
      if (s.protocol === 'extended') {
        const d = reference.decode(detail, db);
        assert.equal(x.parameters, d !== null && d.startsWith('parameters: ') ? d.slice(12) : null, what);
      }
    } else if (s?.type === 'step' || s?.type === 'duration') {
      const x = expectKind(e, 'other');
      assert.deepEqual([x.message, x.subtype, x.duration_ms], [text, s.type === 'step' ? s.step : 'duration', s.duration], what);
      reference.decode(detail, db);
    } else if (s === null) {
      const x = expectKind(e, 'other');
      assert.deepEqual([x.message, x.subtype, x.duration_ms], [text, null, null], what);
      reference.decode(detail, db);
    } else {
      expectKind(e, 'plan');
      return;
    }
    assert.deepEqual([decoder.replacements, decoder.nulRemoved], [reference.replacements, reference.nulRemoved], what);
  }

  void test('durations are the numbers the text gives, exactly', () => {
    for (const d of [
      '0',
      '0.0',
      '0.001',
      '1.5',
      '00.10',
      '123456789.123456',
      '999999999999999',
      '0.1234567890123',
      '.5',
      '5.',
      '1e3',
      '1234567890123456',
      ' 1',
      '1..2',
      '-1',
      'Infinity',
      '0x10',
    ]) {
      agrees(Buffer.from(`duration: ${d} ms  statement: SELECT 1`), null, null);
      agrees(Buffer.from(`duration: ${d} ms`), null, null);
    }
    fc.assert(
      fc.property(fc.stringMatching(/^\d{1,16}(\.\d{1,16})?$/), (d) => {
        agrees(Buffer.from(`duration: ${d} ms  execute S_1: SELECT 1`), null, null);
      }),
      { numRuns: 3000 },
    );
  });

  void test('names, SQL, NULs, invalid bytes and other encodings: the same event as from the text', () => {
    // Latin-1 text for raw bytes (\xff is the byte 0xff: invalid UTF-8, Cyrillic in WIN1251).
    const cases = [
      'execute S:\0 x: SELECT 1',
      'execute S_1:\0',
      'execute S_1:',
      'execute <unnamed>: ',
      'execute fetch from S_1/C_2: SELECT 1',
      'duration: 3 ms  parse S:\0 x',
      'duration: 3 ms\0',
      'duration: 3 ms  bind S_1:',
      'duration: 1 ms  statement: SELECT \0 1',
      'statement: SELECT \xff',
      'duration: 2.5 ms  execute S_\xff: SELECT 1',
      'execute S_\xff\xff:\0 x: \xff',
    ].map((c) => Buffer.from(c, 'latin1'));
    cases.push(Buffer.from('execute S_1: SELECT \uFFFD'), Buffer.from('execute \u0436: \u0436'));
    for (const message of cases) {
      for (const db of [null, 'win']) {
        agrees(message, Buffer.from("parameters: $1 = '\0'"), db);
        agrees(message, Buffer.from('param\0eters: x'), db);
        agrees(message, Buffer.from('parameters: \xff', 'latin1'), db);
      }
    }
    const piece = fc
      .oneof(
        fc.constantFrom(
          'duration: ',
          '1.5',
          ' ms',
          '  ',
          'statement: ',
          'execute ',
          'fetch from ',
          'parse ',
          'bind ',
          'plan:\n',
          '<unnamed>',
          'S_1/C_2',
          ':',
          ': ',
          ' ',
          '\0',
          'SELECT 1',
          'é',
          'ж',
        ),
        fc.string({ maxLength: 6 }),
      )
      .map((t) => Buffer.from(t));
    const raw = fc.uint8Array({ maxLength: 6 }).map((b) => Buffer.from(b));
    const body = fc.array(fc.oneof(piece, piece, raw), { maxLength: 8 }).map((a) => Buffer.concat(a));
    const start = fc.constantFrom(
      '',
      'statement: ',
      'execute ',
      'execute fetch from ',
      'duration: 0.25 ms  statement: ',
      'duration: 0.25 ms  execute ',
      'duration: 3 ms  parse ',
      'duration: 3 ms  bind ',
      'duration: 7.5 ms',
      'duration: 1 ms  ',
    );
    const detail = fc.option(
      fc.oneof(
        body,
        body.map((b) => Buffer.concat([Buffer.from('parameters: '), b])),
      ),
      { nil: null },
    );
    fc.assert(
      fc.property(start, body, detail, fc.constantFrom(null, 'win', 'koi', 'app'), (s, b, d, db) => {
        agrees(Buffer.concat([Buffer.from(s), b]), d, db);
      }),
      { numRuns: 10000 },
    );
  });
});

void describe('auto_explain plans', () => {
  void test('text format, multi-line query text', () => {
    const body =
      'Query Text: SELECT *\n  FROM orders\n  WHERE customer_id = 42\nSeq Scan on orders  (cost=0.00..1693.00 rows=10 width=40) (actual time=0.010..9.877 rows=9 loops=1)\n  Filter: (customer_id = 42)\n  Rows Removed by Filter: 99991';
    const e = expectKind(parse(`duration: 10.012 ms  plan:\n${body}`), 'plan');
    assert.equal(e.format, 'text');
    assert.equal(e.duration_ms, 10.012);
    assert.equal(e.query, 'SELECT *\n  FROM orders\n  WHERE customer_id = 42');
    assert.equal(e.normalized, 'select * from orders where customer_id = ?');
    assert.equal(e.plan, body);
  });

  void test('json format', () => {
    const doc = { 'Query Text': "SELECT * FROM t WHERE name = 'a\"b'", Plan: { 'Node Type': 'Seq Scan', 'Relation Name': 't' } };
    const body = JSON.stringify(doc, null, 2);
    const e = expectKind(parse(`duration: 1.500 ms  plan:\n${body}`), 'plan');
    assert.equal(e.format, 'json');
    assert.equal(e.query, doc['Query Text']);
    assert.equal(e.plan, body);
    assert.equal(e.fingerprint, fingerprintOf('select * from t where name = ?'));
  });

  void test('truncated json still yields the query and a plan', () => {
    const body = '{\n  "Query Text": "SELECT \\"x\\" FROM t WHERE a = 1",\n  "Plan": {\n    "Node Type": "Seq';
    const e = expectKind(parse(`duration: 1.500 ms  plan:\n${body}`), 'plan');
    assert.equal(e.format, 'json');
    assert.equal(e.query, 'SELECT "x" FROM t WHERE a = 1');
  });

  void test('yaml and xml formats', () => {
    const y = expectKind(parse('duration: 1.000 ms  plan:\nQuery Text: "SELECT 1 AS \\"one\\""\nPlan: \n  Node Type: "Result"'), 'plan');
    assert.equal(y.format, 'yaml');
    assert.equal(y.query, 'SELECT 1 AS "one"');
    const x = expectKind(
      parse(
        'duration: 1.000 ms  plan:\n<explain xmlns="http://www.postgresql.org/2009/explain">\n  <Query-Text>SELECT 1 WHERE 2 &lt; 3</Query-Text>\n</explain>',
      ),
      'plan',
    );
    assert.equal(x.format, 'xml');
    assert.equal(x.query, 'SELECT 1 WHERE 2 < 3');
  });
});

void describe('errors and deadlocks', () => {
  void test('ERROR with detail, hint, context, statement and its fingerprint', () => {
    const e = expectKind(
      parse('duplicate key value violates unique constraint "users_pkey"', {
        severity: 'ERROR',
        sqlstate: '23505',
        detail: 'Key (id)=(1) already exists.',
        statement: "INSERT INTO users (id, name) VALUES (1, 'a')",
        context: 'SQL function "f" statement 1',
        hint: 'h',
        internalQuery: 'SELECT 1',
      }),
      'error',
    );
    assert.equal(e.message, 'duplicate key value violates unique constraint "users_pkey"');
    assert.equal(e.detail, 'Key (id)=(1) already exists.');
    assert.equal(e.hint, 'h');
    assert.equal(e.context, 'SQL function "f" statement 1');
    assert.equal(e.internal_query, 'SELECT 1');
    assert.equal(e.fingerprint, fingerprintOf(normalizeQuery("INSERT INTO users (id, name) VALUES (2, 'b')")));
    assert.equal(e.sqlstate, '23505');
  });

  void test('FATAL, PANIC and WARNING are errors; no statement → null fingerprint', () => {
    for (const severity of ['FATAL', 'PANIC', 'WARNING']) {
      const e = expectKind(parse('password authentication failed for user "bob"', { severity }), 'error');
      assert.equal(e.fingerprint, null);
      assert.equal(e.severity, severity);
    }
  });

  void test('deadlock detected → deadlock with processes', () => {
    const detail = [
      'Process 9561 waits for ShareLock on transaction 1062; blocked by process 9560.',
      'Process 9560 waits for ShareLock on transaction 1063; blocked by process 9561.',
      'Process 9561: UPDATE accounts SET balance = balance - 10 WHERE id = 2;',
      'Process 9560: UPDATE accounts',
      '   SET balance = balance + 10 WHERE id = 1;',
    ].join('\n');
    const e = expectKind(
      parse('deadlock detected', {
        severity: 'ERROR',
        sqlstate: '40P01',
        detail,
        hint: 'See server log for query details.',
        statement: 'UPDATE accounts SET balance = balance - 10 WHERE id = 2;',
      }),
      'deadlock',
    );
    assert.equal(e.message, 'deadlock detected');
    assert.deepEqual(e.processes, [
      {
        pid: 9561,
        lock_mode: 'ShareLock',
        lock_object: 'transaction 1062',
        blocked_by: 9560,
        query: 'UPDATE accounts SET balance = balance - 10 WHERE id = 2;',
      },
      {
        pid: 9560,
        lock_mode: 'ShareLock',
        lock_object: 'transaction 1063',
        blocked_by: 9561,
        query: 'UPDATE accounts\n   SET balance = balance + 10 WHERE id = 1;',
      },
    ]);
    assert.equal(e.statement, 'UPDATE accounts SET balance = balance - 10 WHERE id = 2;');
    // Without a SQLSTATE (a prefix without %e) the message decides.
    expectKind(parse('deadlock detected', { severity: 'ERROR' }), 'deadlock');
  });
});

void describe('lock waits', () => {
  void test('still waiting, one holder', () => {
    const e = expectKind(
      parse('process 9561 still waiting for ShareLock on transaction 1062 after 1000.123 ms', {
        detail: 'Process holding the lock: 9560. Wait queue: 9561.',
        context: 'while updating tuple (0,1) in relation "accounts"',
        statement: 'UPDATE accounts SET balance = 0 WHERE id = 1',
      }),
      'lock_wait',
    );
    assert.equal(e.state, 'waiting');
    assert.equal(e.waiting_pid, 9561);
    assert.equal(e.lock_mode, 'ShareLock');
    assert.equal(e.lock_type, 'transaction');
    assert.equal(e.lock_object, 'transaction 1062');
    assert.equal(e.wait_ms, 1000.123);
    assert.deepEqual(e.holder_pids, [9560]);
    assert.deepEqual(e.waiter_pids, [9561]);
    assert.equal(e.statement, 'UPDATE accounts SET balance = 0 WHERE id = 1');
  });

  void test('acquired, several holders, object kinds', () => {
    const e = expectKind(
      parse('process 77 acquired AccessExclusiveLock on relation 16384 of database 5 after 2500.5 ms', {
        detail: 'Processes holding the lock: 1, 2. Wait queue: 3, 4.',
      }),
      'lock_wait',
    );
    assert.equal(e.state, 'acquired');
    assert.equal(e.lock_type, 'relation');
    assert.equal(e.lock_object, 'relation 16384 of database 5');
    assert.deepEqual(e.holder_pids, [1, 2]);
    assert.deepEqual(e.waiter_pids, [3, 4]);
    const objects: [string, string][] = [
      ['tuple (0,1) of relation 16384 of database 5', 'tuple'],
      ['virtual transaction 3/1234', 'virtual transaction'],
      ['advisory lock [16384,0,42,1]', 'advisory lock'],
      ['extension of relation 16384 of database 5', 'extension of relation'],
      ['page 3 of relation 16384 of database 5', 'page'],
      ['object 16400 of class 1259 of database 5', 'object'],
      ['speculative token 5 of transaction 900', 'speculative token'],
      ['future thing 42', 'future thing'],
    ];
    for (const [object, type] of objects) {
      const w = expectKind(parse(`process 1 still waiting for ExclusiveLock on ${object} after 1000.000 ms`), 'lock_wait');
      assert.equal(w.lock_type, type, object);
      assert.equal(w.lock_object, object);
      assert.deepEqual(w.holder_pids, []);
    }
  });

  void test('avoided / detected deadlock and failed to acquire have their own states', () => {
    const a = expectKind(
      parse('process 5 avoided deadlock for AccessExclusiveLock on relation 1 of database 2 by rearranging queue order after 1000.1 ms'),
      'lock_wait',
    );
    assert.equal(a.state, 'deadlock_avoided');
    assert.equal(a.lock_object, 'relation 1 of database 2');
    const d = expectKind(parse('process 5 detected deadlock while waiting for ShareLock on transaction 9 after 1000.2 ms'), 'lock_wait');
    assert.equal(d.state, 'deadlock_detected');
    const f = expectKind(parse('process 5 failed to acquire ShareLock on transaction 9 after 1000.3 ms'), 'lock_wait');
    assert.equal(f.state, 'failed');
    expectKind(parse('process 5 did something else'), 'other');
  });
});

void describe('checkpoints', () => {
  void test('starting with flags, restartpoint', () => {
    const s = expectKind(parse('checkpoint starting: immediate force wait'), 'checkpoint');
    assert.equal(s.phase, 'starting');
    assert.equal(s.reason, 'immediate force wait');
    const r = expectKind(parse('restartpoint starting: time'), 'checkpoint');
    assert.equal(r.checkpoint_kind, 'restartpoint');
  });

  void test('complete, PG15 wording with lsn', () => {
    const e = expectKind(
      parse(
        'checkpoint complete: wrote 44272 buffers (4.2%); 0 WAL file(s) added, 1 removed, 38 recycled; write=26.895 s, sync=0.003 s, total=26.965 s; sync files=19, longest=0.002 s, average=0.001 s; distance=626950 kB, estimate=626951 kB; lsn=0/3514A14C, redo lsn=0/3514A118',
      ),
      'checkpoint',
    );
    assert.partialDeepStrictEqual(e, {
      phase: 'complete',
      buffers_written: 44272,
      buffers_pct: 4.2,
      wal_added: 0,
      wal_removed: 1,
      wal_recycled: 38,
      write_s: 26.895,
      sync_s: 0.003,
      total_s: 26.965,
      sync_files: 19,
      longest_sync_s: 0.002,
      average_sync_s: 0.001,
      distance_kb: 626950,
      estimate_kb: 626951,
    });
  });

  void test('complete, other versions: what is there is parsed, the rest null', () => {
    const e = expectKind(
      parse('restartpoint complete: wrote 10 buffers (0.1%), wrote 3 SLRU buffers; write=0.001 s, sync=0.002 s, total=0.004 s'),
      'checkpoint',
    );
    assert.equal(e.buffers_written, 10);
    assert.equal(e.total_s, 0.004);
    assert.equal(e.wal_added, null);
    assert.equal(e.distance_kb, null);
  });
});

void describe('autovacuum and autoanalyze', () => {
  const PG15 = [
    'automatic vacuum of table "app.public.orders": index scans: 1',
    'pages: 0 removed, 4425 remain, 4425 scanned (100.00% of total)',
    'tuples: 12000 removed, 500000 remain, 7 are dead but not yet removable',
    'removable cutoff: 1234567, which was 0 XIDs old when operation ended',
    'new relfrozenxid: 1234000, which is 100 XIDs ahead of previous value',
    'index scan needed: 120 pages from table (2.71% of total) had 12000 dead item identifiers removed',
    'index "orders_pkey": pages: 1374 in total, 0 newly deleted, 0 currently deleted, 0 reusable',
    'avg read rate: 12.345 MB/s, avg write rate: 6.789 MB/s',
    'buffer usage: 9040 hits, 12 misses, 4430 dirtied',
    'WAL usage: 8870 records, 4420 full page images, 36160455 bytes',
    'system usage: CPU: user: 0.12 s, system: 0.01 s, elapsed: 0.53 s',
  ].join('\n');

  void test('PG15 autovacuum report', () => {
    const e = expectKind(parse(PG15), 'autovacuum');
    assert.partialDeepStrictEqual(e, {
      table: 'app.public.orders',
      aggressive: false,
      wraparound: false,
      index_scans: 1,
      pages_removed: 0,
      pages_remain: 4425,
      pages_scanned: 4425,
      tuples_removed: 12000,
      tuples_remain: 500000,
      tuples_dead_not_removable: 7,
      read_rate_mbs: 12.345,
      write_rate_mbs: 6.789,
      buffer_hits: 9040,
      buffer_misses: 12,
      buffer_dirtied: 4430,
      wal_records: 8870,
      wal_fpi: 4420,
      wal_bytes: 36160455,
      cpu_user_s: 0.12,
      cpu_system_s: 0.01,
      elapsed_s: 0.53,
    });
  });

  void test('aggressive, wraparound, PG16 "reads", PG13 pages wording', () => {
    const msg = PG15.replace('automatic vacuum of', 'automatic aggressive vacuum to prevent wraparound of')
      .replace('12 misses', '13 reads')
      .replace('4425 scanned (100.00% of total)', '0 skipped due to pins, 0 skipped frozen');
    const e = expectKind(parse(msg), 'autovacuum');
    assert.equal(e.aggressive, true);
    assert.equal(e.wraparound, true);
    assert.equal(e.buffer_misses, 13);
    assert.equal(e.pages_scanned, null);
    assert.equal(e.pages_remain, 4425);
  });

  void test('autoanalyze', () => {
    const e = expectKind(
      parse(
        'automatic analyze of table "app.public.orders"\navg read rate: 0.000 MB/s, avg write rate: 0.000 MB/s\nbuffer usage: 1000 hits, 0 misses, 0 dirtied\nsystem usage: CPU: user: 0.05 s, system: 0.00 s, elapsed: 0.06 s',
      ),
      'autoanalyze',
    );
    assert.equal(e.table, 'app.public.orders');
    assert.equal(e.buffer_hits, 1000);
    assert.equal(e.elapsed_s, 0.06);
    expectKind(parse('automatic something new'), 'other');
  });
});

void describe('temporary files, connections', () => {
  void test('temporary file with its statement', () => {
    const e = expectKind(
      parse('temporary file: path "base/pgsql_tmp/pgsql_tmp12345.0", size 104857600', { statement: 'SELECT * FROM big ORDER BY 1' }),
      'temp_file',
    );
    assert.equal(e.path, 'base/pgsql_tmp/pgsql_tmp12345.0');
    assert.equal(e.size_bytes, 104857600);
    assert.equal(e.statement, 'SELECT * FROM big ORDER BY 1');
    assert.equal(e.fingerprint, fingerprintOf('select * from big order by ?'));
    expectKind(parse('temporary file: path "x", size lots'), 'other');
  });

  void test('connection phases', () => {
    const r = expectKind(parse('connection received: host=10.0.0.1 port=51234'), 'connection');
    assert.deepEqual([r.phase, r.host, r.port], ['received', '10.0.0.1', '51234']);
    const l = expectKind(parse('connection received: host=[local]'), 'connection');
    assert.deepEqual([l.host, l.port], ['[local]', null]);
    const a = expectKind(parse('connection authenticated: identity="alice" method=scram-sha-256 (/etc/postgresql/15/main/pg_hba.conf:98)'), 'connection');
    assert.deepEqual([a.phase, a.identity, a.method], ['authenticated', 'alice', 'scram-sha-256']);
    const z = expectKind(
      parse('connection authorized: user=alice database=app application_name=psql SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)'),
      'connection',
    );
    assert.equal(z.phase, 'authorized');
    assert.equal(z.details, 'user=alice database=app application_name=psql SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)');
    expectKind(parse('replication connection authorized: user=repl application_name=walreceiver'), 'connection');
    const ready = expectKind(parse('connection ready: setup total=12.345 ms, fork=1.234 ms, authentication=5.678 ms'), 'connection');
    assert.equal(ready.phase, 'ready');
  });

  void test('disconnection with session time', () => {
    const d = expectKind(parse('disconnection: session time: 1:02:03.456 user=alice database=app host=10.0.0.1 port=51234'), 'disconnection');
    assert.equal(d.session_ms, 3723456);
    assert.deepEqual([d.host, d.port], ['10.0.0.1', '51234']);
    expectKind(parse('disconnection: session time: x'), 'other');
  });
});

void describe('everything else and decoding', () => {
  void test('unknown messages are other events with every text field', () => {
    const e = expectKind(parse('database system is ready to accept connections', { detail: 'd', hint: 'h', context: 'c', statement: 's' }), 'other');
    assert.deepEqual(
      [e.message, e.detail, e.hint, e.context, e.statement, e.subtype, e.duration_ms],
      ['database system is ready to accept connections', 'd', 'h', 'c', 's', null, null],
    );
  });

  void test('Cyrillic in WIN1251 and KOI8R databases decodes to exact UTF-8 text', () => {
    const sql = "SELECT * FROM клиенты WHERE имя = 'Привет, мир'";
    const win = Buffer.concat([Buffer.from('duration: 1.000 ms  statement: '), iconv.encode(sql, 'windows-1251')]);
    const e = expectKind(parse(win, { database: 'win' }), 'statement');
    assert.equal(e.query, sql);
    assert.equal(e.normalized, 'select * from клиенты where имя = ?');
    const r = record(iconv.encode('отношение "заказы" не существует', 'koi8-r'), { severity: 'ERROR', database: 'koi' });
    r.statement = iconv.encode('SELECT * FROM заказы', 'koi8-r');
    const err = expectKind(parser().parse(r), 'error');
    assert.equal(err.message, 'отношение "заказы" не существует');
    assert.equal(err.statement, 'SELECT * FROM заказы');
    assert.equal(err.database, 'koi');
    r.user = iconv.encode('иван', 'koi8-r');
    r.application = iconv.encode('приложение', 'koi8-r');
    const named = parser().parse(r);
    assert.deepEqual([named.user, named.application], ['иван', 'приложение']);
  });

  void test('invalid UTF-8 and NULs are counted by the decoder', () => {
    const decoder = new Decoder(ENCODINGS);
    const p = new EventParser({ decoder });
    const e = expectKind(p.parse(record(Buffer.from([0x62, 0x61, 0x64, 0x20, 0xff, 0x00, 0x21]))), 'other');
    assert.equal(e.message, 'bad \uFFFD!');
    assert.equal(decoder.replacements, 1);
    assert.equal(decoder.nulRemoved, 1);
  });

  void test('pure: the same record gives the same event, whatever was parsed before', () => {
    const p = parser();
    const recs = [record('statement: SELECT 1', { database: 'win' }), record('deadlock detected', { severity: 'ERROR' }), record('checkpoint starting: time')];
    const first = recs.map((r) => p.parse(r));
    const again = [...recs]
      .reverse()
      .map((r) => parser().parse(r))
      .reverse();
    assert.deepEqual(again, first);
    assert.deepEqual(
      recs.map((r) => p.parse(r)),
      first,
    );
  });

  void test('never throws on arbitrary records; every event has a known kind and no NaN', () => {
    const prefixes = [
      '',
      'duration: ',
      'duration: 1.5 ms  ',
      'duration: 1.5 ms  plan:\n',
      'duration: 1 ms  plan:\n{"Query Text": "',
      'statement: ',
      'execute ',
      'process 1 ',
      'process 1 still waiting for X on ',
      'checkpoint complete: ',
      'restartpoint ',
      'automatic vacuum of table "',
      'automatic analyze of table "',
      'temporary file: path "',
      'connection received: ',
      'connection authenticated: identity="',
      'disconnection: session time: ',
      'deadlock detected',
    ];
    const text = fc.oneof(
      fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b)),
      fc.string({ maxLength: 80 }).map((s) => Buffer.from(s)),
    );
    const maybe = fc.option(text, { nil: null });
    const arb = fc.record({
      prefix: fc.constantFrom(...prefixes),
      message: text,
      detail: maybe,
      hint: maybe,
      context: maybe,
      statement: maybe,
      internalQuery: maybe,
      database: fc.option(fc.constantFrom('win', 'koi', 'app'), { nil: null }).map((d) => (d === null ? null : Buffer.from(d))),
      user: maybe,
      application: maybe,
      time: fc.option(fc.string(), { nil: null }),
      severity: fc.constantFrom('LOG', 'ERROR', 'FATAL', 'PANIC', 'WARNING', 'NOTICE', 'DEBUG1', ''),
      sqlstate: fc.option(fc.constantFrom('40P01', '23505', 'XX000'), { nil: null }),
    });
    const p = parser();
    fc.assert(
      fc.property(arb, (a) => {
        const r = emptyRecord(0, 1, a.severity, Buffer.concat([Buffer.from(a.prefix), a.message]));
        Object.assign(r, {
          detail: a.detail,
          hint: a.hint,
          context: a.context,
          statement: a.statement,
          internalQuery: a.internalQuery,
          database: a.database,
          user: a.user,
          application: a.application,
          time: a.time,
          sqlstate: a.sqlstate,
        });
        const e = p.parse(r);
        assert.ok((EVENT_KINDS as readonly string[]).includes(e.kind));
        JSON.stringify(e, (_k, v: unknown) => {
          assert.ok(typeof v !== 'number' || Number.isFinite(v), `NaN/Infinity in ${e.kind}`);
          return v;
        });
      }),
      { numRuns: 5000 },
    );
  });
});

describe('autovacuum workers (no session database)', () => {
  test('the database named in the message decodes the table name and becomes the event database', () => {
    const parser = new EventParser({ decoder: new Decoder(ENCODINGS) });
    const message = Buffer.concat([
      Buffer.from('automatic analyze of table "win.public.'),
      iconv.encode('клиенты', 'win1251'),
      Buffer.from(
        '"\navg read rate: 0.000 MB/s, avg write rate: 0.000 MB/s\nbuffer usage: 10 hits, 0 misses, 0 dirtied\nsystem usage: CPU: user: 0.00 s, system: 0.00 s, elapsed: 0.00 s',
      ),
    ]);
    const e = parser.parse(record(message));
    assert.equal(e.kind, 'autoanalyze');
    assert.equal(e.database, 'win');
    assert.equal(e.kind === 'autoanalyze' ? e.table : null, 'win.public.клиенты');
  });

  test('an entry that has a database keeps it', () => {
    const parser = new EventParser({ decoder: new Decoder(ENCODINGS) });
    const e = parser.parse(record('automatic vacuum of table "other.public.t": index scans: 0', { database: 'koi' }));
    assert.equal(e.database, 'koi');
  });
});

describe('error positions', () => {
  test('cursor and internal positions of the record are on the error event', () => {
    const parser = new EventParser({ decoder: new Decoder(ENCODINGS) });
    const r = record('syntax error at or near "SELEC"', { severity: 'ERROR', statement: 'SELEC 1' });
    r.cursorPosition = 1;
    const e = parser.parse(r);
    assert.equal(e.kind === 'error' ? e.cursor_position : undefined, 1);
    assert.equal(e.kind === 'error' ? e.internal_position : undefined, null);
  });
});
