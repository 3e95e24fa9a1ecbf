/**
 * The segment script: streams ONE file from byte offset N, by file descriptor, and (when
 * following) keeps streaming as it grows until PostgreSQL or logrotate moves on.
 *
 * Why not `tail -F`: on truncation or rename-and-recreate it re-reads from 0 or switches before
 * the old file is drained, and its byte stream carries no marker of where that happened. Here
 * stdout carries exactly the file's bytes from N on, nothing else, so the reader's offset is
 * N + bytes received, always exact; everything else is a `PGLOG ...` status line on stderr and
 * the exit status says why the segment ended:
 *
 *   0  (not following) the end of the file was reached
 *   80 rotated: another file is active, ours is drained and its size held still across two checks
 *   81 truncated: the file is shorter than what was read (copytruncate); nothing past it was sent
 *   82 gone: the path no longer opens, or holds another inode
 *
 * How: `exec 3<file` pins the inode; `dd skip` seeks fd 3 to N (lseek, no reading); each round
 * compares the size (`stat /dev/fd/3`) with the descriptor's position (`/proc/$$/fdinfo/3`
 * `pos:`), reports truncation before reading anything more, and sends exactly the bytes present
 * (`head -c size-pos <&3` reads just that much, so the shared offset stays exact). Opening
 * `/dev/fd/3` by name re-opens the file with its own offset, which is how the head checksum is
 * taken without moving fd 3.
 *
 * A remote loop must not outlive its channel: a closed channel is noticed only by a failing
 * write, and an idle loop writes nothing, so it writes a `PGLOG size` heartbeat to stderr every
 * few seconds; every write is checked, so the loop ends on EPIPE even where SIGPIPE is ignored.
 *
 * Assumes Linux (/proc, /dev/fd) and GNU coreutils (stat -c, head -c, fractional sleep).
 */
import type { LogFormat } from '../config/target-types.ts';
import { FIND_ACTIVE_FUNCTION } from './active-file.sh.ts';
import { HEAD_BYTES } from './identity.ts';
import { formatSuffix } from './log-files.ts';
import { shellInteger, shellQuote } from './shell-quote.ts';

export const SEGMENT_EXIT = {
  endOfFile: 0,
  rotated: 80,
  truncated: 81,
  gone: 82,
} as const;

export interface SegmentScriptOptions {
  path: string;
  /** The inode the planner chose; a different file at the path ends the segment as `gone`. */
  inode: string;
  offset: number;
  /** Keep reading as the file grows (it is the newest file); else stop at its end. */
  follow: boolean;
  /** How many head bytes the current identity covers; below HEAD_BYTES, `PGLOG head` lines upgrade it. */
  headLength: number;
  logDirectory: string;
  dataDirectory: string;
  format: LogFormat;
  pollIntervalMs: number;
  rotationCheckMs: number;
  heartbeatMs: number;
}

export function buildSegmentScript(o: SegmentScriptOptions): string {
  const every = (ms: number): number => Math.max(1, Math.round(ms / o.pollIntervalMs));
  const pollSeconds = (Math.max(1, Math.round(o.pollIntervalMs)) / 1000).toFixed(3);
  return [
    'set -u',
    `f=${shellQuote(o.path)}`,
    `ino=${shellQuote(o.inode)}`,
    `off=${shellInteger(o.offset)}`,
    `follow=${o.follow ? 1 : 0}`,
    `head_len=${shellInteger(o.headLength)}`,
    `K=${shellInteger(HEAD_BYTES)}`,
    `dir=${shellQuote(o.logDirectory)}`,
    `data=${shellQuote(o.dataDirectory)}`,
    `fmt=${shellQuote(o.format)}`,
    `suffix=${shellQuote(formatSuffix(o.format))}`,
    FIND_ACTIVE_FUNCTION,
    `say() { printf 'PGLOG %s\\n' "$*" >&2 || exit 85; }`,
    // `command` keeps a failed redirection of exec from ending the shell.
    `if ! command exec 3<"$f"; then say gone cannot open; exit ${SEGMENT_EXIT.gone}; fi`,
    `[ "$(stat -L -c %i /dev/fd/3)" = "$ino" ] || { say gone another inode; exit ${SEGMENT_EXIT.gone}; }`,
    // The fd's offset, read with shell builtins only: this runs every poll, and `$(sed ...)`
    // would cost two processes each time on the database server.
    `getpos() { p=; while read -r k v; do if [ "$k" = pos: ]; then p=$v; break; fi; done < /proc/$$/fdinfo/3; }`,
    `size=$(stat -L -c %s /dev/fd/3) || exit 84`,
    `if [ "$size" -lt "$off" ]; then say truncated "$size" "$off"; exit ${SEGMENT_EXIT.truncated}; fi`,
    `dd bs=1 skip="$off" count=0 of=/dev/null <&3 2>/dev/null || exit 84`,
    'getpos',
    `[ "$p" = "$off" ] || { say cannot seek to "$off"; exit 84; }`,
    'idle=0',
    'held=-1',
    'while :; do',
    '  size=$(stat -L -c %s /dev/fd/3) || exit 84',
    '  getpos',
    `  if [ "$size" -lt "$p" ]; then say truncated "$size" "$p"; exit ${SEGMENT_EXIT.truncated}; fi`,
    '  if [ "$head_len" -lt "$K" ] && [ "$size" -gt "$head_len" ]; then',
    '    n=$size; [ "$n" -gt "$K" ] && n=$K',
    '    set -- $(head -c "$n" /dev/fd/3 | cksum)',
    '    if [ "${2:-}" = "$n" ]; then say head "$n" "$1"; head_len=$n; fi',
    '  fi',
    '  if [ "$size" -gt "$p" ]; then',
    '    head -c $((size - p)) <&3 || exit 85',
    '    say size "$size"',
    '    idle=0',
    // Sleep after data too: each round then copies everything one poll interval brought, in
    // one read, instead of spinning a few processes per small write of a busy server.
    `    sleep ${pollSeconds}`,
    '    continue',
    '  fi',
    `  [ "$follow" = 1 ] || exit ${SEGMENT_EXIT.endOfFile}`,
    '  idle=$((idle + 1))',
    `  [ $((idle % ${every(o.heartbeatMs)})) = 0 ] && say size "$size"`,
    `  if [ $((idle % ${every(o.rotationCheckMs)})) = 0 ]; then`,
    '    find_active',
    '    if [ -n "$act_ino" ] && [ "$act_ino" != "$ino" ]; then',
    `      [ "$size" = "$held" ] && { say rotated; exit ${SEGMENT_EXIT.rotated}; }`,
    '      held=$size',
    '    else',
    '      held=-1',
    '    fi',
    '  fi',
    `  sleep ${pollSeconds}`,
    'done',
  ].join('\n') + '\n';
}

export type SegmentStatus =
  | { kind: 'size'; size: number }
  | { kind: 'head'; length: number; crc: string }
  | { kind: 'rotated' }
  | { kind: 'truncated'; size: number; position: number }
  | { kind: 'gone'; detail: string }
  | { kind: 'other'; text: string };

/** Parses one stderr line of the segment script; null for lines that are not `PGLOG` status. */
export function parseSegmentStatus(line: string): SegmentStatus | null {
  if (!line.startsWith('PGLOG ')) return null;
  const words = line.slice(6).split(' ');
  const kind = words[0] ?? '';
  switch (kind) {
    case 'size': return { kind: 'size', size: Number(words[1]) };
    case 'head': return { kind: 'head', length: Number(words[1]), crc: words[2] ?? '' };
    case 'rotated': return { kind: 'rotated' };
    case 'truncated': return { kind: 'truncated', size: Number(words[1]), position: Number(words[2]) };
    case 'gone': return { kind: 'gone', detail: words.slice(1).join(' ') };
    default: return { kind: 'other', text: line.slice(6) };
  }
}
