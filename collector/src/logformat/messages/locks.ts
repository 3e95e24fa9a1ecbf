/**
 * Lock messages of proc.c (log_lock_waits) and deadlock.c:
 *
 *   process 123 still waiting for ShareLock on transaction 456 after 1000.123 ms
 *   process 123 acquired ShareLock on transaction 456 after 1200.500 ms
 *   process 123 avoided deadlock for ShareLock on transaction 456 by rearranging queue order after 1000.1 ms
 *   process 123 detected deadlock while waiting for ShareLock on transaction 456 after 1000.1 ms
 *   process 123 failed to acquire ShareLock on transaction 456 after 1000.1 ms
 *   DETAIL: Process holding the lock: 789. Wait queue: 123.
 *           Processes holding the lock: 1, 2. Wait queue: 3, 4.
 *
 *   ERROR: deadlock detected
 *   DETAIL: Process 123 waits for ShareLock on transaction 456; blocked by process 789.
 *           Process 789 waits for ShareLock on transaction 455; blocked by process 123.
 *           Process 123: UPDATE ...
 *           Process 789: UPDATE ...
 */
import type { DeadlockProcess, LockWaitState } from '../events.ts';
import { int, intList, num } from './text.ts';

export interface LockWaitMessage {
  state: LockWaitState;
  pid: number;
  mode: string;
  object: string;
  type: string;
  waitMs: number;
}

const WAIT =
  /^process (\d+) (still waiting for|acquired|avoided deadlock for|detected deadlock while waiting for|failed to acquire) (\S+) on (.+?)(?: by rearranging queue order)? after (\d+(?:\.\d+)?) ms$/;

const STATES: Readonly<Record<string, LockWaitState>> = {
  'still waiting for': 'waiting',
  acquired: 'acquired',
  'avoided deadlock for': 'deadlock_avoided',
  'detected deadlock while waiting for': 'deadlock_detected',
  'failed to acquire': 'failed',
};

/** Object descriptions of DescribeLockTag (lmgr.c), longest first where one prefixes another. */
const LOCK_TYPES = [
  'virtual transaction',
  'speculative token',
  'remote transaction',
  'transaction',
  'extension of relation',
  'relation',
  'page',
  'tuple',
  'object',
  'advisory lock',
  'user lock',
  'pg_database.datfrozenxid',
  'applytransaction',
  'unrecognized locktag type',
];

/** What kind of object a lock is on, from its description (`relation 16384 of database 5` → `relation`). */
export function lockTypeOf(object: string): string {
  for (const t of LOCK_TYPES) {
    if (object.startsWith(t) && (object.length === t.length || object.charCodeAt(t.length) === 32)) return t;
  }
  // Unknown wording: the words before the first one that holds a digit or a bracket.
  const words: string[] = [];
  for (const w of object.split(' ')) {
    if (/[\d([]/.test(w)) break;
    words.push(w);
  }
  return words.length > 0 ? words.join(' ') : 'unknown';
}

export function parseLockWait(message: string): LockWaitMessage | null {
  const m = WAIT.exec(message);
  if (m === null) return null;
  const pid = int(m[1]);
  const waitMs = num(m[5]);
  const state = STATES[m[2] ?? ''];
  if (pid === null || waitMs === null || state === undefined) return null;
  const object = m[4] ?? '';
  return { state, pid, mode: m[3] ?? '', object, type: lockTypeOf(object), waitMs };
}

// Anchored: PostgreSQL starts the DETAIL with it (proc.c), and unanchored each repetition of the
// words would rescan [^.]* to the next full stop (quadratic; security review F1).
const HOLDERS = /^Process(?:es)? holding the lock: ([^.]*)\. Wait queue: ([^.]*)\./;

/** Holder and waiter pids from the DETAIL of a lock wait message. */
export function parseLockQueue(detail: string | null): { holders: number[]; waiters: number[] } {
  const m = detail === null ? null : HOLDERS.exec(detail);
  if (m === null) return { holders: [], waiters: [] };
  return { holders: intList(m[1] ?? ''), waiters: intList(m[2] ?? '') };
}

const WAITS_FOR = /^Process (\d+) waits for (\S+) on (.+); blocked by process (\d+)\.$/;
const QUERY = /^Process (\d+): (.*)$/;

/** The processes of a deadlock DETAIL, in order of first mention; multi-line queries joined with "\n". */
export function parseDeadlockDetail(detail: string | null): DeadlockProcess[] {
  if (detail === null) return [];
  const byPid = new Map<number, DeadlockProcess>();
  const get = (pid: number): DeadlockProcess => {
    let p = byPid.get(pid);
    if (p === undefined) {
      p = { pid, lock_mode: null, lock_object: null, blocked_by: null, query: null };
      byPid.set(pid, p);
    }
    return p;
  };
  let lastQuery: DeadlockProcess | null = null;
  for (const line of detail.split('\n')) {
    const w = WAITS_FOR.exec(line);
    if (w !== null) {
      const pid = int(w[1]);
      if (pid !== null) {
        const p = get(pid);
        p.lock_mode = w[2] ?? null;
        p.lock_object = w[3] ?? null;
        p.blocked_by = int(w[4]);
      }
      lastQuery = null;
      continue;
    }
    const q = QUERY.exec(line);
    if (q !== null) {
      const pid = int(q[1]);
      if (pid !== null) {
        lastQuery = get(pid);
        lastQuery.query = q[2] ?? '';
        continue;
      }
    }
    if (lastQuery !== null) lastQuery.query = `${lastQuery.query ?? ''}\n${line}`;
  }
  return [...byPid.values()];
}
