/**
 * The ingest benchmark's log writer: a child process of its own (so its CPU is not the
 * collector's) that appends realistic PostgreSQL stderr entries to many log files at a combined
 * rate, the way a logging collector does: small appends every few milliseconds, each entry
 * stamped with the wall-clock time of its write (`%m`, milliseconds).
 *
 *   node bench/ingest/log-writer.ts '{"files":[...],"bytesPerSec":N,"tickMs":10}'
 *
 * Driven over IPC (spawned with an 'ipc' stdio channel) by bench/ingest/writer-client.ts:
 *   parent → { type: 'prefill', bytes }  append about `bytes` to every file now, answer totals
 *                                   (PostgreSQL never leaves a log empty: its first line is
 *                                   written at start-up; the collector waits for a non-empty file)
 *   parent → { type: 'start' }      begin writing (the rate clock starts here)
 *   parent → { type: 'snapshot' }   answer { type: 'totals', ... } at once
 *   parent → { type: 'stop' }       stop writing, answer the final totals, exit
 * The rate is held by elapsed time (each file's due bytes = rate / files × seconds since
 * start), so a late tick is made up by a larger write, not lost; the parent compares what was
 * offered with what was asked. With `rates` in the config, each file has a rate of its own
 * (hot and cold servers, bench/transport-bench.ts).
 */
import { closeSync, openSync, writeSync } from 'node:fs';

import { formatLogTime, StatementLog } from './statements.ts';

export interface WriterConfig {
  files: string[];
  /** Combined rate, spread evenly over the files (ignored when `rates` is given). */
  bytesPerSec: number;
  /** Optional: bytes per second of each file (same length as `files`). */
  rates?: number[];
  tickMs: number;
}

export interface WriterTotals {
  type: 'totals';
  /** Wall-clock time (ms) of this snapshot. */
  at: number;
  /** Wall-clock time (ms) writing started, or null before `start`. */
  startedAt: number | null;
  bytes: number;
  lines: number;
  /** Statement entries (each becomes one row of pglog.statement_events). */
  statements: number;
  writes: number;
  /** Ticks that came more than 2 ticks late (the writer itself was starved). */
  lateTicks: number;
  /** Bytes appended to each file (prefill included), in file order. */
  fileBytes: number[];
}

export type WriterCommand = { type: 'prefill'; bytes: number } | { type: 'start' } | { type: 'snapshot' } | { type: 'stop' };

/** Per-file rates of a config: its own `rates`, or the combined rate spread evenly. */
export function fileRates(config: WriterConfig): number[] {
  if (config.rates === undefined) return config.files.map(() => config.bytesPerSec / config.files.length);
  if (config.rates.length !== config.files.length || config.rates.some((r) => !(r >= 0))) {
    throw new Error(`log-writer: rates must be ${config.files.length} numbers >= 0`);
  }
  return [...config.rates];
}

/** At most this much in one write call per file; more is written on the next ticks. */
const MAX_WRITE = 256 * 1024;

function main(): void {
  const config = JSON.parse(process.argv[2] ?? '') as WriterConfig;
  if (process.send === undefined) throw new Error('log-writer: must be spawned with an IPC channel');
  const send = process.send.bind(process);
  const fds = config.files.map((f) => openSync(f, 'a'));
  const logs = config.files.map((_, i) => new StatementLog(0x5eed + i * 7919));
  const written = config.files.map(() => 0);
  const fileBytes = config.files.map(() => 0);
  const rates = fileRates(config);
  let startedAt: number | null = null;
  let timer: NodeJS.Timeout | null = null;
  let bytes = 0;
  let writes = 0;
  let lateTicks = 0;
  let lastTick = 0;

  const totals = (): WriterTotals => ({
    type: 'totals',
    at: Date.now(),
    startedAt,
    bytes,
    lines: logs.reduce((s, l) => s + l.lines, 0),
    statements: logs.reduce((s, l) => s + l.statements, 0),
    writes,
    lateTicks,
    fileBytes: [...fileBytes],
  });

  const append = (i: number, minBytes: number): void => {
    const chunk = logs[i]!.entriesBytes(formatLogTime(Date.now()), minBytes);
    const n = writeSync(fds[i]!, chunk);
    bytes += n;
    fileBytes[i]! += n;
    writes++;
  };

  const tick = (): void => {
    const now = Date.now();
    if (lastTick !== 0 && now - lastTick > 3 * config.tickMs) lateTicks++;
    lastTick = now;
    const elapsed = (now - startedAt!) / 1000;
    for (let i = 0; i < fds.length; i++) {
      const missing = rates[i]! * elapsed - written[i]!;
      if (missing <= 0) continue;
      const before = bytes;
      append(i, Math.min(missing, MAX_WRITE));
      written[i]! += bytes - before;
    }
  };

  process.on('message', (m: WriterCommand) => {
    switch (m.type) {
      case 'prefill':
        for (let i = 0; i < fds.length; i++) append(i, m.bytes);
        send(totals());
        return;
      case 'start':
        if (startedAt !== null) return;
        startedAt = Date.now();
        timer = setInterval(tick, config.tickMs);
        return;
      case 'snapshot':
        send(totals());
        return;
      case 'stop':
        if (timer !== null) clearInterval(timer);
        timer = null;
        for (const fd of fds) closeSync(fd);
        send(totals(), () => process.exit(0));
        return;
    }
  });
  // The parent went away: do not keep writing.
  process.on('disconnect', () => process.exit(0));
}

main();
