// CompiledPrefix replays its last match on a line that starts with the same bytes
// (prefix-replay.ts): a property that a matcher fed a sequence of lines (one shared, with its
// memory) gives, line by line, what a fresh matcher gives (return value, severity, text start,
// %q cut, every field, pid), on lines built to share prefixes, back-track over delimiters,
// cut at %q and end early; the replay's own cases by hand; and that a flushed assembler's
// prefix keeps no chunk alive.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import fc from 'fast-check';

import { createAssembler } from '../../../src/logformat/assembler.ts';
import type { CompiledPrefix } from '../../../src/logformat/prefix.ts';
import { compilePrefix, emptyPrefixFields } from '../../../src/logformat/prefix.ts';

/** What one match tells, Buffers as text. */
function outcome(p: CompiledPrefix, b: Buffer, from: number, to: number): unknown {
  const at = p.match(b, from, to);
  if (at < 0) return { at };
  const f = emptyPrefixFields();
  p.fill(b, f);
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(f)) fields[k] = Buffer.isBuffer(v) ? `buf:${v.toString('latin1')}` : v;
  return { at: at - from, severity: p.severity, textStart: p.textStart - from, cutAtQ: p.cutAtQ, pid: p.hasPid ? p.pid(b) : null, fields };
}

const PREFIXES = [
  '%m [%p] %q%u@%d ',
  '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ',
  '%m %u %d ',
  '%q%u@%d %p ',
  '%a %p ',
  '%10p %-6u|%d ',
  '%m [%p] %q%a',
  '%r %e %c %v %x ',
];

const piece = (xs: string[]): fc.Arbitrary<string> => fc.constantFrom(...xs);
const line = fc
  .tuple(
    piece(['2026-11-26 08:00:00.123 UTC ', '2026-11-26 08:00:00 UTC ', '2026-11-26 08:00:00.124 UTC ', '']),
    piece(['[1] ', '[123] ', '[123]: [4-1] ', '     123 ', '']),
    piece([
      'u@db ',
      'a@b@c ',
      'LOG@db ',
      'LOGGER@d b ',
      'u db ',
      'user=u,db=d,app=LOG:  x,client=h ',
      'u|d ',
      '[unknown]@[unknown] ',
      '10.0.0.1(5432) 42P01 6761.1 3/4 0 ',
      '',
    ]),
    piece(['LOG:  ', 'DETAIL:  ', 'ERROR:  ', 'STATEMENT:  ', 'LOGX:  ', 'LOG: ', 'WARNING:  ']),
    piece(['duration: 1 ms', 'x LOG:  y', 'a@b LOG:  c', '', ' ']),
  )
  .map((parts) => parts.join(''));

describe('prefix replay', () => {
  void it('a shared matcher gives what a fresh one gives, line after line (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...PREFIXES), fc.array(fc.tuple(line, fc.nat(80)), { minLength: 1, maxLength: 12 }), (prefix, lines) => {
        const shared = compilePrefix(prefix);
        for (const [text, cut] of lines) {
          // Each line inside a larger buffer (offsets matter), sometimes cut short.
          const b = Buffer.from(`junk\n${text}\n`, 'latin1');
          const from = 5;
          const to = Math.max(from, Math.min(from + text.length, from + text.length - (cut % 7 === 0 ? cut % 30 : 0)));
          assert.deepEqual(
            outcome(shared, b, from, to),
            outcome(compilePrefix(prefix), b, from, to),
            `${prefix} | ${JSON.stringify(b.toString('latin1', from, to))}`,
          );
        }
      }),
      { numRuns: 3000 },
    );
  });

  void it('the same on lines of a few tokens that share a head of any length (property)', () => {
    const token = piece(['u', '@', ' ', 'LOG:  ', 'DETAIL:  ', 'STATEMENT:  ', 'd', '[1] ', '1', 'L', ',', 'x']);
    const tail = fc.array(token, { maxLength: 10 }).map((t) => t.join(''));
    fc.assert(
      fc.property(
        fc.constantFrom('%u@%d ', '%u %d ', '%q%u@%d ', '[%p] %u@%d ', '%u,%a ', '%p %q%u '),
        tail,
        fc.array(fc.tuple(fc.nat(40), tail), { minLength: 1, maxLength: 8 }),
        (prefix, first, rest) => {
          const shared = compilePrefix(prefix);
          let prev = first;
          for (const [keep, more] of [[prev.length, ''] as [number, string], ...rest]) {
            const text = prev.slice(0, keep) + more;
            prev = text;
            const b = Buffer.from(text, 'latin1');
            assert.deepEqual(outcome(shared, b, 0, b.length), outcome(compilePrefix(prefix), b, 0, b.length), `${prefix} | ${JSON.stringify(text)}`);
          }
        },
      ),
      { numRuns: 5000 },
    );
  });

  void it('replays a DETAIL line after its entry, and re-runs when the severity there is not one', () => {
    const p = compilePrefix('%m [%p] %q%u@%d ');
    const first = Buffer.from('2026-11-26 08:00:00.123 UTC [7] u@db LOG:  duration: 1 ms');
    assert.deepEqual(outcome(p, first, 0, first.length), outcome(compilePrefix('%m [%p] %q%u@%d '), first, 0, first.length));
    const detail = Buffer.from('2026-11-26 08:00:00.123 UTC [7] u@db DETAIL:  parameters: $1 = 1');
    assert.deepEqual(outcome(p, detail, 0, detail.length), outcome(compilePrefix('%m [%p] %q%u@%d '), detail, 0, detail.length));
    // Same bytes up to the severity's place, but none there: the database name goes on.
    const longer = Buffer.from('2026-11-26 08:00:00.123 UTC [7] u@db x LOG:  y');
    assert.deepEqual(outcome(p, longer, 0, longer.length), outcome(compilePrefix('%m [%p] %q%u@%d '), longer, 0, longer.length));
  });
});

describe('prefix replay memory', () => {
  void it("an idle or ended stream keeps no chunk alive for it (the assembler's flush lets go of it)", async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const records: number[] = [];
    const assembler = createAssembler('stderr', (r) => records.push(r.start), { prefix: '%m [%p] %q%u@%d ' });
    let ref: WeakRef<ArrayBuffer>;
    ((): void => {
      // A chunk of its own (not a slab of Buffer's pool), seen only through this scope.
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const line = Buffer.from('2026-11-26 08:00:00.123 UTC [7] u@db LOG:  duration: 1 ms  statement: SELECT 1');
      line.copy(chunk, 0);
      line.copy(chunk, line.length + 1);
      assembler.pushLine(chunk, 0, line.length, 0, line.length + 1, false);
      assembler.pushLine(chunk, line.length + 1, 2 * line.length + 1, line.length + 1, 2 * line.length + 2, false);
      assembler.flush();
      ref = new WeakRef(chunk.buffer);
    })();
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    assert.equal(records.length, 2);
    assert.equal(ref!.deref(), undefined);
  });
});
