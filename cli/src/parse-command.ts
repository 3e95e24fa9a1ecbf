/**
 * `pglog parse [--format F] [--prefix P] [--encoding DB=ENC]... [--default-encoding ENC]
 *              [--summary|--events] [--max-entry-bytes N] FILE...`
 *
 * Parses log files offline with the collector's own parser. Options are validated here,
 * once, and passed down as a plain object.
 */
import type { Readable, Writable } from 'node:stream';

import { canonicalEncoding, type EncodingConfig } from '@pglog/collector/logformat/decode.ts';
import { detectFormat, detectPrefix } from '@pglog/collector/logformat/detect.ts';
import { DEFAULT_MAX_ENTRY_BYTES } from '@pglog/collector/logformat/line-splitter.ts';
import { addCounters, LogParser, type ParseCounters, summaryParser, ZERO_COUNTERS } from '@pglog/collector/logformat/log-parser.ts';
import { TemplateCache } from '@pglog/collector/logformat/normalize/normalize.ts';
import { compilePrefix } from '@pglog/collector/logformat/prefix.ts';
import { LOG_FORMATS, type LogFormat } from '@pglog/collector/logformat/record.ts';
import { inputName, readInput } from '@pglog/collector/parse/input.ts';
import { SummaryBuilder } from '@pglog/collector/parse/summary.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';

import { parseCommandArgs } from './command-args.ts';
import { BufferedOutput } from './output.ts';

export const PARSE_USAGE = `usage: pglog parse [--format stderr|csvlog|jsonlog|syslog] [--prefix PREFIX]
                   [--encoding DB=ENC]... [--default-encoding ENC]
                   [--summary|--events] [--max-entry-bytes N] FILE...
  FILE may be '-' for standard input; .gz and .bz2 input is read transparently.
  --format            log format (detected from the first bytes when absent)
  --prefix            log_line_prefix of stderr/syslog logs (detected when absent)
  --encoding DB=ENC   server encoding of database DB (repeatable), e.g. legacy=WIN1251
  --default-encoding  encoding of databases not named by --encoding (default UTF8)
  --summary           print one JSON summary object (default)
  --events            print one JSON event per line (NDJSON)
  --max-entry-bytes   entries above this size are truncated and counted (default 10 MiB)`;

export interface ParseCommandOptions {
  format: LogFormat | null;
  prefix: string | null;
  encodings: EncodingConfig;
  output: 'summary' | 'events';
  maxEntryBytes: number;
  files: string[];
}

export interface CommandIO {
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

/** Bytes looked at to detect the format and prefix of an input. */
const DETECT_SAMPLE_BYTES = 64 * 1024;

export function parseParseArgs(argv: string[]): ParseCommandOptions {
  const parsed = parseCommandArgs(
    {
      args: argv,
      allowPositionals: true,
      options: {
        format: { type: 'string' },
        prefix: { type: 'string' },
        encoding: { type: 'string', multiple: true },
        'default-encoding': { type: 'string' },
        summary: { type: 'boolean' },
        events: { type: 'boolean' },
        'max-entry-bytes': { type: 'string' },
      },
    },
    (message) => `${message}\n${PARSE_USAGE}`,
  );
  const { values, positionals } = parsed;
  if (positionals.length === 0) throw new PglogError('USAGE', `no input files\n${PARSE_USAGE}`);
  if (values.summary === true && values.events === true) throw new PglogError('USAGE', '--summary and --events exclude each other');
  const format = values.format ?? null;
  if (format !== null && !(LOG_FORMATS as readonly string[]).includes(format)) {
    throw new PglogError('USAGE', `--format ${format}: expected one of ${LOG_FORMATS.join(', ')}`);
  }
  if (values.prefix !== undefined) compilePrefix(values.prefix); // PREFIX_UNSUPPORTED before reading anything
  const databases: Record<string, string> = {};
  for (const item of values.encoding ?? []) {
    const eq = item.lastIndexOf('=');
    if (eq <= 0 || eq === item.length - 1) throw new PglogError('USAGE', `--encoding ${item}: expected DB=ENCODING, e.g. legacy=WIN1251`);
    databases[item.slice(0, eq)] = canonicalEncoding(item.slice(eq + 1));
  }
  const maxEntryBytes = values['max-entry-bytes'] === undefined ? DEFAULT_MAX_ENTRY_BYTES : Number(values['max-entry-bytes']);
  if (!Number.isSafeInteger(maxEntryBytes) || maxEntryBytes < 1024) {
    throw new PglogError('USAGE', `--max-entry-bytes ${values['max-entry-bytes']}: expected an integer of at least 1024`);
  }
  return {
    format: format as LogFormat | null,
    prefix: values.prefix ?? null,
    encodings: { defaultEncoding: canonicalEncoding(values['default-encoding'] ?? 'UTF8'), databases },
    output: values.events === true ? 'events' : 'summary',
    maxEntryBytes,
    files: positionals,
  };
}

/** Runs the command; resolves to the exit code (0 ok, 1 some input could not be read). */
export async function runParse(options: ParseCommandOptions, io: CommandIO): Promise<number> {
  const out = new BufferedOutput(io.stdout);
  const summary = options.output === 'summary' ? new SummaryBuilder() : null;
  const templates = new TemplateCache();
  let counters: ParseCounters = ZERO_COUNTERS;
  let failures = 0;
  for (const file of options.files) {
    try {
      counters = addCounters(counters, await parseOne(file, options, io, templates, summary, out));
    } catch (e) {
      failures++;
      if (!isPglogError(e)) throw e;
      io.stderr.write(`pglog parse: ${e.message}\n`);
    }
  }
  if (summary !== null) out.append(`${JSON.stringify(summary.build(counters))}\n`);
  await out.flush();
  return failures === 0 ? 0 : 1;
}

async function parseOne(
  file: string,
  options: ParseCommandOptions,
  io: CommandIO,
  templates: TemplateCache,
  summary: SummaryBuilder | null,
  out: BufferedOutput,
): Promise<ParseCounters> {
  let parser: Pick<LogParser, 'push' | 'end' | 'counters'> | null = null;
  const pending: Buffer[] = [];
  let pendingBytes = 0;
  const start = (): Pick<LogParser, 'push' | 'end' | 'counters'> => {
    const sample = Buffer.concat(pending, pendingBytes);
    const format = options.format ?? detectFormat(sample);
    if (format === null) throw new PglogError('FORMAT_UNDETECTED', `${inputName(file)}: cannot tell the log format from its first bytes; pass --format`);
    let prefix = options.prefix;
    if (prefix === null && (format === 'stderr' || format === 'syslog')) {
      prefix = detectPrefix(sample, format);
      if (prefix === null) throw new PglogError('PREFIX_UNDETECTED', `${inputName(file)}: no known log_line_prefix fits its first lines; pass --prefix`);
    }
    const parserOptions = { format, prefix: prefix ?? undefined, encodings: options.encodings, maxEntryBytes: options.maxEntryBytes, templates };
    // A summary reads a few fields of each event: its parser makes just those (EventParser.summarize).
    const p =
      summary !== null
        ? summaryParser(parserOptions, (item) => summary.add(item))
        : new LogParser(parserOptions, (event) => out.append(`${JSON.stringify(event)}\n`));
    p.push(sample);
    return p;
  };
  try {
    for await (const chunk of readInput(file, io.stdin)) {
      if (parser === null) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes < DETECT_SAMPLE_BYTES) continue;
        parser = start();
      } else {
        parser.push(chunk);
      }
      await out.flushIfFull();
    }
    if (parser === null && pendingBytes > 0) parser = start();
  } catch (e) {
    if (isPglogError(e) && e.code === 'INPUT_UNREADABLE') {
      // Name the line reached so the user knows how much was read before the failure.
      const line = (parser?.counters.lines ?? 0) + 1;
      throw new PglogError('INPUT_UNREADABLE', `${e.message} (at line ${line})`, { cause: e });
    }
    throw e;
  }
  if (parser === null) return ZERO_COUNTERS;
  parser.end();
  await out.flushIfFull();
  return parser.counters;
}
