// Load whose every statement can be identified in the server's log and in the store:
// `SELECT 'pglog-seq:<run>:<n>'` with n = 1, 2, 3, ... over the simple query protocol, so the
// text is logged as sent (log_min_duration_statement = 0 logs each one exactly once). The
// loss/duplicate checker (checker.ts) compares these numbers across the log and the store.
import { randomBytes } from 'node:crypto';

import pg from 'pg';

export const DEFAULT_TAG_PREFIX = 'pglog-seq';

export interface SeqLoad {
  /** A random run id, e.g. 'r8f3a0c'. */
  readonly run: string;
  /** Sequence numbers of statements that completed (each logged exactly once by the server), ascending. */
  completed(): number[];
  /** Statements that failed (server unavailable, connection lost); their numbers are never reused. */
  failures(): number;
  /** Stops issuing and waits for in-flight statements. */
  stop(): Promise<void>;
}

export interface SeqLoadOptions {
  ratePerSecond: number;
  /** Parallel connections (default 2). */
  connections?: number;
  /** Pads each statement with a comment up to about this many bytes. */
  payloadBytes?: number;
  /** Connect to this database instead of the URL's. */
  database?: string;
  /** Default 'pglog-seq'. */
  tagPrefix?: string;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The sequence numbers of `run` tagged anywhere in `text`, in order of appearance (repeats kept). */
export function parseSeqTags(text: string, run: string, tagPrefix: string = DEFAULT_TAG_PREFIX): number[] {
  const pattern = new RegExp(`${escapeRegExp(tagPrefix)}:${escapeRegExp(run)}:(\\d+)`, 'g');
  return [...text.matchAll(pattern)].map((m) => Number(m[1]));
}

/** The statement text for number `n`: the tag, then a comment padding it to `payloadBytes`. */
export function seqStatement(tagPrefix: string, run: string, n: number, payloadBytes = 0): string {
  const base = `SELECT '${tagPrefix}:${run}:${n}'`;
  const padding = payloadBytes - base.length - ' /*  */'.length;
  return padding > 0 ? `${base} /* ${'x'.repeat(padding)} */` : base;
}

/** `url` with its database (the path) replaced. */
export function withDatabase(url: string, database: string): string {
  const match = /^(postgres(?:ql)?:\/\/[^/?]*)(\/[^?]*)?(\?.*)?$/.exec(url);
  if (match === null) throw new Error('seq-load: cannot set the database of a URL that is not postgresql://...');
  return `${match[1]}/${encodeURIComponent(database)}${match[3] ?? ''}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Tokens at `rate` per second, up to a tenth of a second's worth in reserve. */
class TokenBucket {
  private tokens = 1;
  private last = performance.now();
  private readonly rate: number;
  private readonly capacity: number;

  constructor(rate: number) {
    this.rate = rate;
    this.capacity = Math.max(1, rate / 10);
  }

  /** Waits for a token; false when `stopped()` turns true first. */
  async take(stopped: () => boolean): Promise<boolean> {
    for (;;) {
      if (stopped()) return false;
      const now = performance.now();
      this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.rate);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return true;
      }
      await sleep(Math.max(1, Math.min(100, ((1 - this.tokens) / this.rate) * 1000)));
    }
  }
}

export function startSeqLoad(url: string, options: SeqLoadOptions): SeqLoad {
  if (!(options.ratePerSecond > 0)) throw new Error(`seq-load: ratePerSecond must be positive, got ${options.ratePerSecond}`);
  const run = `r${randomBytes(3).toString('hex')}`;
  const tagPrefix = options.tagPrefix ?? DEFAULT_TAG_PREFIX;
  const connectionString = options.database === undefined ? url : withDatabase(url, options.database);
  const bucket = new TokenBucket(options.ratePerSecond);
  const done: number[] = [];
  let failed = 0;
  let next = 1;
  let stopping = false;
  const isStopping = (): boolean => stopping;

  async function worker(): Promise<void> {
    let client: pg.Client | null = null;
    while (await bucket.take(isStopping)) {
      const n = next++;
      try {
        if (client === null) {
          const fresh = new pg.Client({ connectionString, application_name: 'pglog-seq-load', connectionTimeoutMillis: 10_000, query_timeout: 30_000 });
          // A connection lost between statements emits 'error' on the idle client: the next query fails and reconnects.
          fresh.on('error', () => {
            /* handled by the failing query */
          });
          client = fresh;
          await fresh.connect();
        }
        await client.query(seqStatement(tagPrefix, run, n, options.payloadBytes));
        done.push(n);
      } catch {
        failed++;
        const broken: pg.Client | null = client;
        client = null;
        if (broken !== null)
          await broken.end().catch(() => {
            /* already closed */
          });
        if (!stopping) await sleep(100); // the server may be restarting: do not spin
      }
    }
    if (client !== null)
      await client.end().catch(() => {
        /* already closed */
      });
  }

  const workers = Array.from({ length: Math.max(1, options.connections ?? 2) }, () => worker());
  return {
    run,
    completed: () => [...done].sort((a, b) => a - b),
    failures: () => failed,
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(workers);
    },
  };
}
