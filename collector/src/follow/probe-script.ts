/**
 * The probe: one short remote command that lists an instance's log files (inode, size, mtime,
 * path), names the active one, and checksums the heads of the files the planner asks about.
 *
 * Output is NUL-separated records, because file names may hold spaces and newlines but never
 * NUL:  `F <inode> <size> <mtime> <path>`, `A <inode or empty>`,
 *       `K <length> <inode> <crc> <bytes read> <path>`.
 * The checksum record carries the inode of the file it actually read (opened once, then
 * `stat /dev/fd/4` and `head <&4`), so a rename between listing and checksumming cannot pin a
 * checksum on the wrong file.
 *
 * Assumes a Linux server with GNU findutils and coreutils (`find -printf`, `stat -c`,
 * `head -c`, `cksum`); nothing is installed and nothing needs privileges beyond reading the logs.
 */
import type { LogFormat } from '@pglog/common/api/postgres-target.ts';

import { FIND_ACTIVE_FUNCTION } from './active-file.sh.ts';
import { classifyLogFileName, formatSuffix } from './log-files.ts';
import { shellInteger, shellQuote } from './shell-quote.ts';

/** Exit status of the probe when the log directory cannot be listed. */
export const PROBE_LIST_FAILED = 3;

export interface ChecksumRequest {
  /** Where to read (the inode actually read is reported back). */
  path: string;
  /** How many leading bytes. */
  length: number;
}

export interface ProbedFile {
  path: string;
  inode: string;
  size: number;
  /** Modification time in seconds since the epoch, fractional. */
  mtime: number;
  /** A primary log file (`*.log`) rather than a rotated copy (`*.log.1`). */
  primary: boolean;
  /** See LogFileName.ageRank. */
  ageRank: number;
}

export interface ProbeResult {
  files: ProbedFile[];
  /** Inode of the file PostgreSQL writes now, or null when there is none. */
  activeInode: string | null;
  /** `checksumKey(inode, length)` → crc, for each requested head that was fully read. */
  checksums: Map<string, string>;
}

export function checksumKey(inode: string, length: number): string {
  return `${inode}:${length}`;
}

export interface ProbeScriptOptions {
  logDirectory: string;
  dataDirectory: string;
  format: LogFormat;
  checksums: readonly ChecksumRequest[];
}

export function buildProbeScript(options: ProbeScriptOptions): string {
  const suffix = formatSuffix(options.format);
  const lines = [
    'set -u',
    `dir=${shellQuote(options.logDirectory)}`,
    `data=${shellQuote(options.dataDirectory)}`,
    `fmt=${shellQuote(options.format)}`,
    `suffix=${shellQuote(suffix)}`,
    FIND_ACTIVE_FUNCTION,
    // A compound command's failed redirection is not fatal to sh (an `exec` one would be).
    `ck() { { i=$(stat -L -c %i /dev/fd/4) && c=$(head -c "$1" <&4 | cksum) && printf 'K %s %s %s %s\\0' "$1" "$i" "$c" "$2"; } 4<"$2" 2>/dev/null; }`,
    // -H: the log directory itself may be a symlink. Names are filtered again in TypeScript.
    `find -H "$dir" -mindepth 1 -maxdepth 1 -type f \\( -name "*$suffix" -o -name "*$suffix.[0-9]*" -o -name "*$suffix-[0-9]*" \\) -printf 'F %i %s %T@ %p\\0' || exit ${PROBE_LIST_FAILED}`,
    'find_active',
    // The active file may be named without the format suffix (stderr log_filename is free).
    `if [ -n "$act" ]; then find -H "$act" -maxdepth 0 -type f -printf 'F %i %s %T@ %p\\0' 2>/dev/null; fi`,
    `printf 'A %s\\0' "$act_ino"`,
  ];
  for (const request of options.checksums) lines.push(`ck ${shellInteger(request.length)} ${shellQuote(request.path)}`);
  lines.push('exit 0');
  return lines.join('\n') + '\n';
}

/** Parses the probe's stdout. Throws on a record it does not understand (a broken script, not a server state). */
export function parseProbeOutput(output: Buffer, format: LogFormat): ProbeResult {
  const files = new Map<string, ProbedFile>();
  const checksums = new Map<string, string>();
  let activeInode: string | null = null;
  const records = output.toString('utf8').split('\0');
  if (records.at(-1) === '') records.pop();
  for (const record of records) {
    if (record.startsWith('F ')) {
      const m = /^F (\d+) (\d+) (\d+(?:\.\d+)?) (.+)$/s.exec(record);
      if (m === null) throw new Error(`probe: malformed file record ${JSON.stringify(record)}`);
      const path = m[4] ?? '';
      const inode = m[1] ?? '';
      // The listing comes first; the active file's own record only adds a file the listing missed.
      if (files.has(inode)) continue;
      const name = classifyLogFileName(path.slice(path.lastIndexOf('/') + 1), format);
      files.set(inode, { path, inode, size: Number(m[2]), mtime: Number(m[3]), primary: name?.primary ?? true, ageRank: name?.ageRank ?? 0 });
    } else if (record.startsWith('A ') || record === 'A') {
      const inode = record.slice(2).trim();
      activeInode = inode === '' ? null : inode;
    } else if (record.startsWith('K ')) {
      const m = /^K (\d+) (\d+) (\d+) (\d+) (.*)$/s.exec(record);
      if (m === null) throw new Error(`probe: malformed checksum record ${JSON.stringify(record)}`);
      if (m[1] === m[4]) checksums.set(checksumKey(m[2] ?? '', Number(m[1])), m[3] ?? '');
    } else {
      throw new Error(`probe: unexpected record ${JSON.stringify(record)}`);
    }
  }
  // A file that matched find's glob but not the stricter name rules (e.g. `x.log.1.gz`) is
  // dropped, unless it is the active file named by current_logfiles.
  const kept = [...files.values()].filter((f) => f.inode === activeInode || classifyLogFileName(f.path.slice(f.path.lastIndexOf('/') + 1), format) !== null);
  return { files: kept, activeInode, checksums };
}
