// createAssembler, the one factory the streams build assemblers with: the right assembler for
// each log format, a valid log_line_prefix required for stderr and syslog, maxEntryBytes passed on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';

import { createAssembler } from '../../../src/logformat/assembler.ts';
import { CsvAssembler } from '../../../src/logformat/csv-assembler.ts';
import { JsonAssembler } from '../../../src/logformat/json-assembler.ts';
import { compilePrefix } from '../../../src/logformat/prefix.ts';
import type { LogRecord } from '../../../src/logformat/record.ts';
import { emptyRecord, resetRecord } from '../../../src/logformat/record.ts';
import { StderrAssembler } from '../../../src/logformat/stderr-assembler.ts';
import { SyslogAssembler } from '../../../src/logformat/syslog-assembler.ts';
import { assemble, fixture } from '../../fixtures/asm-harness.ts';

void describe('createAssembler', () => {
  void it('builds the assembler of each format', () => {
    const sink = (): void => undefined;
    assert.ok(createAssembler('csvlog', sink) instanceof CsvAssembler);
    assert.ok(createAssembler('jsonlog', sink) instanceof JsonAssembler);
    assert.ok(createAssembler('stderr', sink, { prefix: '%m [%p] ' }) instanceof StderrAssembler);
    assert.ok(createAssembler('syslog', sink, { prefix: compilePrefix('') }) instanceof SyslogAssembler);
  });

  void it('needs a prefix for stderr and syslog, and rejects a bad one', () => {
    assert.throws(
      () => createAssembler('stderr', () => undefined, {}),
      (e: unknown) => isPglogError(e) && e.code === 'USAGE',
    );
    assert.throws(
      () => createAssembler('syslog', () => undefined, { prefix: '%Z' }),
      (e: unknown) => isPglogError(e) && e.code === 'PREFIX_UNSUPPORTED',
    );
  });

  void it('applies maxEntryBytes', () => {
    const got: LogRecord[] = [];
    const a = createAssembler('stderr', (r) => got.push(r), { prefix: '', maxEntryBytes: 10 });
    const line = Buffer.from('LOG:  0123456789abcdef');
    a.pushLine(line, 0, line.length, 0, line.length + 1, false);
    a.flush();
    assert.equal(got.length, 1);
    assert.equal(got[0]!.truncated, true);
    assert.equal(a.stats.truncated, 1);
  });

  void it('reuseRecords: one record object, emptied for each entry, that the sink sees as the records made anew and that keeps no Buffer', () => {
    const cases = [
      { format: 'stderr' as const, data: fixture('asm-stderr.log'), prefix: '%m [%p] %q%u@%d ' },
      { format: 'syslog' as const, data: fixture('asm-syslog.log'), prefix: 'user=%u,db=%d,app=%a,client=%h ' },
    ];
    for (const { format, data, prefix } of cases) {
      const made = assemble(format, data, { prefix }).records;
      const seen: LogRecord[] = [];
      const objects = new Set<LogRecord>();
      const a = createAssembler(
        format,
        (r) => {
          objects.add(r);
          // The sink's to keep: a short message is the assembler's memory, reused for the next entry.
          seen.push({ ...r, message: Buffer.from(r.message) });
        },
        { prefix, reuseRecords: true },
      );
      let at = 0;
      for (const line of data.toString('latin1').split('\n')) {
        const end = at + line.length;
        if (end < data.length) a.pushLine(data, at, end, at, end + 1, false);
        at = end + 1;
      }
      a.flush();
      assert.deepStrictEqual(seen, made);
      assert.equal(objects.size, 1, `${format}: one record object for ${seen.length} entries`);
      // Kept while the stream is quiet, it holds none of the last entry's Buffers (views of its chunk).
      const [kept] = [...objects];
      assert.equal(kept?.message.length, 0);
      assert.deepEqual(
        [kept?.user, kept?.database, kept?.application, kept?.detail, kept?.hint, kept?.context, kept?.statement, kept?.internalQuery],
        Array(8).fill(null),
      );
    }
  });

  void it('property: reused records carry the messages of records made anew, however long, continued, cut or malformed, each line in a Buffer of its own', () => {
    const line = fc.oneof(
      fc
        .record({ len: fc.integer({ min: 0, max: 700 }), fill: fc.integer({ min: 0x21, max: 0x7e }) })
        .map(({ len, fill }) => `2026-11-26 08:00:00.000 UTC [7] LOG:  ${String.fromCharCode(fill).repeat(len)}`),
      fc.integer({ min: 0, max: 40 }).map((len) => `\t${'c'.repeat(len)}`),
      fc.constant('2026-11-26 08:00:00.000 UTC [7] DETAIL:  parameters: $1 = 1'),
      fc.string({ maxLength: 20 }).map((t) => t.replace(/[\t\n\r]/g, ' ')),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), fc.integer({ min: 16, max: 1024 }), (lines, maxEntryBytes) => {
        const run = (reuseRecords: boolean): LogRecord[] => {
          const out: LogRecord[] = [];
          const a = createAssembler('stderr', (r) => out.push({ ...r, message: Buffer.from(r.message) }), { prefix: '%m [%p] ', maxEntryBytes, reuseRecords });
          let at = 0;
          for (const text of lines) {
            const bytes = Buffer.from(`xx${text}yy`, 'latin1');
            a.pushLine(bytes, 2, bytes.length - 2, at, at + text.length + 1, false);
            at += text.length + 1;
          }
          a.flush();
          return out;
        };
        assert.deepStrictEqual(run(true), run(false));
      }),
      { numRuns: 300 },
    );
  });

  void it('resetRecord empties every field emptyRecord makes, so a reused record carries nothing over', () => {
    const full = emptyRecord(1, 2, 'LOG', Buffer.from('m'));
    // Every field set to something emptyRecord does not make (the literal lists them all: the type requires it).
    for (const k of Object.keys(full) as (keyof LogRecord)[]) (full as unknown as Record<string, unknown>)[k] = `set ${k}`;
    assert.deepStrictEqual(resetRecord(full, 3, 4, 'ERROR', Buffer.from('n')), emptyRecord(3, 4, 'ERROR', Buffer.from('n')));
  });
});
