/**
 * stderr log lines (prefix `%m [%p] %q%u@%d `) with hostile bytes put into them: invalid
 * UTF-8, NULs, names that are not UTF-8, statements of every shape. For properties of the
 * form "this path gives what that path gives, whatever the bytes".
 */
import fc from 'fast-check';

const latin1 = (s: string): string => Buffer.from(s, 'latin1').toString('latin1');
/** Prefixes, some with names that are not valid UTF-8 or hold a NUL (as latin1 strings of their bytes). */
export const HEAD = [
  '2024-05-01 10:00:00.000 UTC [42] alice@shop ',
  '2024-05-01 10:00:00.001 UTC [43] bob@legacy ',
  '2024-05-01 10:00:00.002 UTC [44] ',
  latin1('2024-05-01 10:00:00.003 UTC [45] b\xffob@legacy '),
  latin1('2024-05-01 10:00:00.004 UTC [46] al\x00ice@sh\xe9op '),
  latin1('2024-05-01 10:00:00.005 UTC [47] alice@\xd0\xb1\xd0 '),
  // A zone no table says the offset of: the timestamp is kept as logged.
  '2024-05-01 10:00:00.006 XYZ [48] alice@shop ',
];
export const MESSAGES = [
  'duration: 0.042 ms  statement: SELECT 1',
  'duration: 1.5 ms  execute <unnamed>: SELECT * FROM t WHERE id = $1',
  'duration: 1.5 ms  execute S_1/C_2: UPDATE t SET a = a + $1',
  'execute fetch from S_1/C_2: SELECT 2',
  "statement: INSERT INTO t VALUES (1, 'x')",
  // Longer than what the template cache checks in its copy loop.
  `duration: 2.0 ms  statement: SELECT '${'x'.repeat(300)}'`,
  // Longer than a 4 KiB text limit: cut when stored.
  `duration: 3.0 ms  statement: SELECT '${'y'.repeat(5000)}'`,
  "duration: 0.5 ms  statement: SELECT 'café'",
  'duration: 1.0 ms  execute S_é: SELECT 1',
  'duration: 0.010 ms  parse <unnamed>: SELECT $1',
  'duration: 0.010 ms  bind S_1: SELECT $1',
  'duration: 0.010 ms',
  'duration: 0.010 ms  plan:\n\tSeq Scan on t',
  'connection received: host=[local]',
  'checkpoint starting: time',
  'automatic analyze of table "shop.public.t"',
  'something else happened',
];
const EXTRA = ["DETAIL:  parameters: $1 = '5'", 'DETAIL:  other detail', 'HINT:  a hint', 'STATEMENT:  SELECT 3', 'CONTEXT:  a context'];
const BYTES = [0x00, 0x80, 0xc3, 0xa9, 0xef, 0xbf, 0xbd, 0xd0, 0xff, 0x3a, 0x20, 0x24, 0x27];

/** A log line whose text may have hostile bytes put into it. */
export const hostileStderrLine: fc.Arbitrary<Buffer> = fc
  .record({
    head: fc.constantFrom(...HEAD),
    severity: fc.constantFrom('LOG', 'LOG', 'ERROR', 'WARNING'),
    message: fc.constantFrom(...MESSAGES),
    extra: fc.option(fc.constantFrom(...EXTRA)),
    damage: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...BYTES)), { maxLength: 3 }),
  })
  .map(({ head, severity, message, extra, damage }) => {
    let text = Buffer.concat([Buffer.from(`${severity}:  ${message}`), Buffer.from(extra === null ? '' : `\n${head}`, 'latin1'), Buffer.from(extra ?? '')]);
    for (const [at, byte] of damage) {
      const i = at % (text.length + 1);
      text = Buffer.concat([text.subarray(0, i), Buffer.from([byte]), text.subarray(i)]);
    }
    return Buffer.concat([Buffer.from(head, 'latin1'), text, Buffer.from('\n')]);
  });
