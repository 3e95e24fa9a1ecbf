/**
 * The planner: from the position to continue at and what the probe saw on the server, decides
 * which file to read next, from where, and whether to keep following it. Pure (no I/O), so
 * every rotation pattern can be property-tested.
 *
 * Where a stream never read before starts is decided apart, by `planStart` (the start point
 * of the configuration: newest, oldest or now); the stream stores that position before it reads
 * a byte (docs/decisions/0011-durable-first-start.md), so that `planNext` always has one.
 *
 * Rules, in order:
 * - No position (a follower used without a stored start): the file `planStart` would choose.
 * - Our file is the one with our inode whose head still checksums to ours (a rename keeps the
 *   inode). Bytes beyond our offset: read them, following when it is the newest file. Drained
 *   and a newer file exists: the next file in write order at 0 (several rotations while we
 *   were away are read one after the other).
 * - Our inode is gone, or holds new content, or is shorter than our offset (copytruncate,
 *   truncate-on-rotation): a copy (another inode whose first headLength bytes checksum to
 *   ours) is the same logical file; read it from our offset to its end, then the file after it.
 *   A copy shorter than our offset holds nothing we have not read (bytes written between
 *   logrotate's copy and its truncate are in no copy, but we may have read them live).
 * - No copy: the bytes are lost; report a gap and go on with the file now at our inode (a
 *   truncated file) or else the newest file, from 0.
 *
 * Write order: by mtime, the active file always last; equal mtimes put `x.2` before `x.1`
 * before `x`, then names in byte order.
 *
 * The planner may need head checksums the probe did not compute; it then asks for them
 * (`checksums`) and is called again with a probe that has them.
 */
import type { StartPoint } from '@pglog/common/api/postgres-target.ts';

import { formatIdentity, HEAD_BYTES, parseIdentity } from './identity.ts';
import { checksumKey, type ChecksumRequest, type ProbedFile, type ProbeResult } from './probe-script.ts';
import type { FollowedFile, FollowPosition } from './types.ts';

/** At most this many other files are checksummed when looking for a copy of a lost file. */
export const MAX_COPY_CANDIDATES = 64;

export interface PlannerOptions {
  /** Where to begin when there is no position at all. */
  startAt: StartPoint;
}

/** One segment to read on the server. */
export interface ReadStep {
  /** The file to open on the server (a copy when the logical file was truncated). */
  path: string;
  inode: string;
  offset: number;
  /** Keep reading as it grows: it is the newest file. */
  follow: boolean;
  /** The logical file the bytes belong to, in whose coordinates `offset` counts. */
  file: FollowedFile;
}

export interface Gap {
  file: FollowedFile | null;
  fromOffset: number;
  bytes: number | null;
  reason: string;
}

export type Plan =
  | { kind: 'checksums'; requests: ChecksumRequest[] }
  /**
   * Nothing to read now. `drained`: the position's file is complete (rotated away and read to
   * its end) and the file after it is still empty; a new file is announced only once it has
   * bytes, so that a position is never committed in a file whose identity covers no byte.
   */
  | { kind: 'wait'; reason: string; drained: boolean }
  /**
   * `continues`: the read goes on with the position's logical file at its offset (no new
   * `file` item). Otherwise a new file begins; `gap` says whether bytes were lost on the way.
   */
  | { kind: 'read'; read: ReadStep; continues: boolean; gap: Gap | null };

/** The files in the order they were written (oldest first, the active file last). */
export function orderFiles(files: readonly ProbedFile[], activeInode: string | null): ProbedFile[] {
  return [...files].sort((a, b) => {
    const aActive = a.inode === activeInode;
    if (aActive !== (b.inode === activeInode)) return aActive ? 1 : -1;
    if (a.mtime !== b.mtime) return a.mtime - b.mtime;
    if (a.ageRank !== b.ageRank) return b.ageRank - a.ageRank;
    if (a.primary !== b.primary) return a.primary ? 1 : -1;
    return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
  });
}

export function planNext(position: FollowPosition | null, probe: ProbeResult, options: PlannerOptions): Plan {
  const order = orderFiles(probe.files, probe.activeInode);
  const missing: ChecksumRequest[] = [];
  const crcOf = (file: ProbedFile, length: number): string | undefined => {
    const crc = probe.checksums.get(checksumKey(file.inode, length));
    if (crc === undefined) missing.push({ path: file.path, length });
    return crc;
  };
  const isLast = (file: ProbedFile): boolean => order.at(-1) === file;

  /**
   * A new logical file from `offset` (0, or its end when starting at the end). Empty files that
   * were rotated away are skipped (they hold nothing); an empty newest file is waited for.
   */
  const begin = (first: ProbedFile, offset: number, gap: Gap | null): Plan => {
    let file = first;
    for (let next = order[order.indexOf(file) + 1]; file.size === 0 && next !== undefined; next = order[order.indexOf(file) + 1]) file = next;
    if (file.size === 0) return { kind: 'wait', reason: `${file.path} is still empty`, drained: position !== null && gap === null };
    const headLength = Math.min(file.size, HEAD_BYTES);
    const crc = crcOf(file, headLength);
    if (crc === undefined) return { kind: 'checksums', requests: missing };
    const logical = { path: file.path, identity: formatIdentity({ inode: file.inode, headLength, crc }) };
    return { kind: 'read', read: { path: file.path, inode: file.inode, offset, follow: isLast(file), file: logical }, continues: false, gap };
  };

  if (position === null) return planFirstRead(probe, options, order);

  const offset = position.offset;
  const ours = parseIdentity(position.file.identity);
  if (ours === null) {
    const newest = order.at(-1);
    const gap = { file: position.file, fromOffset: offset, bytes: null, reason: `unreadable file identity ${JSON.stringify(position.file.identity)}` };
    return newest === undefined ? { kind: 'wait', reason: 'no log file yet', drained: false } : begin(newest, 0, gap);
  }

  const sameInode = order.find((f) => f.inode === ours.inode);
  let matched = false;
  if (sameInode !== undefined && sameInode.size >= ours.headLength) {
    const crc = crcOf(sameInode, ours.headLength);
    if (crc === undefined) return { kind: 'checksums', requests: missing };
    matched = crc === ours.crc;
  }
  if (sameInode !== undefined && matched && sameInode.size >= offset) {
    const next = order[order.indexOf(sameInode) + 1];
    if (sameInode.size > offset || next === undefined) {
      return {
        kind: 'read',
        read: { path: sameInode.path, inode: sameInode.inode, offset, follow: next === undefined, file: position.file },
        continues: true,
        gap: null,
      };
    }
    return begin(next, 0, null);
  }

  // Our bytes are not at our inode any more: look for a copy of the logical file.
  if (ours.headLength > 0) {
    const candidates = order
      .filter((f) => f.inode !== ours.inode && f.size >= ours.headLength)
      .sort((a, b) => (a.primary === b.primary ? b.mtime - a.mtime : a.primary ? 1 : -1))
      .slice(0, MAX_COPY_CANDIDATES);
    const copies = candidates.filter((f) => crcOf(f, ours.headLength) === ours.crc);
    if (missing.length > 0) return { kind: 'checksums', requests: missing };
    const copy = copies.sort((a, b) => b.size - a.size)[0];
    if (copy !== undefined) {
      if (copy.size > offset) {
        return { kind: 'read', read: { path: copy.path, inode: copy.inode, offset, follow: false, file: position.file }, continues: true, gap: null };
      }
      const next = order.slice(order.indexOf(copy) + 1).find((f) => !copies.includes(f));
      if (next === undefined)
        return { kind: 'wait', reason: `${copy.path} (a copy of ${position.file.path}) is drained and no newer file exists`, drained: false };
      return begin(next, 0, null);
    }
  }

  const restart = sameInode ?? order.at(-1);
  if (restart === undefined) return { kind: 'wait', reason: `${position.file.path} is gone and no log file exists`, drained: false };
  const reason =
    sameInode === undefined
      ? `${position.file.path} (inode ${ours.inode}) is gone and no copy of it was found`
      : `${position.file.path} (inode ${ours.inode}) was truncated or rewritten (now ${sameInode.size} bytes, we were at ${offset}) and no copy of it was found`;
  return begin(restart, 0, { file: position.file, fromOffset: offset, bytes: null, reason });
}

/** The first read of a stream without a committed position: where --start-at puts it (planStart). */
function planFirstRead(probe: ProbeResult, options: PlannerOptions, order: readonly ProbedFile[]): Plan {
  const start = planStart(probe, options.startAt);
  if (start.kind !== 'start') return start.kind === 'wait' ? { ...start, drained: false } : start;
  const file = order.find((f) => f.inode === parseIdentity(start.position.file.identity)?.inode);
  if (file === undefined) throw new Error('unreachable: the start is a listed file');
  return {
    kind: 'read',
    read: { path: file.path, inode: file.inode, offset: start.position.offset, follow: order.at(-1) === file, file: start.position.file },
    continues: false,
    gap: null,
  };
}

export type StartPlan =
  | { kind: 'checksums'; requests: ChecksumRequest[] }
  | { kind: 'wait'; reason: string }
  /** Store this position, then follow from it. */
  | { kind: 'start'; position: FollowPosition };

/**
 * Where a log never read before starts, by the configured start point:
 * - `newest`: the newest file from byte 0;
 * - `oldest`: the oldest file present (in write order) from byte 0;
 * - `now`: the end of the newest file.
 * The position is always in a file that has bytes, so that its identity covers some: an empty
 * newest file is reached as the end of the last file with bytes (for `newest` and `now` alike:
 * nothing lies between the two), and with no byte in any file there is nothing to choose yet.
 */
export function planStart(probe: ProbeResult, startAt: StartPoint): StartPlan {
  const order = orderFiles(probe.files, probe.activeInode);
  const written = order.filter((f) => f.size > 0);
  const last = written.at(-1);
  const first = written[0];
  if (last === undefined || first === undefined) {
    const newest = order.at(-1);
    return { kind: 'wait', reason: newest === undefined ? 'no log file yet' : `${newest.path} is still empty` };
  }
  const [file, offset] = startAt === 'oldest' ? [first, 0] : startAt === 'now' || last !== order.at(-1) ? [last, last.size] : [last, 0];
  const headLength = Math.min(file.size, HEAD_BYTES);
  const crc = probe.checksums.get(checksumKey(file.inode, headLength));
  if (crc === undefined) return { kind: 'checksums', requests: [{ path: file.path, length: headLength }] };
  return { kind: 'start', position: { file: { path: file.path, identity: formatIdentity({ inode: file.inode, headLength, crc }) }, offset } };
}
