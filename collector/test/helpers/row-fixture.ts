/**
 * The events of the pipeline fixture log (every kind but autoanalyze) and the source, read
 * time and text limit the row mapping tests map them with.
 */
import { readFileSync } from 'node:fs';

import type { PglogEvent } from '../../src/logformat/events.ts';
import { parseChunks } from './parse.ts';

export const ROW_SOURCE = { target: 'db1', instance: 'main', file: 'log/postgresql-2026-11-21.log' };
export const ROW_READ_AT = Date.parse('2026-11-22T00:00:00.000Z');
export const ROW_MAX_TEXT = 1024 * 1024;

/** The fixture's events, parsed as the collector parses stderr with `%m [%p] %q%u@%d `. */
export function pipelineEvents(): PglogEvent[] {
  return parseChunks({ format: 'stderr', prefix: '%m [%p] %q%u@%d ' }, readFileSync(new URL('../fixtures/pipeline-stderr.log', import.meta.url))).events;
}
