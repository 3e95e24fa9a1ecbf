// The syslog assembler on fixtures/asm-syslog.log: #011 continuations and [N-M] split lines
// give the same entries as the csvlog fixture; any chunking and resume point; RFC 3339 headers,
// logs without sequence numbers, lines of another pid or not syslog at all; never throws.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assemble, checkChunking, checkGarbage, fixture, plain } from '../../fixtures/asm-harness.ts';
import { itCutsAndResumes, logOf } from '../../helpers/assembler-cases.ts';

const opts = { prefix: 'user=%u,db=%d,app=%a,client=%h ' };
const data = fixture('asm-syslog.log');

void describe('syslog assembler', () => {
  void it('assembles continuation (#011) and split lines into the same entries as csvlog', () => {
    const { records, stats } = assemble('syslog', data, opts);
    assert.deepEqual(stats, { entries: 10, truncated: 0, malformed: 0 });
    const csv = assemble('csvlog', fixture('asm-csvlog.csv'), {}).records;
    const pick = (r: Record<string, unknown>): unknown[] => [
      r.pid,
      r.user,
      r.database,
      r.severity,
      r.message,
      r.detail,
      r.hint,
      r.context,
      r.statement,
      r.internalQuery,
    ];
    assert.deepEqual(
      records.map((r) => pick(plain(r))),
      csv.map((r) => pick(plain(r))),
    );
    assert.equal(records[8]!.message.length, "duration: 0.5 ms  statement: SELECT '' AS long_literal".length + 1900);
    assert.equal(records[0]!.time, 'Mar  5 10:00:01');
    assert.equal(records[2]!.remoteHost, '10.0.0.5');
  });

  itCutsAndResumes('syslog', data, opts, false);

  void it('gives the same records however the lines before the split ones are cut, at every offset too', () => {
    checkChunking('syslog', data.subarray(0, data.indexOf('[5-1]')), opts, true);
  });

  void it('reads RFC 3339 headers and logs without sequence numbers', () => {
    const log = logOf([
      '2024-01-02T03:04:05.123456+00:00 db1 postgres[77]: [1-1] 2024-01-02 03:04:05.123 UTC [77] LOG:  duration: 2 ms  statement: select 1',
      '2024-01-02T03:04:05.123456+00:00 db1 postgres[77]: [1-2] #011from t',
      '<13>2024-01-02T03:04:06Z db1 postgres[78]: 2024-01-02 03:04:06.000 UTC [78] ERROR:  bad',
      '2024-01-02T03:04:06Z db1 postgres[78]: #011second#011line',
      '2024-01-02T03:04:06Z db1 postgres[78]: 2024-01-02 03:04:06.000 UTC [78] HINT:  try again',
      '2024-01-02T03:04:06Z db1 postgres[79]: #011not ours',
      'Jan  2 03:04:07 postgres[80]: 2024-01-02 03:04:07.000 UTC [80] LOG:  no host in the header',
      'not syslog at all',
    ]);
    const { records, stats } = assemble('syslog', log, { prefix: '%m [%p] ' });
    assert.deepEqual(
      records.map((r) => [r.pid, r.severity, r.message.toString(), r.hint?.toString() ?? null]),
      [
        [77, 'LOG', 'duration: 2 ms  statement: select 1\nfrom t', null],
        [78, 'ERROR', 'bad\nsecond\tline', 'try again'],
        [null, 'UNKNOWN', '2024-01-02T03:04:06Z db1 postgres[79]: #011not ours', null],
        [80, 'LOG', 'no host in the header', null],
        [null, 'UNKNOWN', 'not syslog at all', null],
      ],
    );
    assert.equal(records[0]!.time, '2024-01-02 03:04:05.123 UTC');
    assert.equal(stats.malformed, 2);
  });

  void it('never throws on garbage', () => {
    checkGarbage('syslog', opts, data);
  });
});
