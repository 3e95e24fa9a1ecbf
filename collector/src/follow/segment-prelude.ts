/**
 * What both segment scripts (segment-script.ts: the polling loop; segment-script-bash.ts: the
 * builtin wait) share: their options, their exit statuses, and the lines that run before their
 * loops (the values, quoted; open the file on fd 3, check its inode, seek to the offset). One
 * copy, so the two loops can never disagree about where a segment starts or what ends it.
 */
import type { LogFormat } from '@pglog/common/api/postgres-target.ts';

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

/**
 * How an idle segment waits: `builtins` (the default) runs the bash loop that starts no process
 * between its full checks, falling back to `polling` where the server has no bash; `polling`
 * runs the portable loop that starts a few processes every poll interval (the benchmark's
 * baseline, and the fallback).
 */
export type IdleWait = 'builtins' | 'polling';

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
  /**
   * The wait after a round that read data, before the next read (LogFollowerOptions.dataIntervalMs).
   * Default: pollIntervalMs.
   */
  dataIntervalMs?: number;
  /**
   * The builtin wait only: the longest wait after a round with data. A round that read less
   * than SMALL_ROUND_BYTES doubles the next wait up to this; a bigger round (or one that needed
   * `cat`) brings it back to dataIntervalMs. Default: dataIntervalMs (no growth).
   */
  dataIntervalMaxMs?: number;
  rotationCheckMs: number;
  heartbeatMs: number;
  /**
   * The builtin wait only: the longest wait between two looks for data during a long silence;
   * the wait grows from the poll interval to this once a silence lasted a heartbeat. Default:
   * the poll interval (no growth).
   */
  idlePollMaxMs?: number;
  /**
   * The builtin wait only: how often a long silence takes the file's size with `stat` (the
   * truncation check); heartbeats in between check with a builtin that the file is not empty
   * (what copytruncate leaves) and report the position. Default: every heartbeat.
   */
  sizeCheckMs?: number;
  /** Default `builtins`. */
  idleWait?: IdleWait;
}

/** Rounds of `pollIntervalMs` in `ms` (at least one). */
export function roundsIn(o: SegmentScriptOptions, ms: number): number {
  return Math.max(1, Math.round(ms / o.pollIntervalMs));
}

/** The poll interval as `sleep` / `read -t` take it (seconds, 3 decimals). */
export function pollSeconds(o: SegmentScriptOptions): string {
  return shellSeconds(o.pollIntervalMs);
}

/** The wait after a round with data, as `sleep` / `read -t` take it. */
export function dataSeconds(o: SegmentScriptOptions): string {
  return shellSeconds(o.dataIntervalMs ?? o.pollIntervalMs);
}

function shellSeconds(ms: number): string {
  return (Math.max(1, Math.round(ms)) / 1000).toFixed(3);
}

/**
 * The lines before the loop: values, `find_active`, `say`, `getpos`; fd 3 opened, its inode
 * checked, its offset set to `off` (or the segment ends truncated / gone). Leaves `size` (the
 * size at start) and `p` (= `off`) set.
 */
export function segmentPrelude(o: SegmentScriptOptions): string[] {
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
  ];
}

/**
 * One check of fd 3, as both loops make it: its size; truncation, reported before anything
 * more is read; and the head checksum, taken again while it covers fewer than K bytes.
 */
export function sizeAndHeadCheck(indent: string): string[] {
  return [
    'size=$(stat -L -c %s /dev/fd/3) || exit 84',
    'getpos',
    `if [ "$size" -lt "$p" ]; then say truncated "$size" "$p"; exit ${SEGMENT_EXIT.truncated}; fi`,
    'if [ "$head_len" -lt "$K" ] && [ "$size" -gt "$head_len" ]; then',
    '  n=$size; [ "$n" -gt "$K" ] && n=$K',
    '  set -- $(head -c "$n" /dev/fd/3 | cksum)',
    '  if [ "${2:-}" = "$n" ]; then say head "$n" "$1"; head_len=$n; fi',
    'fi',
  ].map((line) => `${indent}${line}`);
}
