// The shell side of following, without a server: shellQuote round-trips any string under sh's
// single-quote rules (a fast-check property, with a small sh unquoter here) and every path goes
// into the probe and segment scripts quoted; probe output (NUL-separated, names with spaces and
// newlines), log file names, segment status lines and file identities are parsed or refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { formatIdentity, parseIdentity } from '../../../src/follow/identity.ts';
import { classifyLogFileName } from '../../../src/follow/log-files.ts';
import { buildProbeScript, checksumKey, parseProbeOutput } from '../../../src/follow/probe-script.ts';
import { buildSegmentScript, parseSegmentStatus } from '../../../src/follow/segment-script.ts';
import { shellInteger, shellQuote } from '../../../src/follow/shell-quote.ts';
import { segmentOptions } from '../../helpers/segment-options.ts';

/** How POSIX sh reads a run of single-quoted words (no expansion inside quotes). */
function unquoteSh(word: string): string {
  let out = '';
  let i = 0;
  while (i < word.length) {
    if (word[i] === "'") {
      const end = word.indexOf("'", i + 1);
      assert.ok(end > i, 'unterminated quote');
      out += word.slice(i + 1, end);
      i = end + 1;
    } else if (word[i] === '\\') {
      out += word[i + 1];
      i += 2;
    } else {
      assert.fail(`unquoted character ${JSON.stringify(word[i])} in ${word}`);
    }
  }
  return out;
}

describe('shell quoting', () => {
  it('round-trips any string through sh single-quote rules, leaving nothing unquoted', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary' }).filter((s) => !s.includes('\0')),
        (s) => {
          assert.equal(unquoteSh(shellQuote(s)), s);
        },
      ),
      { numRuns: 500 },
    );
    assert.equal(shellQuote(`it's "x" $(rm -rf /) \`y\``), `'it'\\''s "x" $(rm -rf /) \`y\`'`);
  });

  it('refuses NUL bytes and non-integers', () => {
    assert.throws(() => shellQuote('a\0b'));
    assert.throws(() => shellInteger(-1));
    assert.throws(() => shellInteger(1.5));
    assert.throws(() => shellInteger(Number.NaN));
    assert.equal(shellInteger(42), '42');
  });

  it('puts every path into the scripts quoted', () => {
    const path = `/var/log/it's "pg" $HOME`;
    const probe = buildProbeScript({ logDirectory: path, dataDirectory: '/d a', format: 'csvlog', checksums: [{ path: `${path}/x y.csv`, length: 1024 }] });
    assert.ok(probe.includes(`dir=${shellQuote(path)}\n`));
    assert.ok(probe.includes(`ck 1024 ${shellQuote(`${path}/x y.csv`)}\n`));
    assert.ok(probe.includes(`suffix='.csv'`));
    const segment = buildSegmentScript(segmentOptions(path));
    assert.ok(segment.includes(`f=${shellQuote(`${path}/a.log`)}\n`));
    assert.ok(segment.includes('off=5\n') && segment.includes('follow=1\n') && segment.includes('sleep 0.200'));
    assert.throws(() => buildSegmentScript(segmentOptions('/', { path: 'x', inode: '1', offset: -1, follow: false, headLength: 0, dataDirectory: '/' })));
  });
});

describe('probe output', () => {
  it('parses NUL-separated records, names with spaces and newlines, and drops compressed copies', () => {
    const out = Buffer.from(
      [
        'F 11 100 1700000000.5000000000 /log/a b\nc.log',
        'F 12 50 1699999999.25 /log/a b\nc.log.1',
        'F 13 10 1699999990 /log/a.log.2.gz',
        'F 14 7 1700000001 /log/current-without-suffix',
        'F 11 100 1700000000.5 /data/../log/a b\nc.log',
        'A 14',
        'K 100 11 4294967295 100 /log/a b\nc.log',
        'K 1024 12 123 50 /log/a b\nc.log.1',
        '',
      ].join('\0'),
    );
    const probe = parseProbeOutput(out, 'stderr');
    assert.deepEqual(
      probe.files.map((f) => [f.inode, f.path, f.size, f.primary, f.ageRank]),
      [
        ['11', '/log/a b\nc.log', 100, true, 0],
        ['12', '/log/a b\nc.log.1', 50, false, 1],
        ['14', '/log/current-without-suffix', 7, true, 0],
      ],
    );
    assert.equal(probe.files[0]?.mtime, 1700000000.5);
    assert.equal(probe.activeInode, '14');
    // A head shorter than asked (50 of 1024 bytes) is not a checksum of that length.
    assert.deepEqual([...probe.checksums], [[checksumKey('11', 100), '4294967295']]);
  });

  it('reads an empty active record as no active file, and refuses garbage', () => {
    assert.equal(parseProbeOutput(Buffer.from('A \0'), 'stderr').activeInode, null);
    assert.throws(() => parseProbeOutput(Buffer.from('X what\0'), 'stderr'));
    assert.throws(() => parseProbeOutput(Buffer.from('F 1 x 2 /p\0'), 'stderr'));
  });
});

describe('log file names', () => {
  it('knows each format suffix and logrotate suffixes', () => {
    assert.deepEqual(classifyLogFileName('postgresql-2024-01-01_000000.log', 'stderr'), { primary: true, ageRank: 0 });
    assert.deepEqual(classifyLogFileName('postgresql.csv', 'csvlog'), { primary: true, ageRank: 0 });
    assert.deepEqual(classifyLogFileName('postgresql.json.3', 'jsonlog'), { primary: false, ageRank: 3 });
    assert.deepEqual(classifyLogFileName('postgresql.log-20240101', 'stderr'), { primary: false, ageRank: 0 });
    assert.equal(classifyLogFileName('postgresql.log.1.gz', 'stderr'), null);
    assert.equal(classifyLogFileName('postgresql.csv', 'stderr'), null);
    assert.equal(classifyLogFileName('.log', 'stderr'), null);
  });
});

describe('segment status lines and identities', () => {
  it('parses status lines and ignores other stderr', () => {
    assert.deepEqual(parseSegmentStatus('PGLOG size 123'), { kind: 'size', size: 123 });
    assert.deepEqual(parseSegmentStatus('PGLOG head 1024 99'), { kind: 'head', length: 1024, crc: '99' });
    assert.deepEqual(parseSegmentStatus('PGLOG truncated 5 10'), { kind: 'truncated', size: 5, position: 10 });
    assert.deepEqual(parseSegmentStatus('PGLOG rotated'), { kind: 'rotated' });
    assert.deepEqual(parseSegmentStatus('PGLOG gone cannot open'), { kind: 'gone', detail: 'cannot open' });
    assert.equal(parseSegmentStatus('sh: 1: cannot open x'), null);
  });

  it('round-trips identities and rejects malformed ones', () => {
    const id = { inode: '18446744073709551615', headLength: 1024, crc: '4294967295' };
    assert.deepEqual(parseIdentity(formatIdentity(id)), id);
    assert.equal(parseIdentity('12:ab:3'), null);
    assert.equal(parseIdentity(''), null);
  });
});
