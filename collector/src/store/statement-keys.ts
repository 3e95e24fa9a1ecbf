/**
 * What each statement row of a handover is summed by, noted as the row is encoded (pure: no
 * I/O). A commit needs two things of its statement rows besides their bytes: the rollup's
 * parts (rollup.ts: per minute, target, instance, database and fingerprint) and the query
 * templates (pglog.query_templates). Both used to be made again per handover and per commit:
 * a TemplateSet with an object per fingerprint for every handover, and a rollup that read each
 * row's fields back from its bytes, hashed them and built its part keys anew for every commit.
 * All of it lived until the commit was done, so it outlived V8's scavenges and was promoted
 * (ADR 0024; docs/benchmarks.md, "What a commit's statement keys cost").
 *
 * Here a (target, instance, database, fingerprint) is one StatementKey, kept by the row
 * encoder from one handover to the next (StatementKeys), with its template's texts already
 * cleaned. A handover holds the keys its rows used and, per statement row, three numbers: the
 * key's slot, the row's time and its duration (StatementKeyLog). The commit reads those: no
 * bytes decoded, no string made, no map per handover.
 *
 * Bounded, since every name here is one a database role chose: a key is kept only while the
 * texts of all kept keys stay under MAX_KEPT_CHARS and their number under `maxKeys`; past that
 * every kept key is forgotten at once. A row whose key is not kept (or whose time or duration
 * a Float64Array cannot hold exactly) is noted as slot -1: its rollup is read from its bytes
 * and its template seen as before (TemplateSet.see), so nothing depends on being kept.
 */
import type { Micros } from './iso-time.ts';
import { cleanText, noRepairs, type TextRepairs } from './text-clean.ts';

export interface StatementKey {
  readonly target: string;
  readonly instance: string;
  readonly database: string | null;
  readonly fingerprint: string | null;
  /** The template's texts as TemplateSet keeps them (cleaned), or null: a statement without a fingerprint has none. */
  readonly templateFingerprint: string | null;
  readonly templateNormalized: string;
  /** The handover being noted (StatementKeyRecorder's epoch) and this key's slot in it. */
  logEpoch: number;
  logSlot: number;
  /** The rollup that read this key last (its id, 0: none) and its part there (rollup.ts): a lookup saved per row. */
  rollupOwner: number;
  rollupPart: unknown;
  /** A part of a released rollup, for the next one to reuse (rollup.ts), or null. */
  sparePart: unknown;
}

/** What one handover's statement rows were keyed by. */
export interface StatementKeyLog {
  /** The keys its rows used, each once. */
  readonly keys: readonly StatementKey[];
  /** Per key slot: the earliest and the latest time (µs since 1970) of its rows. */
  readonly times: Float64Array;
  /** Per statement row, in row order: key slot (-1: not kept), time (µs since 1970), duration in ms (NaN: none). */
  readonly rows: Float64Array;
}

/** Fields per row in StatementKeyLog.rows. */
export const KEY_LOG_STRIDE = 3;
/** Memory a log holds per key besides its numbers (a slot in its array), for the batcher's budget. */
export const KEY_LOG_KEY_BYTES = 8;

/** The UTF-16 characters all kept keys may hold together (target, instance, database, fingerprint, template). */
export const MAX_KEPT_CHARS = 4 * 1024 * 1024;
const DEFAULT_MAX_KEYS = 16_384;
/** Where StatementKeys.key's trial cleaning counts its repairs: nowhere that is read. */
const UNCOUNTED: TextRepairs = noRepairs();
/** The key of a NULL database or fingerprint in the maps (never a text a row holds: texts hold no NUL). */
const NULL_NAME = '\u0000';

/**
 * What the maps hold for a key whose template cleaning would repair: never handed out, it
 * only spares the next rows of that key the trial cleaning.
 */
const NOT_KEPT: StatementKey = {
  target: '',
  instance: '',
  database: null,
  fingerprint: null,
  templateFingerprint: null,
  templateNormalized: '',
  logEpoch: 0,
  logSlot: 0,
  rollupOwner: 0,
  rollupPart: null,
  sparePart: null,
};

/** The keys of one target and instance: by database, then fingerprint. */
interface SourceKeys {
  target: string;
  instance: string;
  byDatabase: Map<string, Map<string, StatementKey>>;
}

/** Statement keys kept between handovers; one per row encoder. */
export class StatementKeys {
  private readonly sources = new Map<string, SourceKeys>();
  private readonly maxKeys: number;
  /** Entries in the maps, NOT_KEPT ones included (`refused` of them), and the characters they count. */
  private keys = 0;
  private refused = 0;
  private chars = 0;
  /** The source and database of the last lookup: a stream's rows mostly share both. */
  private lastSource: SourceKeys | null = null;
  private lastDatabase: string | null = NULL_NAME;
  private lastByFingerprint: Map<string, StatementKey> | null = null;

  constructor(maxKeys = DEFAULT_MAX_KEYS) {
    this.maxKeys = maxKeys;
  }

  /** Keys kept. */
  get size(): number {
    return this.keys - this.refused;
  }

  /**
   * The kept key of a row (target, instance, database and fingerprint as the row holds them,
   * cleaned), or null when it is not kept: its template's texts need a repair (TemplateSet.see
   * counts repairs per handover, so such texts are cleaned each time), or it would pass the bounds.
   * `rawFingerprint` and `normalized` are the statement's, before cleaning.
   */
  key(
    target: string,
    instance: string,
    database: string | null,
    fingerprint: string | null,
    rawFingerprint: string,
    normalized: string,
    maxTextBytes: number,
  ): StatementKey | null {
    const byFingerprint = this.byFingerprintOf(target, instance, database);
    const known = byFingerprint.get(fingerprint ?? NULL_NAME);
    if (known !== undefined) return known === NOT_KEPT ? null : known;
    const names = target.length + instance.length + (database?.length ?? 0) + (fingerprint?.length ?? 0);
    if (names > MAX_KEPT_CHARS) return null;
    const templated = rawFingerprint !== '';
    // Cleaned only to see whether cleaning changes anything (a text it repairs is never kept),
    // its repairs counted apart: the row's TemplateSet.see counts them. The answer is kept (as
    // NOT_KEPT, counted by its names), so the next rows of that key do not clean a long text
    // again only to be refused.
    const needsRepair =
      templated && (cleanText(rawFingerprint, maxTextBytes, UNCOUNTED) !== rawFingerprint || cleanText(normalized, maxTextBytes, UNCOUNTED) !== normalized);
    const chars = needsRepair || !templated ? names : names + rawFingerprint.length + normalized.length;
    if (chars > MAX_KEPT_CHARS) return null;
    // Past either bound every kept key is forgotten first, and the lookup made again.
    if (this.keys >= this.maxKeys || this.chars + chars > MAX_KEPT_CHARS) {
      this.forget();
      return this.key(target, instance, database, fingerprint, rawFingerprint, normalized, maxTextBytes);
    }
    this.keys++;
    this.chars += chars;
    if (needsRepair) {
      byFingerprint.set(fingerprint ?? NULL_NAME, NOT_KEPT);
      this.refused++;
      return null;
    }
    const key: StatementKey = {
      target,
      instance,
      database,
      fingerprint,
      templateFingerprint: templated ? rawFingerprint : null,
      templateNormalized: templated ? normalized : '',
      logEpoch: 0,
      logSlot: 0,
      rollupOwner: 0,
      rollupPart: null,
      sparePart: null,
    };
    byFingerprint.set(fingerprint ?? NULL_NAME, key);
    return key;
  }

  private byFingerprintOf(target: string, instance: string, database: string | null): Map<string, StatementKey> {
    let source = this.lastSource;
    if (source === null || source.target !== target || source.instance !== instance) {
      const name = `${target}\u0000${instance}`;
      source = this.sources.get(name) ?? null;
      if (source === null) {
        source = { target, instance, byDatabase: new Map() };
        this.sources.set(name, source);
      }
      this.lastSource = source;
      this.lastByFingerprint = null;
    }
    if (this.lastByFingerprint !== null && this.lastDatabase === database) return this.lastByFingerprint;
    let byFingerprint = source.byDatabase.get(database ?? NULL_NAME);
    if (byFingerprint === undefined) {
      byFingerprint = new Map();
      source.byDatabase.set(database ?? NULL_NAME, byFingerprint);
    }
    this.lastDatabase = database;
    this.lastByFingerprint = byFingerprint;
    return byFingerprint;
  }

  /** Forgets every kept key; handovers that hold some keep them (a key is a plain object). */
  private forget(): void {
    this.sources.clear();
    this.keys = 0;
    this.refused = 0;
    this.chars = 0;
    this.lastSource = null;
    this.lastByFingerprint = null;
  }
}

/**
 * Notes the keys of one handover at a time (the row encoder's), in scratch arrays reused
 * between handovers; finish() copies out what the handover keeps.
 */
export class StatementKeyRecorder {
  private epoch = 0;
  /** The open handover's keys are the first keyCount: reused, so that no array grows per handover. */
  private readonly keys: StatementKey[] = [];
  private keyCount = 0;
  private times = new Float64Array(2 * 64);
  private rows = new Float64Array(KEY_LOG_STRIDE * 1024);
  private rowCount = 0;
  /** The row seen last, noted when it is encoded (encoded()). */
  private pendingSlot = -1;
  private pendingTs = 0;
  private pendingDuration = NaN;

  /** Starts a handover. */
  open(): void {
    this.epoch = ++lastEpoch;
    this.keyCount = 0;
    this.rowCount = 0;
    this.pendingSlot = -1;
  }

  /**
   * The next statement row has `key`, time `ts` and duration `durationMs`; false (the row is
   * noted as not kept) when there is no key or a value a Float64Array would not hold exactly.
   * The key's times count whether or not the row is encoded, as TemplateSet.see did.
   */
  see(key: StatementKey | null, ts: Micros, durationMs: number | null): boolean {
    if (key === null || typeof ts !== 'number' || (durationMs !== null && Number.isNaN(durationMs))) {
      this.pendingSlot = -1;
      this.pendingTs = 0;
      this.pendingDuration = NaN;
      return false;
    }
    let slot: number;
    if (key.logEpoch === this.epoch) {
      slot = key.logSlot;
      const t = this.times;
      if (ts < (t[2 * slot] as number)) t[2 * slot] = ts;
      else if (ts > (t[2 * slot + 1] as number)) t[2 * slot + 1] = ts;
    } else {
      slot = this.keyCount++;
      this.keys[slot] = key;
      key.logEpoch = this.epoch;
      key.logSlot = slot;
      if (2 * slot + 2 > this.times.length) this.times = grown(this.times, 2 * slot + 2);
      this.times[2 * slot] = ts;
      this.times[2 * slot + 1] = ts;
    }
    this.pendingSlot = slot;
    this.pendingTs = ts;
    this.pendingDuration = durationMs ?? NaN;
    return true;
  }

  /** The row see() was told of was encoded: it is the handover's next statement row. */
  encoded(): void {
    const at = KEY_LOG_STRIDE * this.rowCount;
    if (at + KEY_LOG_STRIDE > this.rows.length) this.rows = grown(this.rows, at + KEY_LOG_STRIDE);
    const r = this.rows;
    r[at] = this.pendingSlot;
    r[at + 1] = this.pendingTs;
    r[at + 2] = this.pendingDuration;
    this.rowCount++;
    this.pendingSlot = -1;
  }

  /** The numbers finish() copies out: two per key and KEY_LOG_STRIDE per row (0: nothing noted). */
  get doubles(): number {
    return 2 * this.keyCount + KEY_LOG_STRIDE * this.rowCount;
  }

  /**
   * The handover's log, its numbers copied into `times` and `rows` (2 per key and
   * KEY_LOG_STRIDE per row: memory the caller owns, a slab's, so that no ArrayBuffer is made per
   * handover), or null when it noted nothing; the recorder is ready for open().
   */
  finish(times: Float64Array, rows: Float64Array): StatementKeyLog | null {
    const keys = this.keyCount;
    if (keys === 0 && this.rowCount === 0) return null;
    const n = KEY_LOG_STRIDE * this.rowCount;
    if (times.length !== 2 * keys || rows.length !== n)
      throw new RangeError(`a key log of ${keys} keys and ${this.rowCount} rows was given ${times.length} and ${rows.length} numbers`);
    // Copied by loops: subarray() views to copy with would be objects made per handover.
    for (let i = 0; i < 2 * keys; i++) times[i] = this.times[i] as number;
    for (let i = 0; i < n; i++) rows[i] = this.rows[i] as number;
    const log = { keys: this.keys.slice(0, keys), times, rows };
    this.keyCount = 0;
    this.rowCount = 0;
    return log;
  }

  /** finish() into arrays of their own. */
  finishApart(): StatementKeyLog | null {
    return this.finish(new Float64Array(2 * this.keyCount), new Float64Array(KEY_LOG_STRIDE * this.rowCount));
  }
}

/** Epochs are unique in the process, so a key is never taken for one of another recorder's handovers. */
let lastEpoch = 0;

function grown(a: Float64Array, atLeast: number): Float64Array<ArrayBuffer> {
  let size = a.length * 2;
  while (size < atLeast) size *= 2;
  const next = new Float64Array(size);
  next.set(a);
  return next;
}
