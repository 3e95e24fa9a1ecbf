/** One factory for the entry assemblers of every log format. */
import { PglogError } from '@pglog/common/errors.ts';

import { CsvAssembler } from './csv-assembler.ts';
import { JsonAssembler } from './json-assembler.ts';
import { DEFAULT_MAX_ENTRY_BYTES } from './line-splitter.ts';
import { CompiledPrefix, compilePrefix } from './prefix.ts';
import type { EntryAssembler, LogFormat, RecordSink } from './record.ts';
import { StderrAssembler } from './stderr-assembler.ts';
import { SyslogAssembler } from './syslog-assembler.ts';

export interface AssemblerOptions {
  /** log_line_prefix (required for stderr and syslog; ignored by csvlog and jsonlog). */
  prefix?: string | CompiledPrefix | undefined;
  /** Entry cap in bytes (default DEFAULT_MAX_ENTRY_BYTES). */
  maxEntryBytes?: number | undefined;
  /** Records without the prefix's time (stderr, syslog), for a reader that never looks at it (CompiledPrefix.withoutTime). */
  withoutTime?: boolean | undefined;
  /**
   * stderr and syslog: hand the sink one record object over and over, made empty again before
   * each entry, for a sink that is done with a record, and with the Buffers in it, when it
   * returns (LogParser): a short stderr message is then memory the assembler reuses for the
   * next entry. csvlog and jsonlog make a record per entry either way.
   */
  reuseRecords?: boolean | undefined;
}

export function createAssembler(format: LogFormat, sink: RecordSink, options: AssemblerOptions = {}): EntryAssembler {
  const max = options.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
  switch (format) {
    case 'csvlog':
      return new CsvAssembler(sink, max);
    case 'jsonlog':
      return new JsonAssembler(sink);
    case 'stderr':
    case 'syslog': {
      const p = options.prefix;
      if (p === undefined) throw new PglogError('USAGE', `the ${format} log format needs a log_line_prefix`);
      const prefix = p instanceof CompiledPrefix ? p : compilePrefix(p);
      if (options.withoutTime === true) prefix.withoutTime();
      const reuse = options.reuseRecords === true;
      return format === 'stderr' ? new StderrAssembler(prefix, sink, max, reuse) : new SyslogAssembler(prefix, sink, max, reuse);
    }
  }
}
