// The csvlog assembler on fixtures/asm-csvlog.csv and hand-written rows: every column (and
// PostgreSQL 13's 24), the same entries as the stderr fixture, any chunking and resume point,
// "" unescaped into new buffers only where needed; damage (a row cut inside a quoted field, rows
// run together, row-like lines inside a message) costs only the rows it touches.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { createAssembler } from '../../../src/logformat/assembler.ts';
import { LineSplitter } from '../../../src/logformat/line-splitter.ts';
import type { LogRecord } from '../../../src/logformat/record.ts';
import { assemble, checkGarbage, fixture, plain } from '../../fixtures/asm-harness.ts';
import { assertSeveritiesAndMessages, itCutsAndResumes } from '../../helpers/assembler-cases.ts';

const data = fixture('asm-csvlog.csv');
const stderr = fixture('asm-stderr.log');

/** A csvlog row as PostgreSQL 15 writes it (the review's F6 reproduction). */
const row = (i: number, msg: string): string =>
  `2024-05-01 10:00:00.${String(i % 1000).padStart(3, '0')} UTC,"app","db",1234,"10.0.0.1:5000",663200a0.4d2,${i},"SELECT",2024-05-01 09:59:00 UTC,3/${i},0,LOG,00000,"${msg.replaceAll('"', '""')}",,,,,,,,,"psql","client backend",,0\n`;

/** Records emitted while `data` is pushed in `chunk`-byte pieces, before end of input (a followed file). */
function follow(data: Buffer, chunk: number): { live: LogRecord[]; malformed: number } {
  const live: LogRecord[] = [];
  const a = createAssembler('csvlog', (r) => live.push(r));
  const s = new LineSplitter((b, f, t, o, n, tr) => a.pushLine(b, f, t, o, n, tr));
  for (let i = 0; i < data.length; i += chunk) s.push(data.subarray(i, i + chunk));
  return { live, malformed: a.stats.malformed };
}

/** The fields every format must agree on. */
function common(r: Record<string, unknown>): Record<string, unknown> {
  return {
    time: r.time,
    pid: r.pid,
    user: r.user,
    database: r.database,
    severity: r.severity,
    message: r.message,
    detail: r.detail,
    hint: r.hint,
    context: r.context,
    statement: r.statement,
    internalQuery: r.internalQuery,
  };
}

void describe('csvlog assembler', () => {
  void it('reads every column of the fixture', () => {
    const { records, stats } = assemble('csvlog', data, {});
    assert.deepEqual(stats, { entries: 10, truncated: 0, malformed: 0 });
    assert.deepEqual(plain(records[3]!), {
      start: records[2]!.end,
      end: records[4]!.start,
      time: '2024-03-05 10:00:01.004 UTC',
      pid: 202,
      user: 'b:alice',
      database: 'b:shop',
      application: 'b:psql',
      remoteHost: '10.0.0.5',
      remotePort: '51234',
      sessionId: '65e6ed01.ca',
      sessionLine: 4,
      commandTag: 'INSERT',
      sessionStart: '2024-03-05 10:00:00 UTC',
      vxid: '3/3',
      txid: '745',
      backendType: 'client backend',
      leaderPid: null,
      queryId: '0',
      severity: 'ERROR',
      sqlstate: '23505',
      message: 'b:duplicate key value violates unique constraint "t_pkey"',
      detail: 'b:Key (a)=(1) already exists.',
      hint: null,
      context: null,
      statement: 'b:INSERT INTO t VALUES (1,\n\t2);',
      internalQuery: null,
      cursorPosition: null,
      internalPosition: null,
      location: null,
      truncated: false,
    });
    assert.equal(records[2]!.queryId, '-3122138129829876453');
    assert.equal(records[6]!.remoteHost, '[local]');
    assert.equal(records[6]!.remotePort, null);
    assert.deepEqual(records[6]!.application, Buffer.from('app \xcf\xf0\xe8', 'latin1'));
    assert.equal(records[4]!.application, null);
  });

  void it('agrees with the stderr log of the same entries', () => {
    const csv = assemble('csvlog', data, {}).records.map((r) => common(plain(r)));
    const txt = assemble('stderr', stderr, { prefix: '%m [%p] %q%u@%d ' }).records.map((r) => common(plain(r)));
    assert.deepEqual(csv, txt);
  });

  itCutsAndResumes('csvlog', data, {});

  void it('unescapes "" into new buffers only where needed, views otherwise', () => {
    const multi = Buffer.from(
      '2024-03-05 10:00:01.001 UTC,"u","d",1,,s.1,1,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"say ""hi""\nsecond line","plain",,,,,,,,"a","client backend",,0\n',
    );
    const [m] = assemble('csvlog', multi, {}).records;
    assert.equal(m!.message.toString(), 'say "hi"\nsecond line');
    assert.equal(m!.detail?.toString(), 'plain');
    assert.equal(m!.commandTag, null);
    const row = Buffer.alloc(400);
    const n = row.write(
      '2024-03-05 10:00:01.001 UTC,"u","d",1,,s.1,1,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"say ""hi""","plain",,,,,,,,"a","client backend",,0\n',
      'latin1',
    );
    const [r] = assemble('csvlog', row.subarray(0, n), {}).records;
    const inRow = (v: Buffer): boolean => v.buffer === row.buffer && v.byteOffset >= row.byteOffset && v.byteOffset + v.length <= row.byteOffset + n;
    assert.equal(r!.message.toString(), 'say "hi"');
    assert.ok(inRow(r!.detail!), 'a field without "" is a view of the line');
    assert.ok(!inRow(r!.message), 'a field with "" is a new buffer');
  });

  void it('reads PostgreSQL 13 rows (24 columns)', () => {
    const row = Buffer.from(
      '2024-03-05 10:00:01.001 UTC,"u","d",1,127.0.0.1:5000,s.1,1,"idle",2024-03-05 10:00:00 UTC,3/1,0,LOG,00000,"m",,,,,,,,,"psql","client backend"\n',
    );
    const [r] = assemble('csvlog', row, {}).records;
    assert.equal(r!.backendType, 'client backend');
    assert.equal(r!.queryId, null);
    assert.equal(r!.remoteHost, '127.0.0.1');
    assert.equal(r!.remotePort, '5000');
  });

  void it('gives a record for a quoted field still open at the end of input', () => {
    const log = Buffer.from(
      '2024-03-05 10:00:01.001 UTC,"u","d",1,,s.1,1,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"ok",,,,,,,,,"a","client backend",,0\n2024-03-05 10:00:01.002 UTC,"u","d",1,,s.1,2,"",2024-03-05 10:00:00 UTC,,0,ERROR,42000,"cut here\nand',
    );
    const { records, stats } = assemble('csvlog', log, {});
    assert.equal(records.length, 2);
    assert.equal(records[1]!.severity, 'ERROR');
    assert.equal(records[1]!.message.toString(), 'cut here\nand');
    assert.equal(records[1]!.end, log.length);
    assert.equal(stats.malformed, 1);
  });

  void it('keeps rows that are not csvlog as UNKNOWN records', () => {
    assertSeveritiesAndMessages(
      'csvlog',
      Buffer.from('hello,world\n\n'),
      [
        ['UNKNOWN', 'hello,world'],
        ['UNKNOWN', ''],
      ],
      2,
    );
  });

  void it('cuts a long entry at the cap and finds the next row', () => {
    const long =
      '2024-03-05 10:00:01.001 UTC,"u","d",1,,s.1,1,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"' + 'a\n'.repeat(200) + '",,,,,,,,,"a","client backend",,0\n';
    const next = '2024-03-05 10:00:01.002 UTC,"u","d",1,,s.1,2,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"next",,,,,,,,,"a","client backend",,0\n';
    const { records, stats } = assemble('csvlog', Buffer.from(long + next), { maxEntryBytes: 150 });
    assert.equal(records.length, 2);
    assert.equal(records[0]!.truncated, true);
    assert.equal(records[0]!.severity, 'LOG');
    assert.equal(records[1]!.message.toString(), 'next');
    assert.equal(stats.truncated, 1);
    // A single line longer than the cap (cut by the splitter, quote state lost): the next row still starts a record.
    const oneLine =
      '2024-03-05 10:00:01.001 UTC,"u","d",1,,s.1,1,"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"' + 'b'.repeat(400) + '",,,,,,,,,"a","client backend",,0\n';
    const r2 = assemble('csvlog', Buffer.from(oneLine + next), { maxEntryBytes: 150 });
    assert.deepEqual(
      r2.records.map((r) => [r.truncated, r.severity]),
      [
        [true, 'LOG'],
        [false, 'LOG'],
      ],
    );
  });

  void it('a row cut inside a quoted field costs only itself and the row written onto its line; the rest come out as they arrive (review F6)', () => {
    let good = '';
    for (let i = 2; i < 2002; i++) good += row(i, `statement ${i}`);
    const multi = row(1, 'duration: 1.0 ms  statement: SELECT a,\n       b FROM t WHERE x = 1');
    const cut = multi.slice(0, multi.indexOf('b FROM') + 4); // the write of row 1 stops mid-field
    const log = Buffer.from(row(0, 'first') + cut + good);
    const { live, malformed } = follow(log, 4096);
    // Row 1 and row 2 (appended to row 1's cut line) are one UNKNOWN record; rows 3.. are whole.
    assert.deepEqual(
      live.map((r) => r.sessionLine),
      [0, null, ...Array.from({ length: 1999 }, (_, k) => k + 3)],
    );
    assert.equal(live[1]!.severity, 'UNKNOWN');
    assert.equal(live[1]!.message.toString(), (cut + row(2, 'statement 2')).slice(0, -1));
    assert.equal(live[2]!.start, live[1]!.end);
    assert.equal(malformed, 1);
  });

  void it('a role cannot split its row by logging lines that look like rows, nor make it look damaged', () => {
    const forged = [
      row(7, 'forged'),
      `${row(8, 'x').slice(0, 60)}"`, // odd quotes on a line of its own
      '2024-05-01 10:00:00.000 UTC,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,1,2,3', // more columns than a row
      '2024-05-01 10:00:00.000 UTC,"a"b,"', // text after a closing quote
    ].join('\n');
    const log = Buffer.from(row(1, `RAISE LOG:\n${forged}\nend`) + row(2, forged) + row(3, 'after'));
    const { records, stats } = assemble('csvlog', log, {});
    assert.deepEqual(
      records.map((r) => r.sessionLine),
      [1, 2, 3],
    );
    assert.equal(records[0]!.message.toString(), `RAISE LOG:\n${forged}\nend`);
    assert.equal(records[1]!.message.toString(), forged);
    assert.equal(stats.malformed, 0);
  });

  void it('counts a row that two writes ran together as malformed, raw, without columns of either', () => {
    const first = row(1, 'one');
    const log = Buffer.from(first.slice(0, 40) + row(2, 'two') + row(3, 'three'));
    const { records, stats } = assemble('csvlog', log, {});
    assert.deepEqual(
      records.map((r) => [r.severity, r.sessionLine]),
      [
        ['UNKNOWN', null],
        ['LOG', 3],
      ],
    );
    assert.equal(stats.malformed, 1);
  });

  void it('never throws on garbage', () => {
    checkGarbage('csvlog', {}, data);
  });
});
