/**
 * Checkpoint messages of xlog.c (log_checkpoints):
 *
 *   checkpoint starting: time                 (flags: shutdown end-of-recovery immediate force wait xlog/wal time flush-all)
 *   restartpoint starting: time               (on a standby)
 *   checkpoint complete: wrote 44272 buffers (4.2%); 0 WAL file(s) added, 0 removed, 38 recycled;
 *     write=26.895 s, sync=0.003 s, total=26.965 s; sync files=19, longest=0.002 s, average=0.001 s;
 *     distance=626950 kB, estimate=626950 kB; lsn=0/3514A14C, redo lsn=0/3514A118      (lsn: PG15+)
 *
 * Every field is looked for on its own, so versions that add, drop or reorder parts still
 * parse: whatever is missing is null.
 */
import type { CheckpointEvent, EventCommon } from '../events.ts';
import { int, num } from './text.ts';

/** A checkpoint event's own fields; `kind` becomes the event's `checkpoint_kind`. */
export type CheckpointMessage = Omit<CheckpointEvent, keyof EventCommon | 'kind' | 'checkpoint_kind'> & {
  kind: CheckpointEvent['checkpoint_kind'];
};

const HEAD = /^(checkpoint|restartpoint) (starting|complete):/;
const BUFFERS = /wrote (\d+) buffers \((\d+(?:\.\d+)?)%\)/;
// Starts only where a digit run starts: unanchored, a bare (\d+) would rescan a run of n digits
// from each of its positions (quadratic; security review F1).
const WAL = /(?<!\d)(\d+) (?:WAL|transaction log) file\(s\) added, (\d+) removed, (\d+) recycled/;
const TIMES = /write=(\d+(?:\.\d+)?) s, sync=(\d+(?:\.\d+)?) s, total=(\d+(?:\.\d+)?) s/;
const SYNC = /sync files=(\d+), longest=(\d+(?:\.\d+)?) s, average=(\d+(?:\.\d+)?) s/;
const DISTANCE = /distance=(\d+) kB, estimate=(\d+) kB/;

export function parseCheckpoint(message: string): CheckpointMessage | null {
  const h = HEAD.exec(message);
  if (h === null) return null;
  const kind = h[1] === 'restartpoint' ? 'restartpoint' : 'checkpoint';
  const rest = message.slice(h[0].length);
  const result: CheckpointMessage = {
    kind,
    phase: 'starting',
    reason: null,
    buffers_written: null,
    buffers_pct: null,
    wal_added: null,
    wal_removed: null,
    wal_recycled: null,
    write_s: null,
    sync_s: null,
    total_s: null,
    sync_files: null,
    longest_sync_s: null,
    average_sync_s: null,
    distance_kb: null,
    estimate_kb: null,
  };
  if (h[2] === 'starting') {
    const reason = rest.trim();
    result.reason = reason === '' ? null : reason;
    return result;
  }
  result.phase = 'complete';
  const b = BUFFERS.exec(rest);
  if (b !== null) {
    result.buffers_written = int(b[1]);
    result.buffers_pct = num(b[2]);
  }
  const w = WAL.exec(rest);
  if (w !== null) {
    result.wal_added = int(w[1]);
    result.wal_removed = int(w[2]);
    result.wal_recycled = int(w[3]);
  }
  const t = TIMES.exec(rest);
  if (t !== null) {
    result.write_s = num(t[1]);
    result.sync_s = num(t[2]);
    result.total_s = num(t[3]);
  }
  const s = SYNC.exec(rest);
  if (s !== null) {
    result.sync_files = int(s[1]);
    result.longest_sync_s = num(s[2]);
    result.average_sync_s = num(s[3]);
  }
  const d = DISTANCE.exec(rest);
  if (d !== null) {
    result.distance_kb = int(d[1]);
    result.estimate_kb = int(d[2]);
  }
  return result;
}
