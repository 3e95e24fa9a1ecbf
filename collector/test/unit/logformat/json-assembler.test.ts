// The jsonlog assembler on fixtures/asm-jsonlog.json: field by field the same records as the
// csvlog fixture, raw non-UTF-8 bytes kept exact through JSON escapes, any chunking and resume
// point, invalid lines kept as UNKNOWN, the leading fields of a line cut at the cap salvaged.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assemble, checkGarbage, fixture, plain } from '../../fixtures/asm-harness.ts';
import { assertSeveritiesAndMessages, itCutsAndResumes } from '../../helpers/assembler-cases.ts';

const data = fixture('asm-jsonlog.json');

void describe('jsonlog assembler', () => {
  void it('reads the fixture and agrees with csvlog field by field', () => {
    const { records, stats } = assemble('jsonlog', data, {});
    assert.deepEqual(stats, { entries: 10, truncated: 0, malformed: 0 });
    const csv = assemble('csvlog', fixture('asm-csvlog.csv'), {}).records;
    assert.deepEqual(
      records.map((r) => ({ ...plain(r), start: 0, end: 0 })),
      csv.map((r) => ({ ...plain(r), start: 0, end: 0 })),
    );
    assert.equal(records[2]!.queryId, '-3122138129829876453');
  });

  void it('keeps raw non-UTF-8 bytes exact (WIN1251)', () => {
    const line = Buffer.concat([
      Buffer.from('{"timestamp":"2024-03-05 10:00:01.001 UTC","pid":9,"error_severity":"LOG","message":"'),
      Buffer.from([0xcf, 0xf0, 0xe8, 0x22 - 0x22 + 0x5c, 0x6e, 0xff]),
      Buffer.from('\\u0001\\t","statement":"\\"q\\""}\n'),
    ]);
    const [r] = assemble('jsonlog', line, {}).records;
    assert.deepEqual(r!.message, Buffer.from([0xcf, 0xf0, 0xe8, 0x0a, 0xff, 0x01, 0x09]));
    assert.deepEqual(r!.statement, Buffer.from('"q"'));
    assert.equal(r!.pid, 9);
  });

  itCutsAndResumes('jsonlog', data, {});

  void it('keeps invalid lines as UNKNOWN records', () => {
    assertSeveritiesAndMessages(
      'jsonlog',
      Buffer.from('not json\n[1]\n{"error_severity":"LOG","message":"ok"}\n{}\n'),
      [
        ['UNKNOWN', 'not json'],
        ['UNKNOWN', '[1]'],
        ['LOG', 'ok'],
        ['UNKNOWN', ''],
      ],
      3,
      'a JSON object without error_severity is no entry either',
    );
  });

  void it('salvages the leading fields of a line cut at the cap', () => {
    const line = Buffer.from(
      `{"timestamp":"2024-03-05 10:00:01.001 UTC","pid":9,"error_severity":"ERROR","state_code":"XX000","message":"${'m'.repeat(300)}"}\n{"message":"next"}\n`,
    );
    const { records, stats } = assemble('jsonlog', line, { maxEntryBytes: 120 });
    assert.equal(records[0]!.truncated, true);
    assert.equal(records[0]!.severity, 'ERROR');
    assert.equal(records[0]!.pid, 9);
    assert.equal(records[0]!.sqlstate, 'XX000');
    assert.equal(records[1]!.message.toString(), 'next');
    assert.equal(stats.truncated, 1);
  });

  void it('never throws on garbage', () => {
    checkGarbage('jsonlog', {}, data);
  });
});
