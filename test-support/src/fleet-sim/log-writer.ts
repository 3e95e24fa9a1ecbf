/**
 * The simulated servers' log writer: a child process of its own (so its CPU is not the
 * collector's) that appends realistic PostgreSQL stderr entries to many log files, each at its
 * own rate, the way a logging collector does: small appends every tick, each entry stamped with
 * the wall-clock time of its write (`%m`, milliseconds). The ingest and transport benchmarks
 * and the fleet simulator (fleet.ts) drive it.
 *
 * Driven over IPC (forked with an 'ipc' stdio channel) by writer-client.ts:
 *   parent → { type: 'configure', config }  first and once: the files, rates, tick, markers,
 *                                   rotation (not argv: a fleet's paths exceed one argument's limit)
 *   parent → { type: 'prefill', bytes }  append about `bytes` to every file now, answer totals
 *                                   (PostgreSQL never leaves a log empty: its first line is
 *                                   written at start-up; the collector waits for a non-empty file)
 *   parent → { type: 'start' }      begin writing (the rate clock starts here)
 *   parent → { type: 'snapshot' }   answer { type: 'totals', ... } at once
 *   parent → { type: 'rotate', files? } rotate these files (all when absent) now, answer totals
 *   parent → { type: 'stop' }       stop writing, answer the final totals, exit
 * The rate is held by elapsed time (each file's due bytes = its rate × seconds since start), so
 * a late tick is made up by a larger write, not lost; the parent compares what was offered with
 * what was asked.
 *
 * With `markers`, every write to a file ends with one marker statement (log-files.ts), numbered
 * 1, 2, 3, ... per file, so a checker can find each one in the store exactly once. With
 * `rotateEveryBytes`, a file is rotated the way PostgreSQL's logging collector does it: the
 * next file is created, then `current_logfiles` is replaced (written aside, renamed), then
 * writing goes on there; the old file stays.
 */
import { closeSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { formatLogTime, StatementLog } from '../statement-log.ts';
import { currentLogfilesLine, markerEntry, rotatedLogName } from './log-files.ts';

export interface WriterConfig {
  files: string[];
  /** Combined rate, spread evenly over the files (ignored when `rates` is given). */
  bytesPerSec: number;
  /** Optional: bytes per second of each file (same length as `files`). */
  rates?: number[];
  tickMs: number;
  /** Marker statements: `SELECT 'TAG:RUN:N'` with RUN from `runs` (one per file, same order). */
  markers?: { tagPrefix: string; runs: string[] };
  /**
   * Rotates a file once this many bytes were written to it, to the next name of rotatedLogName
   * in the same directory, updating `current_logfiles` in the directory above (the data
   * directory). Files must then be named as rotatedLogName names them.
   */
  rotateEveryBytes?: number;
  /**
   * Rotated files older than this (since their rotation) are deleted at the next rotation of
   * their log, as a retention job would: a long run at a fleet's rate fills the disk otherwise.
   * Without it every rotated file stays. A collector that has not read a file by then loses it
   * (a gap the checker sees as lost markers): keep it well above any outage a run causes.
   */
  keepRotatedMs?: number;
}

export interface WriterTotals {
  type: 'totals';
  /** Wall-clock time (ms) of this snapshot. */
  at: number;
  /** Wall-clock time (ms) writing started, or null before `start`. */
  startedAt: number | null;
  bytes: number;
  lines: number;
  /** Statement entries (each becomes one row of pglog.statement_events), markers included. */
  statements: number;
  writes: number;
  /** Ticks that came more than 2 ticks late (the writer itself was starved). */
  lateTicks: number;
  /** Bytes appended to each file (prefill included), in file order. */
  fileBytes: number[];
  /** Statement entries written to each file, markers included, in file order. */
  fileStatements: number[];
  /** Markers written to each file (numbered 1 .. this), in file order; zeros without markers. */
  fileMarkers: number[];
  /** Rotations of each file, in file order. */
  fileRotations: number[];
}

/** `configure` comes first, once: the config goes over IPC, not argv (2,000 paths exceed the kernel's 128 KiB limit on one argument). */
export type WriterCommand =
  | { type: 'configure'; config: WriterConfig }
  | { type: 'prefill'; bytes: number }
  | { type: 'start' }
  | { type: 'snapshot' }
  | { type: 'rotate'; files?: number[] }
  | { type: 'stop' };

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

/** One simulated server's log: where it writes now and what it wrote. */
interface Log {
  fd: number;
  path: string;
  /** Rotations so far (the current file is rotatedLogName(generation)). */
  generation: number;
  log: StatementLog;
  /** Bytes in the current file. */
  inFile: number;
  /** Bytes written since start (the rate's account; prefill excluded). */
  due: number;
  bytes: number;
  statements: number;
  markers: number;
  marker: ((ts: string, n: number) => Buffer) | null;
  /** Files rotated away, oldest first, with when. */
  rotated: Array<{ path: string; at: number }>;
}

function openLogs(config: WriterConfig): Log[] {
  if (config.markers !== undefined && config.markers.runs.length !== config.files.length) {
    throw new Error(`log-writer: markers.runs must name ${config.files.length} runs, one per file`);
  }
  return config.files.map((path, i) => {
    const run = config.markers?.runs[i];
    const tagPrefix = config.markers?.tagPrefix;
    return {
      fd: openSync(path, 'a'),
      path,
      generation: 0,
      log: new StatementLog(0x5eed + i * 7919),
      inFile: 0,
      due: 0,
      bytes: 0,
      statements: 0,
      markers: 0,
      marker: run === undefined || tagPrefix === undefined ? null : (ts, n) => markerEntry(ts, tagPrefix, run, n),
      rotated: [],
    };
  });
}

/** PostgreSQL's rotation: the next file exists before current_logfiles names it; the old one stays (for keepRotatedMs, when given). */
function rotate(l: Log, keepRotatedMs: number | undefined): void {
  const now = Date.now();
  if (keepRotatedMs !== undefined) {
    while (l.rotated.length > 0 && now - l.rotated[0]!.at > keepRotatedMs) rmSync(l.rotated.shift()!.path, { force: true });
  }
  l.rotated.push({ path: l.path, at: now });
  const logDirectory = dirname(l.path);
  const dataDirectory = dirname(logDirectory);
  l.generation++;
  const name = rotatedLogName(l.generation);
  const next = join(logDirectory, name);
  const fd = openSync(next, 'a');
  const temp = join(dataDirectory, 'current_logfiles.tmp');
  writeFileSync(temp, currentLogfilesLine(join(logDirectory.slice(dataDirectory.length + 1), name)));
  renameSync(temp, join(dataDirectory, 'current_logfiles'));
  closeSync(l.fd);
  l.fd = fd;
  l.path = next;
  l.inFile = 0;
}

/** The logs and their accounts: appends at the configured rates, rotations, totals. */
class Writer {
  private readonly config: WriterConfig;
  private readonly logs: Log[];
  private readonly rates: number[];
  private readonly rotations: number[];
  startedAt: number | null = null;
  private bytes = 0;
  private writes = 0;
  private lateTicks = 0;
  private lastTick = 0;

  constructor(config: WriterConfig) {
    this.config = config;
    this.logs = openLogs(config);
    this.rates = fileRates(config);
    this.rotations = this.logs.map(() => 0);
  }

  totals(): WriterTotals {
    const logs = this.logs;
    return {
      type: 'totals',
      at: Date.now(),
      startedAt: this.startedAt,
      bytes: this.bytes,
      lines: logs.reduce((s, l) => s + l.log.lines + l.markers, 0),
      statements: logs.reduce((s, l) => s + l.statements, 0),
      writes: this.writes,
      lateTicks: this.lateTicks,
      fileBytes: logs.map((l) => l.bytes),
      fileStatements: logs.map((l) => l.statements),
      fileMarkers: logs.map((l) => l.markers),
      fileRotations: [...this.rotations],
    };
  }

  /** Appends about `bytes` to every log now (not counted against the rates). */
  prefill(bytes: number): void {
    for (let i = 0; i < this.logs.length; i++) this.append(i, bytes);
  }

  /** One tick: every log gets what its rate is owed since the start. */
  tick(): void {
    const now = Date.now();
    if (this.lastTick !== 0 && now - this.lastTick > 3 * this.config.tickMs) this.lateTicks++;
    this.lastTick = now;
    const elapsed = (now - this.startedAt!) / 1000;
    for (let i = 0; i < this.logs.length; i++) {
      const missing = this.rates[i]! * elapsed - this.logs[i]!.due;
      if (missing <= 0) continue;
      this.logs[i]!.due += this.append(i, Math.min(missing, MAX_WRITE));
    }
  }

  /** Rotates the logs at these indices (all when absent). */
  rotate(indices: readonly number[] | undefined): void {
    for (const i of indices ?? this.logs.map((_, k) => k)) {
      const l = this.logs[i];
      if (l === undefined) continue;
      rotate(l, this.config.keepRotatedMs);
      this.rotations[i]!++;
    }
  }

  close(): void {
    for (const l of this.logs) closeSync(l.fd);
  }

  private put(l: Log, chunk: Buffer): number {
    const n = writeSync(l.fd, chunk);
    this.bytes += n;
    l.bytes += n;
    l.inFile += n;
    this.writes++;
    return n;
  }

  /** Whole entries of at least `minBytes`, then a marker when markers are on; returns the bytes written. */
  private append(i: number, minBytes: number): number {
    const l = this.logs[i]!;
    const ts = formatLogTime(Date.now());
    const before = l.log.statements;
    let n = this.put(l, l.log.entriesBytes(ts, minBytes));
    l.statements += l.log.statements - before;
    if (l.marker !== null) {
      l.markers++;
      l.statements++;
      n += this.put(l, l.marker(ts, l.markers));
    }
    if (this.config.rotateEveryBytes !== undefined && l.inFile >= this.config.rotateEveryBytes) this.rotate([i]);
    return n;
  }
}

function main(): void {
  if (process.send === undefined) throw new Error('log-writer: must be spawned with an IPC channel');
  const send = process.send.bind(process);
  let config: WriterConfig | null = null;
  let writer: Writer | null = null;
  let timer: NodeJS.Timeout | null = null;
  process.on('message', (m: WriterCommand) => {
    if (m.type === 'configure') {
      if (writer !== null) throw new Error('log-writer: configured twice');
      config = m.config;
      writer = new Writer(config);
      return;
    }
    if (writer === null || config === null) throw new Error(`log-writer: ${m.type} before configure`);
    switch (m.type) {
      case 'prefill':
        writer.prefill(m.bytes);
        send(writer.totals());
        return;
      case 'start':
        if (writer.startedAt !== null) return;
        writer.startedAt = Date.now();
        timer = setInterval(() => writer!.tick(), config.tickMs);
        return;
      case 'snapshot':
        send(writer.totals());
        return;
      case 'rotate':
        writer.rotate(m.files);
        send(writer.totals());
        return;
      case 'stop':
        if (timer !== null) clearInterval(timer);
        timer = null;
        writer.close();
        send(writer.totals(), () => process.exit(0));
        return;
    }
  });
  // The parent went away: do not keep writing.
  process.on('disconnect', () => process.exit(0));
}

// Run as the child (forked by writer-client.ts, configured over IPC); imported for its types, it does nothing.
if (process.argv[1] === import.meta.filename) main();
