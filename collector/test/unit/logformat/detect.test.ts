// Guessing a log's format and log_line_prefix from a sample of it (the fixtures and
// hand-written lines): each format recognized, non-logs refused, samples cut mid-line or
// mid-row still recognized; the known prefixes (default, Debian's, pgBadger's, Amazon RDS) found.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { detectFormat, detectPrefix } from '../../../src/logformat/detect.ts';
import { fixture } from '../../fixtures/asm-harness.ts';

function stderrSample(lines: string[]): Buffer {
  return Buffer.from(lines.join('\n') + '\n');
}

void describe('detectFormat', () => {
  void it('recognizes each fixture', () => {
    assert.equal(detectFormat(fixture('asm-stderr.log')), 'stderr');
    assert.equal(detectFormat(fixture('asm-csvlog.csv')), 'csvlog');
    assert.equal(detectFormat(fixture('asm-jsonlog.json')), 'jsonlog');
    assert.equal(detectFormat(fixture('asm-syslog.log')), 'syslog');
  });

  void it('returns null for what is no PostgreSQL log', () => {
    assert.equal(detectFormat(Buffer.from('hello world\nfoo bar\n')), null);
    assert.equal(detectFormat(Buffer.alloc(0)), null);
    assert.equal(detectFormat(Buffer.from([0, 1, 2, 255, 10, 7])), null);
  });

  void it('does not take a stderr log with commas for csv', () => {
    const s = stderrSample(['2024-03-05 10:00:01.001 UTC,12 LOG:  a, b, c, d, e, f, g, h, i, j, k, l, m, n', '2024-03-05 10:00:01.001 UTC,12 LOG:  x']);
    assert.equal(detectFormat(s), null); // no known prefix fits either
  });

  void it('copes with a sample cut in the middle of a line', () => {
    const s = fixture('asm-csvlog.csv');
    assert.equal(detectFormat(s.subarray(0, 700)), 'csvlog');
  });

  void it('recognizes csvlog when the first row of the sample was cut inside a quoted field and the next one written onto its line', () => {
    const row = (i: number, msg: string): string =>
      `2024-03-05 10:00:01.${String(i).padStart(3, '0')} UTC,"u","d",1,,s.1,${i},"",2024-03-05 10:00:00 UTC,,0,LOG,00000,"${msg}",,,,,,,,,"a","client backend",,0\n`;
    let rows = row(0, 'SELECT a,\n       b FROM t').slice(0, -40);
    for (let i = 1; i < 50; i++) rows += row(i, 'm');
    assert.equal(detectFormat(Buffer.from(rows)), 'csvlog');
  });
});

void describe('detectPrefix', () => {
  void it('finds the Debian prefix (with %q) over the default one', () => {
    assert.equal(detectPrefix(fixture('asm-stderr.log'), 'stderr'), '%m [%p] %q%u@%d ');
  });

  void it('finds the default prefix', () => {
    const s = stderrSample(['2024-03-05 10:00:01.001 UTC [5] LOG:  a', '2024-03-05 10:00:01.002 UTC [6] ERROR:  b', '\tcontinued']);
    assert.equal(detectPrefix(s, 'stderr'), '%m [%p] ');
  });

  void it("finds pgBadger's prefix", () => {
    const s = stderrSample([
      '2024-03-05 10:00:01 UTC [5]: [1-1] user=,db=,app=,client= LOG:  checkpoint starting: time',
      '2024-03-05 10:00:02 UTC [6]: [3-1] user=bob,db=shop,app=psql,client=10.0.0.1 LOG:  duration: 1 ms  statement: select 1',
    ]);
    assert.equal(detectPrefix(s, 'stderr'), '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ');
  });

  void it('finds the Amazon RDS prefix', () => {
    const s = stderrSample(['2024-03-05 10:00:01 UTC:10.0.0.1(5432):bob@shop:[77]:LOG:  connection authorized: user=bob']);
    assert.equal(detectPrefix(s, 'stderr'), '%t:%r:%u@%d:[%p]:');
  });

  void it('finds the prefix inside syslog lines', () => {
    assert.equal(detectPrefix(fixture('asm-syslog.log'), 'syslog'), 'user=%u,db=%d,app=%a,client=%h ');
  });

  void it('returns null when no known prefix fits', () => {
    assert.equal(detectPrefix(Buffer.from('something else\n'), 'stderr'), null);
  });
});
