/**
 * What must hold for any bytes given to the LogParser, in every log format: the property
 * checks of the log-format fuzz targets (targets.ts), also replayed by the unit test
 * collector/test/unit/logformat/fuzz-regressions.test.ts over the committed corpus and findings.
 *
 * A fuzz input is a two-byte header and the log bytes:
 *
 *   byte 0  which log_line_prefix (PREFIXES[b % n]; ignored by csvlog and jsonlog)
 *   byte 1  how the log bytes are cut into chunks and how small the entry cap is (a seed)
 *   2..     the log bytes
 *
 * Checked, for one parse in a single chunk and one in the chunks byte 1 chooses:
 * - the parser never throws;
 * - every entry lies within the input, entries come in stream order and do not overlap
 *   (offset < end, each offset at or after the previous end);
 * - the byte counter equals the input's length, and the counters add up
 *   (entries = events emitted, truncated entries counted as such);
 * - chunk boundaries change nothing: the same events, field for field, also when every chunk
 *   is overwritten once pushed (nothing of a chunk is used after its push);
 * - resuming at an entry's end (a new parser with startOffset there, fed the bytes from
 *   there) gives the same events after it as the parse from the start.
 * Time per input is bounded by the fuzzer's -timeout (make fuzz).
 */
import { isDeepStrictEqual } from 'node:util';

import type { PglogEvent } from '../src/logformat/events.ts';
import { LogParser, type ParseCounters } from '../src/logformat/log-parser.ts';
import type { LogFormat } from '../src/logformat/record.ts';

/** The prefixes the generated logs use (scripts/loggen, runs A and B) and PostgreSQL's default. */
export const PREFIXES: readonly string[] = ['%m [%p] %q%u@%d ', '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h,e=%e,c=%c,x=%x,v=%v ', '%m [%p] '];

const ENCODINGS = { defaultEncoding: 'UTF8', databases: { cyr_win1251: 'WIN1251', cyr_koi8r: 'KOI8R' } };
/** Entry caps byte 1 chooses from (besides the default): small enough to cut real entries. */
const SMALL_CAPS = [16, 80, 512, 4096];

export class PropertyViolation extends Error {
  constructor(format: LogFormat, message: string) {
    super(`${format}: ${message}`);
    this.name = 'PropertyViolation';
  }
}

export interface LogInput {
  prefix: string;
  /** Chunk lengths, repeated until the input is used up. */
  chunks: number[];
  maxEntryBytes: number | undefined;
  log: Buffer;
}

/** Reads the header (see the file comment); inputs shorter than it are an empty log. */
export function decodeLogInput(data: Buffer): LogInput {
  const prefix = PREFIXES[(data[0] ?? 0) % PREFIXES.length]!;
  const seed = data[1] ?? 0;
  // Small xorshift from the seed: chunk lengths 1..64, and every fourth seed a small cap.
  let x = seed * 2654435761 + 1;
  const chunks: number[] = [];
  for (let k = 0; k < 8; k++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    chunks.push(1 + ((x >>> 0) % 64));
  }
  const maxEntryBytes = seed % 4 === 3 ? SMALL_CAPS[(seed >> 2) % SMALL_CAPS.length] : undefined;
  return { prefix, chunks, maxEntryBytes, log: data.subarray(Math.min(2, data.length)) };
}

interface Parse {
  events: PglogEvent[];
  counters: ParseCounters;
}

function parse(format: LogFormat, input: LogInput, log: Buffer, chunks: number[] | null, startOffset: number): Parse {
  const events: PglogEvent[] = [];
  const parser = new LogParser({ format, prefix: input.prefix, encodings: ENCODINGS, maxEntryBytes: input.maxEntryBytes, startOffset }, (e) => events.push(e));
  if (chunks === null) parser.push(log);
  else {
    // Each chunk is pushed from one reused memory more than twice the log's size and is
    // overwritten once pushed: whatever the parser keeps of a chunk past its push must be a
    // copy, and with that much memory behind every chunk it always copies (ADR 0022).
    const memory = Buffer.allocUnsafeSlow(2 * log.length + 2);
    for (let at = 0, k = 0; at < log.length; k++) {
      const n = Math.min(chunks[k % chunks.length]!, log.length - at);
      log.copy(memory, 0, at, at + n);
      parser.push(memory.subarray(0, n));
      memory.fill(0x3f, 0, n);
      at += n;
    }
  }
  parser.end();
  return { events, counters: parser.counters };
}

/**
 * The counters that depend only on the bytes: `slow` (entries over their time budget) depends
 * on the clock, and an instrumented parse on a busy machine is slower; time is bounded by the
 * fuzzer's -timeout instead.
 */
function byteCounters(counters: ParseCounters): Record<string, number> {
  return Object.fromEntries(Object.entries(counters).filter(([name]) => name !== 'slow'));
}

function describe(e: PglogEvent | undefined): string {
  return e === undefined ? 'none' : JSON.stringify(e).slice(0, 300);
}

/** Throws PropertyViolation (or whatever the parser threw) when a property fails. */
export function checkLog(format: LogFormat, data: Buffer): void {
  const input = decodeLogInput(data);
  const { log } = input;
  const whole = parse(format, input, log, null, 0);
  const fail = (message: string): never => {
    throw new PropertyViolation(format, message);
  };

  let previousEnd = 0;
  for (const [i, e] of whole.events.entries()) {
    if (!(e.offset >= previousEnd && e.offset < e.end && e.end <= log.length)) {
      fail(`entry ${i} spans [${e.offset}, ${e.end}) after the previous one ended at ${previousEnd}, in an input of ${log.length} bytes`);
    }
    previousEnd = e.end;
  }
  const c = whole.counters;
  if (c.bytes !== log.length) fail(`${c.bytes} bytes counted of ${log.length}`);
  if (c.entries !== whole.events.length) fail(`${c.entries} entries counted, ${whole.events.length} emitted`);
  const truncated = whole.events.filter((e) => e.truncated).length;
  if (c.truncated !== truncated) fail(`${c.truncated} truncated entries counted, ${truncated} marked`);

  const chunked = parse(format, input, log, input.chunks, 0);
  if (!isDeepStrictEqual(byteCounters(chunked.counters), byteCounters(c))) {
    fail(`counters differ in chunks ${JSON.stringify(input.chunks)}: ${JSON.stringify(chunked.counters)} vs ${JSON.stringify(c)}`);
  }
  for (let i = 0; i < Math.max(whole.events.length, chunked.events.length); i++) {
    if (!isDeepStrictEqual(whole.events[i], chunked.events[i])) {
      fail(`event ${i} differs in chunks ${JSON.stringify(input.chunks)}: ${describe(chunked.events[i])} vs ${describe(whole.events[i])}`);
    }
  }

  // Resume after the first entry and after the middle one (where a restarted stream resumes).
  for (const k of new Set([0, whole.events.length >> 1])) {
    const at = whole.events[k];
    if (at === undefined || at.end >= log.length) continue;
    const resumed = parse(format, input, log.subarray(at.end), null, at.end);
    const expected = whole.events.slice(k + 1);
    for (let i = 0; i < Math.max(expected.length, resumed.events.length); i++) {
      if (!isDeepStrictEqual(expected[i], resumed.events[i])) {
        fail(`resuming at ${at.end} (after entry ${k}), event ${k + 1 + i} differs: ${describe(resumed.events[i])} vs ${describe(expected[i])}`);
      }
    }
  }
}
