/**
 * The segment loop for servers with bash: the same contract as the polling loop of
 * segment-script.ts (stdout = exactly the file's bytes from the offset; `PGLOG` status lines;
 * exit 0 / 80 rotated / 81 truncated / 82 gone), but an idle followed log costs its server
 * almost no process starts (ADR 0014). The polling loop starts `stat` and `sleep` every poll
 * interval and `find_active`'s pipelines every rotation check, about 14 processes a second.
 * Here every step of an idle round is a bash builtin:
 *
 * - wait: `read -t` on a pipe this shell holds both ends of (`exec 9<> <(:)`: one process when
 *   the segment starts), which never has data and never reaches end of file;
 * - look for data: `read -n 1` of one byte on fd 3 itself, in the C locale (one byte, not one
 *   character) with NUL as the delimiter (an empty result with success is a NUL byte). A byte
 *   read is written to stdout at once with `printf`, so stdout still carries exactly the bytes
 *   from the offset, and the descriptor's position stays the count of bytes sent;
 * - notice rotation: `current_logfiles` is read with `read`, the active file compared with ours
 *   by `[ -ef ]`, and without it the directory listing by `[ -ot ]` (mtimes to the nanosecond).
 *   This only says whether another file MAY be active (a tie counts); only then does the loop
 *   run the exact `find_active` the probe uses, so the two never disagree about the outcome.
 *
 * What still needs processes is the full check (`stat` for the size: truncation, the head
 * checksum upgrade, the heartbeat): after every round that found data, as the polling loop did,
 * and while idle at rounds 1, 2, 4, 8 ... of the silence, then every heartbeat. A file
 * truncated while the loop is busy or just idle is reported as fast as before; during a long
 * silence within one heartbeat (2 s by default, was one poll interval).
 *
 * Assumes bash 4 or later (fractional `read -t`, `read -n -d -u`, process substitution), and what the
 * polling loop assumes (Linux /proc and /dev/fd, GNU coreutils).
 */
import { pollSeconds, roundsIn, SEGMENT_EXIT, segmentPrelude, type SegmentScriptOptions, sizeAndHeadCheck } from './segment-prelude.ts';

export function buildBuiltinWaitScript(o: SegmentScriptOptions): string {
  const nap = pollSeconds(o);
  const heartbeat = roundsIn(o, o.heartbeatMs);
  const rotationCheck = roundsIn(o, o.rotationCheckMs);
  return (
    [
      ...segmentPrelude(o),
      // Waiting without a process; if the pipe cannot be made, `sleep` keeps the loop correct.
      'exec 9<> <(:) || :',
      `nap() { read -t ${nap} -u 9 z; [ $? -gt 128 ] || sleep ${nap}; }`,
      `peek() { LC_ALL=C IFS= read -r -d '' -n 1 -u 3 c; }`,
      `send1() { if [ -n "$c" ]; then printf %s "$c"; else printf '\\0'; fi || exit 85; }`,
      // The full check: the size, truncation (before anything more is read), the head checksum.
      'full() {',
      ...sizeAndHeadCheck('  '),
      '}',
      // 0 when another file may be the active one (find_active's answer, with ties counted).
      'maybe_rotated() {',
      '  if [ -r "$data/current_logfiles" ]; then',
      '    a=',
      '    while IFS= read -r line || [ -n "$line" ]; do',
      '      case $line in "$fmt "*) a=${line#"$fmt "}; break ;; esac',
      '      line=',
      '    done < "$data/current_logfiles"',
      '    if [ -n "$a" ]; then',
      '      case $a in /*) ;; *) a="$data/$a" ;; esac',
      '      if [ -e "$a" ]; then [ ! "$a" -ef /dev/fd/3 ]; return; fi',
      '    fi',
      '  fi',
      '  for g in "$dir"/*"$suffix" "$dir"/.*"$suffix"; do',
      '    [ -f "$g" ] && [ ! -L "$g" ] && [ ! "$g" -ot /dev/fd/3 ] && [ ! "$g" -ef /dev/fd/3 ] && return 0',
      '  done',
      '  return 1',
      '}',
      'idle=0',
      'next_full=1',
      'held=-1',
      'while :; do',
      '  if peek; then',
      '    send1',
      '    full',
      '    if [ "$size" -gt "$p" ]; then head -c $((size - p)) <&3 || exit 85; fi',
      '    say size "$size"',
      '    idle=0; next_full=1; held=-1',
      // Wait after data too: each round then copies everything one interval brought, in one read.
      '    nap',
      '    continue',
      '  fi',
      `  if [ "$follow" != 1 ]; then full; [ "$size" -gt "$p" ] && continue; exit ${SEGMENT_EXIT.endOfFile}; fi`,
      '  idle=$((idle + 1))',
      '  if [ "$idle" -ge "$next_full" ]; then',
      '    full',
      '    say size "$size"',
      `    next_full=$((idle * 2)); [ "$next_full" -gt $((idle + ${heartbeat})) ] && next_full=$((idle + ${heartbeat}))`,
      '  fi',
      `  if [ $((idle % ${rotationCheck})) = 0 ]; then`,
      '    if maybe_rotated; then',
      '      find_active',
      '      if [ -n "$act_ino" ] && [ "$act_ino" != "$ino" ]; then',
      '        full',
      `        [ "$size" = "$p" ] && [ "$size" = "$held" ] && { say rotated; exit ${SEGMENT_EXIT.rotated}; }`,
      '        held=$size',
      '      else',
      '        held=-1',
      '      fi',
      '    else',
      '      held=-1',
      '    fi',
      '  fi',
      '  nap',
      'done',
    ].join('\n') + '\n'
  );
}
