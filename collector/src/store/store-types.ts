/**
 * What the store writer takes and returns: shared by the writer, the batcher and the pure
 * row mapping. Re-exported by store-writer.ts, where callers import them from.
 */
import type { PglogEvent } from '../logformat/events.ts';
import type { TextRepairs } from './text-clean.ts';

/** Where an event was read: a log file of a target's PostgreSQL instance. */
export interface SourceRef {
  target: string;
  instance: string;
  file: string;
}

/** A read position: committed with the events before it (exactly once). */
export interface StorePosition {
  target: string;
  instance: string;
  file: string;
  /** The file's identity (inode or start-of-file checksum): a rotated file has another. */
  identity: string;
  /** Byte offset of the next entry to read. */
  offset: number;
}

export interface BatchItem {
  source: SourceRef;
  event: PglogEvent;
  /** When the collector read the entry (ms since 1970): the row's ts when the event has none it can trust. */
  readAt: number;
}

export interface CommitResult {
  /** Rows committed per event table (quarantined rows not included). */
  rows: Record<string, number>;
  /** Rows the store refused, kept in pglog.quarantine with the reason. */
  quarantined: number;
  /** The same by event table, when any was refused. */
  quarantinedByTable?: Record<string, number>;
  /** Streams a newer owner has claimed: nothing of them was written; the stream must stop. */
  fenced: Array<{ target: string; instance: string; epoch: number }>;
  /** Time spent in COPY statements, ms. */
  copyMs: number;
  /** COPY BINARY bytes sent for the committed rows. */
  bytes: number;
  /** Text repaired on the way (NULs, unpaired surrogates, values cut to maxTextBytes). */
  repairs?: TextRepairs;
  /** Rows whose ts is the read time because the logged one was missing or not an instant. */
  readTimeUsed?: number;
}

/** Key of a stream in the `epochs` map of `commit`. */
export function streamKeyOf(target: string, instance: string): string {
  return `${target}\u0000${instance}`;
}
