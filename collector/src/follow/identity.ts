/**
 * File identity: `inode:headLength:crc`, where crc is the POSIX `cksum` CRC of the file's first
 * headLength bytes (headLength = min(size, HEAD_BYTES) when the identity was taken).
 *
 * Why both: a renamed file keeps its inode, so the inode finds it under its new name; but
 * copytruncate and log_truncate_on_rotation reuse an inode for new content, and a copy
 * (logrotate's `x.1`) has a new inode for old content. The head checksum tells these apart:
 * log lines start with timestamps, so two different logs practically never share their first
 * kilobyte.
 */

/** How many leading bytes an identity covers once the file is that long. */
export const HEAD_BYTES = 1024;

export interface FileIdentity {
  /** Decimal inode number (a string: XFS inodes exceed 2^53). */
  inode: string;
  /** How many leading bytes the checksum covers. */
  headLength: number;
  /** POSIX cksum CRC (decimal) of those bytes. */
  crc: string;
}

export function formatIdentity(id: FileIdentity): string {
  return `${id.inode}:${id.headLength}:${id.crc}`;
}

/** Parses `inode:headLength:crc`; null when the text is not an identity. */
export function parseIdentity(text: string): FileIdentity | null {
  const m = /^(\d+):(\d+):(\d+)$/.exec(text);
  if (m === null) return null;
  const headLength = Number(m[2]);
  if (!Number.isSafeInteger(headLength)) return null;
  return { inode: m[1] ?? '', headLength, crc: m[3] ?? '' };
}
