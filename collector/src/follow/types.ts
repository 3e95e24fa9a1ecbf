/**
 * What the LogFollower hands its consumer. Positions are (file, offset) pairs the consumer
 * commits at entry boundaries; `follow(position)` resumes exactly there.
 */

/** A log file as the consumer knows it: where it was, and what it is (see identity.ts). */
export interface FollowedFile {
  /** Path on the server when it was last seen (informational: files are found by identity). */
  path: string;
  /** `inode:headLength:crc` (identity.ts). */
  identity: string;
}

/** A resumable position: the next byte to read is `offset` of `file`. */
export interface FollowPosition {
  file: FollowedFile;
  offset: number;
}

export type FollowItem =
  /** The data that follows is this file from this offset (start a new parser there). */
  | { kind: 'file'; file: FollowedFile; offset: number }
  /** Next bytes of the current file, contiguous. The consumer may empty `chunk` once it has parsed it. */
  | { kind: 'data'; chunk: Buffer }
  /** The current file is complete (rotated away and drained): flush the parser's last entry. */
  | { kind: 'end-of-file' }
  /** No data for idleMs while following: the consumer may flush a pending entry. */
  | { kind: 'idle' }
  /** The current file's size on the server (lag = size - consumed offset). */
  | { kind: 'size'; size: number }
  /**
   * Bytes were skipped: `file` (the position we had) is gone or was truncated with no copy
   * left, from `fromOffset`; `bytes` when known. A `file` item follows with where reading goes on.
   */
  | { kind: 'gap'; file: FollowedFile | null; fromOffset: number; bytes: number | null; reason: string };
