// Test helpers: run the whole parsing path over bytes, chunked as a test wants.
import type { EncodingConfig } from '../../src/logformat/decode.ts';
import type { PglogEvent } from '../../src/logformat/events.ts';
import { LogParser, type ParseCounters } from '../../src/logformat/log-parser.ts';
import type { LogFormat } from '../../src/logformat/record.ts';

export interface ParseSetup {
  format: LogFormat;
  prefix?: string;
  encodings?: EncodingConfig;
  maxEntryBytes?: number;
}

export const UTF8_ONLY: EncodingConfig = { defaultEncoding: 'UTF8', databases: {} };

/** Parses `bytes` cut at the given offsets (sorted, within the buffer), from `startOffset`. */
export function parseChunks(setup: ParseSetup, bytes: Buffer, cuts: number[] = [], startOffset = 0): { events: PglogEvent[]; counters: ParseCounters } {
  const events: PglogEvent[] = [];
  const parser = new LogParser(
    { format: setup.format, prefix: setup.prefix, encodings: setup.encodings ?? UTF8_ONLY, maxEntryBytes: setup.maxEntryBytes, startOffset },
    (e) => events.push(e),
  );
  let from = 0;
  for (const cut of cuts) {
    if (cut <= from || cut >= bytes.length) continue;
    parser.push(bytes.subarray(from, cut));
    from = cut;
  }
  parser.push(bytes.subarray(from));
  parser.end();
  return { events, counters: parser.counters };
}

/** Parses in fixed-size chunks (e.g. 64 KiB, as a file stream would deliver them). */
export function parseInChunksOf(setup: ParseSetup, bytes: Buffer, size: number): { events: PglogEvent[]; counters: ParseCounters } {
  const cuts: number[] = [];
  for (let at = size; at < bytes.length; at += size) cuts.push(at);
  return parseChunks(setup, bytes, cuts);
}
