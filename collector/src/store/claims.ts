/**
 * Claims and first positions of many streams in one transaction each.
 *
 * A collector that starts (or restarts) in front of a fleet claims every stream it reads and
 * stores where each never-collected log starts, before it reads a byte (ADR 0011). One
 * transaction per stream took one of the store writer's few connections per call, queued behind
 * the batches' COPYs: with a thousand streams, streams waited about 20 s after their SSH
 * connection was up (issue 46). Calls that arrive while a transaction runs are gathered and run
 * together in the next one, with the same statements over arrays (`unnest`), rows locked in key
 * order as every other statement of the store does; each caller gets its own answer, or its own
 * STORE_FENCED. A failure of the transaction (the store away) fails every call of it, and each
 * stream retries as it would have alone.
 */
import { PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import { claimEpochAll, claimNextAll, insertStartPositions, lockClaims, readPositions } from './store-sql.ts';
import type { StorePosition } from './store-types.ts';

/** What one call asks: a claim (epoch null: the stored one plus one), or a first position under a claim's epoch. */
export type ClaimRequest =
  | { kind: 'claim'; target: string; instance: string; epoch: number | null }
  | { kind: 'start'; target: string; instance: string; epoch: number; start: StorePosition };

export type ClaimAnswer = { epoch: number; position: StorePosition | null } | StorePosition;

interface Pending {
  request: ClaimRequest;
  resolve(answer: ClaimAnswer): void;
  reject(error: unknown): void;
}

/** At most this many calls in one transaction (its arrays). */
const MAX_BATCH = 1000;

const keyOf = (r: { target: string; instance: string }): string => `${r.target}\u0000${r.instance}`;
const byKey = (a: { target: string; instance: string }, b: { target: string; instance: string }): number =>
  a.target < b.target ? -1 : a.target > b.target ? 1 : a.instance < b.instance ? -1 : a.instance > b.instance ? 1 : 0;

export class ClaimQueue {
  private readonly run: <T>(what: string, fn: (client: pg.Client) => Promise<T>) => Promise<T>;
  private queue: Pending[] = [];
  private running = false;

  /** `run` gives a connection of the store writer for one transaction (StoreWriter's exclusive()). */
  constructor(run: <T>(what: string, fn: (client: pg.Client) => Promise<T>) => Promise<T>) {
    this.run = run;
  }

  ask(request: ClaimRequest): Promise<ClaimAnswer> {
    return new Promise<ClaimAnswer>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        // One call per stream in a transaction; a second call of the same stream waits for the next.
        const batch: Pending[] = [];
        const rest: Pending[] = [];
        const seen = new Set<string>();
        for (const p of this.queue) {
          const key = keyOf(p.request);
          if (batch.length < MAX_BATCH && !seen.has(key)) {
            seen.add(key);
            batch.push(p);
          } else rest.push(p);
        }
        this.queue = rest;
        await this.runBatch(batch);
      }
    } finally {
      this.running = false;
    }
  }

  private async runBatch(batch: readonly Pending[]): Promise<void> {
    const what = batch.length === 1 ? `claiming ${batch[0]!.request.target}/${batch[0]!.request.instance}` : `claiming ${batch.length} streams`;
    let answers: Map<string, ClaimAnswer | PglogError>;
    try {
      answers = await this.run(what, async (client) => {
        await client.query('BEGIN');
        try {
          const result = await answerAll(
            client,
            batch.map((p) => p.request),
          );
          await client.query('COMMIT');
          return result;
        } catch (e) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw e;
        }
      });
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    for (const p of batch) {
      const answer = answers.get(keyOf(p.request));
      if (answer instanceof PglogError) p.reject(answer);
      else if (answer === undefined)
        p.reject(new PglogError('STORE_UNAVAILABLE', `${p.request.target}/${p.request.instance}: the store gave no answer to its claim`));
      else p.resolve(answer);
    }
  }
}

/** Every request's answer, by stream: claims first (then positions read after them), then starts. */
async function answerAll(client: pg.ClientBase, requests: readonly ClaimRequest[]): Promise<Map<string, ClaimAnswer | PglogError>> {
  const answers = new Map<string, ClaimAnswer | PglogError>();
  const claims = requests.filter((r) => r.kind === 'claim');
  const starts = requests.filter((r) => r.kind === 'start');
  if (claims.length > 0) {
    const stored = await claimAll(client, claims);
    // Read after the claims: a commit of an older owner that held a claim's lock has finished by now.
    const positions = byStream(await readPositions(client, claims));
    for (const c of claims) {
      const key = keyOf(c);
      const epoch = stored.get(key) ?? c.epoch ?? 0;
      if (c.epoch !== null && epoch !== c.epoch) {
        answers.set(
          key,
          new PglogError(
            'STORE_FENCED',
            `${c.target}/${c.instance}: the store holds assignment epoch ${epoch}, newer than this owner's ${c.epoch}; another collector owns this stream`,
          ),
        );
      } else answers.set(key, { epoch, position: positions.get(key) ?? null });
    }
  }
  if (starts.length > 0) {
    const locked = byStream(await lockClaims(client, [...starts].sort(byKey)));
    const allowed = starts.filter((s) => locked.get(keyOf(s))?.epoch === s.epoch);
    for (const s of starts) {
      const epoch = locked.get(keyOf(s))?.epoch;
      if (epoch === s.epoch) continue;
      answers.set(
        keyOf(s),
        new PglogError(
          'STORE_FENCED',
          `${s.target}/${s.instance}: the store holds ${epoch === undefined ? 'no claim' : `assignment epoch ${epoch}`} for this stream, not this owner's ${s.epoch}; another collector owns it`,
        ),
      );
    }
    await insertStartPositions(client, [...allowed].sort(byKey));
    const positions = byStream(await readPositions(client, allowed));
    for (const s of allowed) answers.set(keyOf(s), positions.get(keyOf(s)) ?? s.start);
  }
  return answers;
}

/** The epoch each claim stores: the stored one plus one (epoch null), or its own unless a higher one is stored. */
async function claimAll(client: pg.ClientBase, claims: ReadonlyArray<Extract<ClaimRequest, { kind: 'claim' }>>): Promise<Map<string, number>> {
  const next = claims.filter((c) => c.epoch === null).sort(byKey);
  const given = claims
    .filter((c) => c.epoch !== null)
    .map((c) => ({ target: c.target, instance: c.instance, epoch: c.epoch! }))
    .sort(byKey);
  const stored = new Map<string, number>();
  for (const r of [...(await claimNextAll(client, next)), ...(await claimEpochAll(client, given))]) stored.set(keyOf(r), r.epoch);
  // Those not stored: a higher epoch is (it fences this owner).
  const fenced = given.filter((c) => !stored.has(keyOf(c)));
  for (const r of await lockClaims(client, fenced)) stored.set(keyOf(r), r.epoch);
  return stored;
}

function byStream<T extends { target: string; instance: string }>(rows: readonly T[]): Map<string, T> {
  return new Map(rows.map((r) => [keyOf(r), r]));
}
