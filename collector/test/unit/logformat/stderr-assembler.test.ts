// The stderr assembler on fixtures/asm-stderr.log (prefix '%m [%p] %q%u@%d '): one record per
// ereport with its DETAIL/HINT/CONTEXT/STATEMENT lines, any chunking and resume point, CRLF,
// unprefixed and orphan lines, verbose SQLSTATE and LOCATION, the entry cap, raw bytes kept,
// and the server's " at character N" moved into cursorPosition.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assemble, checkGarbage, fixture, plain } from '../../fixtures/asm-harness.ts';
import { itCutsAndResumes, logOf } from '../../helpers/assembler-cases.ts';

const opts = { prefix: '%m [%p] %q%u@%d ' };
const data = fixture('asm-stderr.log');

void describe('stderr assembler', () => {
  void it('assembles the fixture: one record per ereport, auxiliary lines attached', () => {
    const { records, stats } = assemble('stderr', data, opts);
    assert.equal(records.length, 10);
    assert.deepEqual(stats, { entries: 10, truncated: 0, malformed: 0 });
    const r0 = plain(records[0]!);
    assert.equal(r0.time, '2024-03-05 10:00:01.001 UTC');
    assert.equal(r0.pid, 101);
    assert.equal(r0.user, null);
    assert.equal(r0.message, 'b:checkpoint starting: time');
    const r2 = plain(records[2]!);
    assert.equal(r2.message, 'b:duration: 1.234 ms  statement: SELECT a, b\n  FROM t\n WHERE a = \'x, "y"\'');
    assert.equal(r2.user, 'b:alice');
    assert.equal(r2.database, 'b:shop');
    const r3 = plain(records[3]!);
    assert.equal(r3.severity, 'ERROR');
    assert.equal(r3.detail, 'b:Key (a)=(1) already exists.');
    assert.equal(r3.statement, 'b:INSERT INTO t VALUES (1,\n\t2);');
    const r5 = plain(records[5]!);
    assert.equal(r5.internalQuery, 'b:SELECT f2()');
    assert.equal(r5.context, 'b:PL/pgSQL function f() line 3 at RAISE\nSQL statement "SELECT f2()"');
    const r6 = records[6]!;
    assert.deepEqual(r6.statement, Buffer.from("UPDATE \xd2\xee\xe2\xe0\xf0 SET name = '\xcf\xf0\xe8\xe2\xe5\xf2' WHERE id = 1", 'latin1'));
    assert.equal(plain(r6).hint, "b:Use the escape string syntax for backslashes, e.g., E'\\\\'.");
    assert.equal(
      records[7]!.message.toString(),
      'automatic vacuum of table "shop.public.t": index scans: 0\npages: 0 removed, 1 remain\ntuples: 0 removed, 1 remain',
    );
    assert.equal(records[9]!.end, data.length);
  });

  itCutsAndResumes('stderr', data, opts);

  void it('reads CRLF logs like LF logs', () => {
    const crlf = Buffer.from(data.toString('latin1').replace(/\n/g, '\r\n'), 'latin1');
    const a = assemble('stderr', data, opts).records.map((r) => ({ ...plain(r), start: 0, end: 0 }));
    const b = assemble('stderr', crlf, opts).records.map((r) => ({ ...plain(r), start: 0, end: 0 }));
    assert.deepEqual(b, a);
  });

  void it('keeps unprefixed lines as UNKNOWN records and orphan auxiliary lines as their own record', () => {
    const log = logOf([
      '\tstray continuation',
      '2024-03-05 10:00:01.001 UTC [5] LOG:  a',
      'sh: archive command output',
      '\tafter garbage',
      '2024-03-05 10:00:01.001 UTC [6] u@d DETAIL:  orphan of pid 6',
      '2024-03-05 10:00:01.001 UTC [5] LOG:  b',
      '2024-03-05 10:00:01.001 UTC [6] u@d DETAIL:  pid mismatch',
    ]);
    const { records, stats } = assemble('stderr', log, opts);
    assert.deepEqual(
      records.map((r) => [r.severity, r.message.toString(), r.detail?.toString() ?? null]),
      [
        ['UNKNOWN', '\tstray continuation', null],
        ['LOG', 'a', null],
        ['UNKNOWN', 'sh: archive command output', null],
        ['UNKNOWN', '\tafter garbage', null],
        ['DETAIL', '', 'orphan of pid 6'],
        ['LOG', 'b', null],
        ['DETAIL', '', 'pid mismatch'],
      ],
    );
    assert.equal(stats.malformed, 5);
    assert.equal(records[4]!.pid, 6);
    assert.equal(records[4]!.user?.toString(), 'u');
  });

  void it('reads the SQLSTATE of log_error_verbosity = verbose and the LOCATION line', () => {
    const log = logOf([
      '2024-03-05 10:00:01.001 UTC [5] u@d ERROR:  42P01: relation "x" does not exist',
      '2024-03-05 10:00:01.001 UTC [5] u@d LOCATION:  parserOpenTable, parse_relation.c:1392',
      '2024-03-05 10:00:01.001 UTC [5] u@d STATEMENT:  select * from x',
    ]);
    const [r] = assemble('stderr', log, opts).records;
    assert.equal(r!.sqlstate, '42P01');
    assert.equal(r!.message.toString(), 'relation "x" does not exist');
    assert.equal(r!.location, 'parserOpenTable, parse_relation.c:1392');
    assert.equal(r!.statement?.toString(), 'select * from x');
  });

  void it('cuts entries at the cap, skips the rest of them and goes on', () => {
    const big = '2024-03-05 10:00:01.001 UTC [5] LOG:  statement: ' + 'x'.repeat(100);
    const log = Buffer.from([big, '\t' + 'y'.repeat(100), '\tmore', '2024-03-05 10:00:01.001 UTC [5] LOG:  next', ''].join('\n'));
    const { records, stats } = assemble('stderr', log, { ...opts, maxEntryBytes: 120 });
    assert.equal(records.length, 2);
    assert.equal(records[0]!.truncated, true);
    assert.ok(records[0]!.message.length <= 120);
    assert.ok(records[0]!.message.toString().startsWith('statement: xxx'));
    assert.equal(records[0]!.end, records[1]!.start);
    assert.equal(records[1]!.truncated, false);
    assert.equal(records[1]!.message.toString(), 'next');
    assert.deepEqual(stats, { entries: 2, truncated: 1, malformed: 0 });
  });

  void it('marks an entry whose line the splitter cut', () => {
    const log = Buffer.from('2024-03-05 10:00:01.001 UTC [5] LOG:  ' + 'z'.repeat(300) + '\n2024-03-05 10:00:01.001 UTC [5] LOG:  ok\n');
    const { records, stats } = assemble('stderr', log, { ...opts, maxEntryBytes: 100 });
    assert.deepEqual(
      records.map((r) => r.truncated),
      [true, false],
    );
    assert.equal(stats.truncated, 1);
  });

  void it('passes NUL and invalid bytes through, never throws on garbage', () => {
    const log = Buffer.concat([Buffer.from('2024-03-05 10:00:01.001 UTC [5] LOG:  a'), Buffer.from([0, 0xff, 0xfe, 0]), Buffer.from('\n')]);
    assert.deepEqual(assemble('stderr', log, opts).records[0]!.message, Buffer.from([0x61, 0, 0xff, 0xfe, 0]));
    checkGarbage('stderr', opts, data);
  });
});

void describe('error positions in stderr', () => {
  void it('moves the " at character N" the server appends into cursorPosition', () => {
    const log = logOf([
      '2024-03-05 10:00:01.004 UTC [202] alice@shop ERROR:  syntax error at or near "SELEC" at character 1',
      '2024-03-05 10:00:01.004 UTC [202] alice@shop STATEMENT:  SELEC 1',
      '2024-03-05 10:00:01.005 UTC [203] alice@shop LOG:  process 203 still waiting for AccessShareLock on relation 1 of database 2 after 100.085 ms at character 22',
      '2024-03-05 10:00:01.006 UTC [204] alice@shop ERROR:  the text mentions at character x',
    ]);
    const { records } = assemble('stderr', log, opts);
    assert.equal(records[0]!.message.toString(), 'syntax error at or near "SELEC"');
    assert.equal(records[0]!.cursorPosition, 1);
    assert.equal(records[1]!.message.toString(), 'process 203 still waiting for AccessShareLock on relation 1 of database 2 after 100.085 ms');
    assert.equal(records[1]!.cursorPosition, 22);
    assert.equal(records[2]!.message.toString(), 'the text mentions at character x');
    assert.equal(records[2]!.cursorPosition, null);
  });
});
