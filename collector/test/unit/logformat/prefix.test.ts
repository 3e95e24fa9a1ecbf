// log_line_prefix compilation and parsing on hand-written stderr lines: the default and
// Debian prefixes, %q for background processes, every escape, padding, backtracking when a
// field contains its delimiter, severities; PREFIX_UNSUPPORTED for unknown or ambiguous
// prefixes; a fast-check property that arbitrary bytes never make it throw.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';

import { compilePrefix, emptyPrefixFields } from '../../../src/logformat/prefix.ts';
import { SEVERITY_WORDS } from '../../../src/logformat/severity.ts';

/** Parses `line`; returns the fields (Buffers as strings), severity and the text after `SEVERITY:  `. */
function parse(prefix: string, line: string): { f: Record<string, unknown>; severity: string; text: string } | null {
  const p = compilePrefix(prefix);
  const b = Buffer.from(line, 'latin1');
  const t = emptyPrefixFields();
  const at = p.parse(b, 0, b.length, t);
  if (at < 0) return null;
  const f: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t)) if (v !== null) f[k] = Buffer.isBuffer(v) ? v.toString('latin1') : v;
  return { f, severity: SEVERITY_WORDS[p.severity]!, text: b.toString('latin1', p.textStart) };
}

function unsupported(prefix: string, re: RegExp): void {
  assert.throws(
    () => compilePrefix(prefix),
    (e: unknown) => isPglogError(e) && e.code === 'PREFIX_UNSUPPORTED' && re.test(e.message),
  );
}

void describe('compilePrefix', () => {
  void it('withoutTime: fill() leaves the time alone, on replayed lines too, and fills the rest', () => {
    const p = compilePrefix('%m [%p] %u@%d ');
    p.withoutTime();
    for (const line of [
      '2024-01-02 03:04:05.678 UTC [42] u@d LOG:  a',
      '2024-01-02 03:04:05.678 UTC [42] u@d LOG:  b',
      '2024-01-02 03:04:05.679 UTC [43] u@d LOG:  c',
    ]) {
      const b = Buffer.from(line);
      const t = emptyPrefixFields();
      assert.ok(p.parse(b, 0, b.length, t) >= 0);
      assert.equal(t.time, null);
      assert.equal(t.pid, Number(line.slice(29, 31)));
      assert.equal(t.database?.toString(), 'd');
    }
  });

  void it('parses the PostgreSQL default %m [%p]', () => {
    assert.deepEqual(parse('%m [%p] ', '2024-01-02 03:04:05.678 UTC [4242] LOG:  database system is ready'), {
      f: { time: '2024-01-02 03:04:05.678 UTC', pid: 4242 },
      severity: 'LOG',
      text: 'database system is ready',
    });
  });

  void it('accepts %q both cut (background process) and full (session)', () => {
    const p = '%m [%p] %q%u@%d ';
    assert.deepEqual(parse(p, '2024-01-02 03:04:05.678 UTC [11] LOG:  checkpoint starting: time')?.f, { time: '2024-01-02 03:04:05.678 UTC', pid: 11 });
    const s = parse(p, '2024-01-02 03:04:05.678 UTC [12] alice@shop ERROR:  boom');
    assert.deepEqual(s, { f: { time: '2024-01-02 03:04:05.678 UTC', pid: 12, user: 'alice', database: 'shop' }, severity: 'ERROR', text: 'boom' });
    const c = compilePrefix(p);
    const bg = Buffer.from('2024-01-02 03:04:05.678 UTC [11] LOG:  x');
    assert.ok(c.match(bg, 0, bg.length) >= 0 && c.cutAtQ);
    const ss = Buffer.from('2024-01-02 03:04:05.678 UTC [12] a@b LOG:  x');
    assert.ok(c.match(ss, 0, ss.length) >= 0 && !c.cutAtQ);
    // A session whose message happens to contain '@'.
    assert.deepEqual(parse(p, '2024-01-02 03:04:05.678 UTC [13] LOG:  mail a@b x')?.text, 'mail a@b x');
  });

  void it('prints session-only escapes empty for background processes (no %q)', () => {
    const r = parse('%m [%p] %u@%d app=%a ', '2024-01-02 03:04:05.678 UTC [7] @ app= LOG:  autovacuum launcher started');
    assert.deepEqual(r?.f, { time: '2024-01-02 03:04:05.678 UTC', pid: 7 });
  });

  void it('turns [unknown] into null', () => {
    const r = parse('%m [%p] %u@%d ', '2024-01-02 03:04:05.678 UTC [7] [unknown]@[unknown] LOG:  connection received: host=[local]');
    assert.deepEqual(r?.f, { time: '2024-01-02 03:04:05.678 UTC', pid: 7 });
  });

  void it('parses every escape', () => {
    const prefix = '%t|%m|%n|%p|%P|%l|%s|%c|%v|%x|%e|%Q|%b|%i|%r|%h|%a|%u|%d|%% ';
    const line =
      '2024-01-02 03:04:05 MSK|2024-01-02 03:04:05.123 -0330|1704153845.123|77|66|5|2024-01-01 00:00:00 +03|65e6ed01.4d|3/17|745|23505|-3122138129829876453|parallel worker|idle in transaction|10.1.2.3(5432)|10.1.2.3|my app, v2|bob|db one|% ERROR:  x';
    assert.deepEqual(parse(prefix, line), {
      f: {
        time: '1704153845.123',
        pid: 77,
        leaderPid: 66,
        sessionLine: 5,
        sessionStart: '2024-01-01 00:00:00 +03',
        sessionId: '65e6ed01.4d',
        vxid: '3/17',
        txid: '745',
        sqlstate: '23505',
        queryId: '-3122138129829876453',
        backendType: 'parallel worker',
        commandTag: 'idle in transaction',
        remoteHost: '10.1.2.3',
        remotePort: '5432',
        application: 'my app, v2',
        user: 'bob',
        database: 'db one',
      },
      severity: 'ERROR',
      text: 'x',
    });
  });

  void it('reads %r as host(port) or [local]', () => {
    assert.deepEqual(parse('%r ', '[local] LOG:  x')?.f, { remoteHost: '[local]' });
    assert.deepEqual(parse('%r ', '::1(40000) LOG:  x')?.f, { remoteHost: '::1', remotePort: '40000' });
  });

  void it('accepts empty %P and %v', () => {
    assert.deepEqual(parse('[%p:%P:%v] ', '[5::] LOG:  x')?.f, { pid: 5 });
  });

  void it('handles padded escapes (right- and left-justified, wider values, empty values)', () => {
    assert.deepEqual(parse('%10p|%-8u|%-6d ', '        42|bob     |shop   LOG:  x')?.f, { pid: 42, user: 'bob', database: 'shop' });
    assert.deepEqual(parse('%3p|%-3u|%d ', '123456|alice|d LOG:  x')?.f, { pid: 123456, user: 'alice', database: 'd' });
    assert.deepEqual(parse('[%-5P] %-10u ', '[     ]            LOG:  x')?.f, {});
    assert.deepEqual(parse('%-10p %u ', '42         bob LOG:  x')?.f, { pid: 42, user: 'bob' });
    assert.equal(parse('%-10p %u ', '42 bob LOG:  x'), null);
  });

  void it('backtracks when a variable field contains its delimiter', () => {
    assert.deepEqual(parse('app=%a,user=%u [%p] ', 'app=a,user=b [x],user=alice [5] LOG:  x')?.f, { application: 'a', user: 'b [x],user=alice', pid: 5 });
    assert.deepEqual(parse('%a:%p ', 'psql:x:12 LOG:  x')?.f, { application: 'psql:x', pid: 12 });
  });

  void it('accepts a variable field at the end of the prefix, ended by the severity', () => {
    assert.deepEqual(parse('%p %b', '12 client backendLOG:  x')?.f, { pid: 12, backendType: 'client backend' });
  });

  void it('knows every severity and the auxiliary lines', () => {
    for (const w of SEVERITY_WORDS) assert.equal(parse('[%p] ', `[1] ${w}:  text`)?.severity, w);
    assert.equal(parse('[%p] ', '[1] LOGS:  text'), null);
    assert.equal(parse('[%p] ', '[1] LOG: text'), null);
    assert.equal(parse('[%p] ', '[1] ERROR:'), null);
    assert.equal(parse('[%p] ', '[1] ERROR:  ')?.text, '');
  });

  void it('rejects lines that do not fit', () => {
    const p = '%m [%p] ';
    for (const line of [
      '',
      'garbage',
      '2024-01-02 03:04:05 UTC [1] LOG:  no ms',
      '2024-01-02 03:04:05.123 UTC [x] LOG:  bad pid',
      '\tcontinuation',
      '2024-01-02 03:04:05.123 UTC [1] hello',
    ]) {
      assert.equal(parse(p, line), null, line);
    }
  });

  void it('throws PREFIX_UNSUPPORTED with the position for unknown escapes', () => {
    unsupported('%m [%p] %z ', /%z at position 8/);
    unsupported('%-10y', /%y at position 0/);
  });

  void it('throws PREFIX_UNSUPPORTED for ambiguous prefixes', () => {
    unsupported('%u%d ', /position 0 .*position 2/);
    unsupported('%a%p ', /cannot be told apart/);
    unsupported('%u%q@%d ', /%q/);
  });

  void it('never throws on arbitrary bytes (property)', () => {
    const prefixes = ['%m [%p] %q%u@%d ', '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ', '%10p %-5u %a:', ''].map(compilePrefix);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (arr) => {
        const b = Buffer.from(arr);
        for (const p of prefixes) {
          const at = p.match(b, 0, b.length);
          assert.ok(at >= -1 && at <= b.length);
          if (at >= 0) p.fill(b, emptyPrefixFields());
        }
      }),
      { numRuns: 3000 },
    );
  });
});
