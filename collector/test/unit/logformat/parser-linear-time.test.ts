// Hostile log lines cost linear time (security review F1): any database role can write any
// text into the log (RAISE LOG), so every message parser, the classification of EventParser
// and the whole LogParser in each format are driven with adversarial inputs of two sizes, one
// 16 times the other, and the time per byte must stay flat. The inputs repeat pieces of every
// pattern the parsers use (read from their source, so a new pattern is covered too): digit
// runs, whole literals, literals cut short (near matches), after the heads that route a
// message to each parser. A quadratic parser is about 16 times slower per byte at the larger
// size; the limit is 4, a ratio measured in one run, never a fixed time.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { Decoder } from '../../../src/logformat/decode.ts';
import { EventParser } from '../../../src/logformat/event-parser.ts';
import { LogParser } from '../../../src/logformat/log-parser.ts';
import { parseCheckpoint } from '../../../src/logformat/messages/checkpoint.ts';
import { parseConnection, parseDisconnection } from '../../../src/logformat/messages/connection.ts';
import { lockTypeOf, parseDeadlockDetail, parseLockQueue, parseLockWait } from '../../../src/logformat/messages/locks.ts';
import { parseAutoanalyze, parseAutovacuum } from '../../../src/logformat/messages/maintenance.ts';
import { parsePlan } from '../../../src/logformat/messages/plan.ts';
import { parseStatementMessage, scanStatement, StatementSpans } from '../../../src/logformat/messages/statement.ts';
import { intList } from '../../../src/logformat/messages/text.ts';
import { TemplateCache } from '../../../src/logformat/normalize/sql-template-cache.ts';
import { emptyRecord, type LogFormat } from '../../../src/logformat/record.ts';
import { fastest, remeasured } from '../../helpers/linear-time.ts';

/** Bytes of the repeated part at the smaller size; the larger is GROWTH times it. */
const BASE_BYTES = 960;
const GROWTH = 16;
/** Time per byte at the larger size over that at the smaller: about 1 when linear, 16 when quadratic. */
const MAX_RATIO = 4;

const SRC = new URL('../../../src/logformat/', import.meta.url);
const sources = [
  ...readdirSync(new URL('messages/', SRC)).map((f) => readFileSync(new URL(`messages/${f}`, SRC), 'utf8')),
  readFileSync(new URL('event-parser.ts', SRC), 'utf8'),
];

/**
 * A string each regex literal of the source could match, roughly (one of each quantified
 * part, a sample character for each class), split at its alternatives: the raw material of
 * the adversarial inputs.
 */
function patternSamples(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/= \/(.+)\/[a-z]*;$/gm)) {
    const re = m[1]!;
    let cur = '';
    for (let i = 0; i < re.length; i++) {
      const c = re[i]!;
      if (c === '\\') {
        const e = re[++i]!;
        cur += e === 'd' ? '1' : e === 's' ? ' ' : 'wWSD'.includes(e) ? 'x' : e === 'b' || e === 'B' ? '' : e;
      } else if (c === '[') {
        const end = re.indexOf(']', i + 2);
        const body = re.slice(i + 1, end);
        cur += body.startsWith('^') ? 'x' : body.startsWith('\\d') ? '1' : body[0] === '\\' ? body[1]! : body[0]!;
        i = end;
      } else if (c === '(') {
        if (re[i + 1] === '?') i += re[i + 2] === '<' ? 3 : 2;
      } else if (c === '{') {
        i = re.indexOf('}', i);
      } else if (c === '|') {
        out.push(cur);
        cur = '';
      } else if (c === '.') {
        cur += 'x';
      } else if (!')*+?^$'.includes(c)) {
        cur += c;
      }
    }
    out.push(cur);
  }
  return out.filter((s) => s !== '');
}

const SAMPLES_OF_PATTERNS = [...new Set(sources.flatMap(patternSamples))];

/** What routes a message to each parser (classification prefixes and anchored openings). */
const HEADS = [
  '',
  'checkpoint complete: ',
  'restartpoint starting: ',
  'checkpoint complete: wrote 1 buffers (1.0%); ',
  'process 1 still waiting for ShareLock on ',
  'process 1 acquired ShareLock on relation 1 of database 5 after ',
  'connection received: ',
  'connection authenticated: identity="',
  'replication connection authorized: ',
  'connection ready: ',
  'disconnection: session time: 0:00:01.234 ',
  'disconnection: session time: ',
  'automatic vacuum of table "a.b.c": index scans: 1\n',
  'automatic aggressive vacuum of table "',
  'automatic analyze of table "a.b.c"\n',
  'temporary file: path "',
  'duration: 1.5 ms  statement: ',
  'duration: ',
  'execute S_1: ',
  'duration: 1 ms  bind ',
  'duration: 1 ms  plan:\n',
  'Query Text: ',
  '{"Query Text": "',
  '<explain><Query-Text>',
  'Process 1 waits for ShareLock on ',
  'Process 1: ',
  'deadlock detected',
  'Process holding the lock: ',
  'Processes holding the lock: 1, 2. Wait queue: ',
];
const LOCK_WAIT = 'process 1 still waiting for ShareLock on relation 1 of database 5 after 1.0 ms';

/** The repeated unit: a pattern's sample, a piece of one (a near match), or a plain character run. */
const unit = fc.oneof(
  fc.constantFrom(...SAMPLES_OF_PATTERNS),
  fc
    .constantFrom(...SAMPLES_OF_PATTERNS)
    .chain((s) => fc.tuple(fc.nat(s.length - 1), fc.nat(s.length)).map(([a, b]) => s.slice(Math.min(a, b), Math.max(a, b) + 1))),
  fc.constantFrom('1', '1.', '1 ', ' ', '.', ', ', '"', '\n', '=', 'a', ':', '(', '&#1', '\t'),
);

interface Growth {
  small: number;
  large: number;
  ratio: number;
}

/** Time per byte at GROWTH times the repeated part over that at the base size. */
function growth(run: (input: string) => void, build: (repeated: string) => string, piece: string): Growth {
  const k = Math.ceil(BASE_BYTES / piece.length);
  const small = fastest(run, build(piece.repeat(k)));
  const large = fastest(run, build(piece.repeat(k * GROWTH)));
  return { small, large, ratio: large / (GROWTH * small) };
}

/**
 * Asserts flat time per byte over generated inputs; a ratio over the limit is measured up to
 * three more times (the machine may have been busy) before it fails the test. A quadratic
 * parser reads about 16x every time. `examples` always run.
 */
function assertLinear(name: string, run: (input: string) => void, examples: Array<[string, string]>, numRuns = 25): void {
  fc.assert(
    fc.property(fc.constantFrom(...HEADS), unit, (head, piece) => {
      const build = (repeated: string): string => head + repeated;
      const g = remeasured(
        () => growth(run, build, piece),
        (m) => m.ratio >= MAX_RATIO,
      );
      assert.ok(
        g.ratio < MAX_RATIO,
        `${name}: ${JSON.stringify(head)} + ${JSON.stringify(piece)} repeated: ` +
          `${g.small.toFixed(4)} ms at ${BASE_BYTES} bytes, ${g.large.toFixed(4)} ms at ${GROWTH}x: ${g.ratio.toFixed(1)}x the time per byte`,
      );
    }),
    { numRuns, endOnFailure: true, examples },
  );
}

describe('every message parser takes time linear in its input', () => {
  const spans = new StatementSpans();
  const parsers: Record<string, (text: string) => unknown> = {
    parseCheckpoint,
    parseConnection,
    parseDisconnection,
    parseLockWait,
    parseLockQueue,
    parseDeadlockDetail,
    lockTypeOf,
    parseAutovacuum,
    parseAutoanalyze,
    parsePlan,
    parseStatementMessage,
    intList,
    scanStatement: (text) => scanStatement(Buffer.from(text), spans),
  };
  for (const [name, parse] of Object.entries(parsers)) {
    test(name, () => {
      assertLinear(name, (text) => void parse(text), [
        ['checkpoint complete: ', '1'],
        ['', 'Process holding the lock: '],
      ]);
    });
  }
});

// The parsers below share no template cache across calls: `fastest` repeats one input, and a
// statement short enough to be cached (verbatim up to 2,048 characters) would be a map hit at
// the small size and normalized afresh at the large one, a ratio of two different paths. What
// must be linear is the uncached path, the one a role's ever-new statements take.
const noCache = (): TemplateCache => new TemplateCache({ maxBytes: 0 });

describe('EventParser: classification and the parser it picks', () => {
  const events = new EventParser({ decoder: new Decoder({ defaultEncoding: 'UTF8', databases: {} }), templates: noCache() });
  for (const severity of ['LOG', 'ERROR']) {
    test(`${severity}: the message repeated`, () => {
      assertLinear(
        severity,
        (text) => {
          const message = Buffer.from(text);
          events.parse(emptyRecord(0, message.length, severity, message));
        },
        [
          ['checkpoint complete: ', '1'],
          ['automatic vacuum of table "a.b.c": index scans: 1\n', 'pages: 1'],
        ],
      );
    });
  }
  test('a lock wait whose DETAIL is repeated', () => {
    assertLinear(
      'lock wait detail',
      (text) => {
        const r = emptyRecord(0, text.length, 'LOG', Buffer.from(LOCK_WAIT));
        r.detail = Buffer.from(text);
        events.parse(r);
      },
      [
        ['', 'Process holding the lock: '],
        ['Processes holding the lock: ', '1, '],
      ],
    );
  });
});

const STDERR_HEAD = '2024-05-01 10:00:00.000 UTC [4242] ';
const csvQuote = (s: string): string => `"${s.replaceAll('"', '""')}"`;

/** One LOG entry of `format` whose message (or, after a lock wait message, DETAIL) is `text`. */
function entryOf(format: LogFormat, text: string, inDetail: boolean): string {
  const message = inDetail ? LOCK_WAIT : text;
  const detail = inDetail ? text : null;
  switch (format) {
    case 'stderr':
      return `${STDERR_HEAD}LOG:  ${message}\n${detail === null ? '' : `${STDERR_HEAD}DETAIL:  ${detail}\n`}`;
    case 'csvlog':
      return (
        `2024-05-01 10:00:00.000 UTC,"app","db",4242,"[local]",6b019cbf.6cd2,4,"UPDATE",2024-05-01 10:00:00 UTC,4/384,0,LOG,00000,` +
        `${csvQuote(message)},${detail === null ? '' : csvQuote(detail)},,,,,,,,"psql","client backend",,0\n`
      );
    case 'jsonlog':
      return `${JSON.stringify({ timestamp: '2024-05-01 10:00:00.000 UTC', pid: 4242, error_severity: 'LOG', message, ...(detail === null ? {} : { detail }) })}\n`;
    case 'syslog':
      throw new Error('not driven here');
  }
}

describe('the whole LogParser, in each format', () => {
  const encodings = { defaultEncoding: 'UTF8', databases: {} };
  for (const format of ['stderr', 'csvlog', 'jsonlog'] as const) {
    for (const inDetail of [false, true]) {
      test(`${format}: ${inDetail ? "a lock wait's DETAIL" : 'the message'} repeated`, () => {
        assertLinear(
          `${format} ${inDetail ? 'detail' : 'message'}`,
          (text) => {
            let n = 0;
            const p = new LogParser({ format, prefix: '%m [%p] ', encodings, templates: noCache() }, () => n++);
            p.push(Buffer.from(entryOf(format, text, inDetail)));
            p.end();
            if (n === 0) throw new Error('no event');
          },
          inDetail ? [['', 'Process holding the lock: ']] : [['checkpoint complete: ', '1']],
          15,
        );
      });
    }
  }
});
