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
 * - look for data, and copy it: `read -n $n` of up to BUILTIN_READ_BYTES bytes on fd 3 itself,
 *   in the C locale (bytes, not characters) with NUL as the delimiter, written to stdout at
 *   once with `printf`, so stdout still carries exactly the bytes from the offset, and the
 *   descriptor's position stays the count of bytes sent. `read` stops at n bytes (more may
 *   follow), at a NUL (consumed, not stored: the loop writes it after the bytes before it, and
 *   treats the round as one that may have more), or at the end of the file (status 1). A round
 *   whose read reached the end of the file has copied everything: it starts no process and
 *   writes no status line, so a busy log's round is one write on its server and one SSH packet
 *   for the collector instead of two processes and three packets (issue 15: at 1 MB/s from 50
 *   servers, 457 process starts a second). Only a round that may have more starts `cat` for
 *   the rest: `cat` on fd 3 itself copies to the end of the file, however far the writer has
 *   got, and leaves the shared position at the count of bytes sent, so no `stat` is needed;
 * - notice rotation: `current_logfiles` is read with `read`, the active file compared with ours
 *   by `[ -ef ]`, and without it the directory listing by `[ -ot ]` (mtimes to the nanosecond).
 *   This only says whether another file MAY be active (a tie counts); only then does the loop
 *   run the exact `find_active` the probe uses, so the two never disagree about the outcome.
 *
 * What still needs processes is the full check (`stat` for the size: truncation, the head
 * checksum upgrade): in every round with data while the head checksum covers fewer than K
 * bytes, and while idle at rounds 1, 2, 4, 8 ... of the silence until it lasted a heartbeat,
 * then every `sizeCheckMs` of it. A file truncated below our offset reads as the end of the
 * file, so the next round is idle and its full check (round 1 of the silence) reports it, as
 * the check after every round with data did before. During a long silence every heartbeat
 * (2 s) still writes `PGLOG size` (the position: the loop read to the end), and checks with
 * `[ -s ]`, a builtin, that the file is not empty while our offset is not 0: copytruncate and
 * `> file` leave it empty, so those truncations are still reported within a heartbeat; one to
 * another size within `sizeCheckMs` (issue 46).
 *
 * Time in a silence is counted in milliseconds from the waits (bash 4 has no clock builtin):
 * the wait is the poll interval until the silence lasted a heartbeat, then doubles up to
 * `idlePollMaxMs`, so a long-idle log is looked at about once a second instead of five times
 * (issue 46: an idle loop cost its server 1.6 ms of CPU a second, two thirds of it in the
 * waits' wake-ups and the heartbeats' `stat`).
 *
 * Reading with `read` costs bash about 23 ns a byte (43 MB/s on this machine) against about
 * 1.3 ms for a process start: up to BUILTIN_READ_BYTES (1.5 ms) it is about as cheap or
 * cheaper, and it saves the collector packets. After a round that copied more than that, the
 * next one reads a single byte and starts `cat`, so a log busier than BUILTIN_READ_BYTES a
 * round does not pay for both.
 *
 * Assumes bash 4 or later (fractional `read -t`, `read -n -d -u`, process substitution), and what the
 * polling loop assumes (Linux /proc and /dev/fd, GNU coreutils).
 */
import { dataSeconds, pollSeconds, SEGMENT_EXIT, segmentPrelude, type SegmentScriptOptions, sizeAndHeadCheck } from './segment-prelude.ts';

/**
 * Bytes a round copies with bash's `read` before it starts `cat` for the rest: 64 KiB is about
 * 1.5 ms of bash's time, near what a process start costs, and with the follower's default
 * 800 ms wait after a round with data it covers a log written at 80 KB/s (ADR 0025).
 */
export const BUILTIN_READ_BYTES = 65536;

/**
 * A round with data that read less than this lets the next one wait longer (up to
 * dataIntervalMaxMs): a quiet log is read in fewer, fuller rounds, and a round costs the
 * collector about the same whatever it carries (ADR 0025's amendment).
 */
export const SMALL_ROUND_BYTES = 16384;

export function buildBuiltinWaitScript(o: SegmentScriptOptions): string {
  const poll = Math.max(1, Math.round(o.pollIntervalMs));
  const heartbeat = Math.max(poll, Math.round(o.heartbeatMs));
  const sizeCheck = Math.max(heartbeat, Math.round(o.sizeCheckMs ?? heartbeat));
  const napMax = Math.max(poll, Math.round(o.idlePollMaxMs ?? poll));
  const rotationCheck = Math.max(poll, Math.round(o.rotationCheckMs));
  const dataMin = Math.max(1, Math.round(o.dataIntervalMs ?? poll));
  const dataMax = Math.max(dataMin, Math.round(o.dataIntervalMaxMs ?? dataMin));
  const quiet = `idle=0; quiet=0; w=${poll}; t=${pollSeconds(o)}; next_full=1; next_beat=${heartbeat}; next_size=${sizeCheck}; next_rot=${rotationCheck}; held=-1`;
  return (
    [
      ...segmentPrelude(o),
      ...loopFunctions({ heartbeat, napMax, dataMin, dataMax }),
      `dw=${dataMin}; td=${dataSeconds(o)}`,
      // Rounds and milliseconds of the silence, the next wait, and when each check is due.
      quiet,
      `n=${BUILTIN_READ_BYTES}`,
      // 1 while the collector's last size may be above the offset (its lag is not zero).
      'behind=0',
      'while :; do',
      '  if take; then',
      // While the head checksum is short: it, and truncation, are checked before `cat` reads on.
      '    [ "$head_len" -lt "$K" ] && full',
      '    if [ "$more" = 1 ]; then',
      // `cat` copies to the end of the file, however far the writer has got meanwhile.
      '      getpos; q=$p',
      '      cat <&3 || exit 85',
      '      getpos; say size "$p"; behind=1',
      `      if [ $((p - q)) -ge ${BUILTIN_READ_BYTES} ]; then n=1; else n=${BUILTIN_READ_BYTES}; fi`,
      '    elif [ "$behind" = 1 ]; then',
      // This round reached the end of the file: the collector's lag is zero now.
      '      getpos; say size "$p"; behind=0',
      '    fi',
      `    ${quiet}`,
      // Wait after data too: each round then copies everything one interval brought, in one
      // read; after a small round longer, so that a quiet log comes in fewer, fuller rounds.
      `    if [ "$more" = 1 ] || [ "$got" -ge ${SMALL_ROUND_BYTES} ]; then next_dw=${dataMin}; else next_dw=$((dw * 2)); [ "$next_dw" -gt ${dataMax} ] && next_dw=${dataMax}; fi`,
      '    nap_data',
      '    continue',
      '  fi',
      `  if [ "$follow" != 1 ]; then full; [ "$size" -gt "$p" ] && continue; exit ${SEGMENT_EXIT.endOfFile}; fi`,
      '  idle=$((idle + 1))',
      `  if [ "$quiet" -lt ${heartbeat} ]; then`,
      // The first heartbeat of a silence: full checks at its rounds 1, 2, 4, 8 ...
      '    if [ "$idle" -ge "$next_full" ]; then full; say size "$size"; next_full=$((idle * 2)); fi',
      '  elif [ "$quiet" -ge "$next_beat" ]; then',
      `    next_beat=$((quiet + ${heartbeat}))`,
      // The size with `stat` every sizeCheckMs, or at once when the file became empty.
      '    if [ "$quiet" -ge "$next_size" ] || { [ ! -s /dev/fd/3 ] && [ "$p" != 0 ]; }; then',
      `      full; say size "$size"; next_size=$((quiet + ${sizeCheck}))`,
      '    else',
      '      getpos; say size "$p"',
      '    fi',
      '  fi',
      '  if [ "$quiet" -ge "$next_rot" ]; then',
      `    next_rot=$((quiet + ${rotationCheck}))`,
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

/** The loop's shell functions: nap and nap_data, take (read and send), full (the size check) and maybe_rotated. */
function loopFunctions(ms: { heartbeat: number; napMax: number; dataMin: number; dataMax: number }): string[] {
  return [
    // Waiting without a process; if the pipe cannot be made, `sleep` keeps the loop correct.
    'exec 9<> <(:) || :',
    // An idle wait of $w ms ($t seconds), counted into the silence; once that lasted a heartbeat, each wait doubles up to the longest.
    'nap() {',
    `  if [ "$quiet" -ge ${ms.heartbeat} ] && [ "$w" -lt ${ms.napMax} ]; then`,
    `    w=$((w * 2)); [ "$w" -gt ${ms.napMax} ] && w=${ms.napMax}`,
    "    printf -v t '%d.%03d' $((w / 1000)) $((w % 1000))",
    '  fi',
    '  read -t "$t" -u 9 z; [ $? -gt 128 ] || sleep "$t"',
    '  quiet=$((quiet + w))',
    '}',
    // The wait after data: $dw ms ($td seconds), changed to $next_dw first when the round asked.
    'nap_data() {',
    `  [ "$next_dw" = "$dw" ] || { dw=$next_dw; printf -v td '%d.%03d' $((dw / 1000)) $((dw % 1000)); }`,
    '  read -t "$td" -u 9 z; [ $? -gt 128 ] || sleep "$td"',
    '}',
    // Up to $n bytes, sent; status 1 when there were none. more=1: the round may have more
    // (n bytes read, or a NUL, which `read` consumed without storing and is sent here).
    // In the C locale (local to the function): bytes, not characters, for `-n` and `\${#c}`.
    'take() {',
    '  local LC_ALL=C',
    `  IFS= read -r -d '' -n "$n" -u 3 c; r=$?; got=\${#c}`,
    '  [ "$r" != 0 ] && [ -z "$c" ] && return 1',
    '  more=0',
    '  if [ -n "$c" ]; then printf %s "$c" || exit 85; fi',
    '  if [ "$r" = 0 ]; then',
    `    [ "\${#c}" -lt "$n" ] && { printf '\\0' || exit 85; }`,
    '    more=1',
    '  fi',
    '  return 0',
    '}',
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
  ];
}
