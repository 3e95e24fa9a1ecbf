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
import { groupNumbers, int, num } from './text.ts';

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
  const rest = message.slice(h[0].length);
  const complete = h[2] === 'complete';
  const reason = complete ? '' : rest.trim();
  // A starting message carries no counters: they are read from nothing, so all null.
  const counters = complete ? rest : '';
  return {
    kind: h[1] === 'restartpoint' ? 'restartpoint' : 'checkpoint',
    phase: complete ? 'complete' : 'starting',
    reason: reason === '' ? null : reason,
    ...groupNumbers(counters, BUFFERS, { buffers_written: int, buffers_pct: num }),
    ...groupNumbers(counters, WAL, { wal_added: int, wal_removed: int, wal_recycled: int }),
    ...groupNumbers(counters, TIMES, { write_s: num, sync_s: num, total_s: num }),
    ...groupNumbers(counters, SYNC, { sync_files: int, longest_sync_s: num, average_sync_s: num }),
    ...groupNumbers(counters, DISTANCE, { distance_kb: int, estimate_kb: int }),
  };
}
