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
 * That loop starts a few short-lived processes every poll interval even when nothing is
 * written (`stat`, `sleep`, and `find_active` every rotation check): about 14 a second per
 * followed log. Where the server has bash, the segment runs segment-script-bash.ts instead,
 * which waits and looks for data with builtins and starts at most one process every two
 * seconds while idle (ADR 0014); this loop is the fallback without bash.
 *
 * Assumes Linux (/proc, /dev/fd) and GNU coreutils (stat -c, head -c, fractional sleep).
 */
import { dataSeconds, pollSeconds, roundsIn, SEGMENT_EXIT, segmentPrelude, type SegmentScriptOptions, sizeAndHeadCheck } from './segment-prelude.ts';
import { buildBuiltinWaitScript } from './segment-script-bash.ts';
import { shellQuote } from './shell-quote.ts';

export { type IdleWait, SEGMENT_EXIT, type SegmentScriptOptions } from './segment-prelude.ts';

/**
 * The command that runs a segment: the builtin-wait script under bash when the server has bash
 * (every mainstream distribution), else the polling script under the login shell. `exec bash`
 * costs one process when the segment starts; an idle segment then starts none between the
 * rare full checks (segment-script-bash.ts). `idleWait: 'polling'` runs the polling script
 * alone (the benchmark's baseline).
 */
export function buildSegmentScript(o: SegmentScriptOptions): string {
  const polling = buildPollingScript(o);
  if (o.idleWait === 'polling') return polling;
  // `command -v` is a builtin of every POSIX shell: choosing costs no process either.
  return `if command -v bash >/dev/null 2>&1; then exec bash -c ${shellQuote(buildBuiltinWaitScript(o))}; fi\n${polling}`;
}

/** The portable loop: a few short-lived processes (`stat`, `sleep`, ...) every poll interval. */
function buildPollingScript(o: SegmentScriptOptions): string {
  const every = (ms: number): number => roundsIn(o, ms);
  const nap = pollSeconds(o);
  return (
    [
      ...segmentPrelude(o),
      'idle=0',
      'held=-1',
      'while :; do',
      ...sizeAndHeadCheck('  '),
      '  if [ "$size" -gt "$p" ]; then',
      '    head -c $((size - p)) <&3 || exit 85',
      '    say size "$size"',
      '    idle=0',
      // Sleep after data too: each round then copies everything one data interval brought, in
      // one read, instead of spinning a few processes per small write of a busy server.
      `    sleep ${dataSeconds(o)}`,
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
      `  sleep ${nap}`,
      'done',
    ].join('\n') + '\n'
  );
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
    case 'size':
      return { kind: 'size', size: Number(words[1]) };
    case 'head':
      return { kind: 'head', length: Number(words[1]), crc: words[2] ?? '' };
    case 'rotated':
      return { kind: 'rotated' };
    case 'truncated':
      return { kind: 'truncated', size: Number(words[1]), position: Number(words[2]) };
    case 'gone':
      return { kind: 'gone', detail: words.slice(1).join(' ') };
    default:
      return { kind: 'other', text: line.slice(6) };
  }
}
