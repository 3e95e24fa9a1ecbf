/**
 * The statement rollup of a batch (docs/store.md "Statement rollup", migration 0006): the
 * statement rows a COPY stored, summed per minute and key (target, instance, database,
 * fingerprint) with a fixed log-scale histogram of their durations, as rows for
 * pglog.statement_rollup_parts. Pure: the writer feeds it the rows of each COPY that the
 * server accepted, and COPYs its rows in the same transaction.
 *
 * Histogram bins: 0 holds durations up to BIN_BASE_MS, bin i >= 1 holds
 * (BIN_BASE_MS * 2^((i-1)/4), BIN_BASE_MS * 2^(i/4)], MAX_BIN everything above. A bin stands
 * for its geometric middle, so a percentile read from it is within 2^(1/8) - 1 (9.1 %) of the
 * true one. pglog.duration_bin() in SQL computes the same bins the same way (ln / ln 2).
 */
import { table } from './event-tables.ts';
import type { Micros } from './iso-time.ts';
import { KEY_LOG_STRIDE, type StatementKey, type StatementKeyLog } from './statement-keys.ts';

export const BIN_BASE_MS = 0.001;
export const BINS_PER_DOUBLING = 4;
export const MAX_BIN = 160;
/** The largest relative error of a percentile read from the histogram: 2^(1/8) - 1. */
export const MAX_PERCENTILE_ERROR = 2 ** (1 / (2 * BINS_PER_DOUBLING)) - 1;
const MINUTE_MICROS = 60_000_000;

export const ROLLUP_TABLE = table('statement_rollup_parts', [
  ['bucket', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['database', 'text'],
  ['fingerprint', 'text'],
  ['calls', 'int8'],
  ['timed', 'int8'],
  ['total_ms', 'float8'],
  ['max_ms', 'float8'],
  ['bins', 'int4[]'],
  ['counts', 'int4[]'],
]);

// Positions in a statement_events row (event-tables.ts STATEMENT_TABLE).
const TS = 0,
  TARGET = 1,
  INSTANCE = 2,
  DATABASE = 3,
  DURATION = 7,
  FINGERPRINT = 8;

/** The histogram bin of a duration in milliseconds. */
export function durationBin(ms: number): number {
  if (ms <= BIN_BASE_MS) return 0;
  if (!Number.isFinite(ms)) return MAX_BIN;
  return Math.min(MAX_BIN, Math.ceil((BINS_PER_DOUBLING * Math.log(ms / BIN_BASE_MS)) / Math.LN2));
}

/** The duration a bin stands for: its geometric middle (bin 0: BIN_BASE_MS). */
export function durationOfBin(bin: number): number {
  return bin <= 0 ? BIN_BASE_MS : BIN_BASE_MS * 2 ** ((bin - 0.5) / BINS_PER_DOUBLING);
}

/**
 * The q-quantile (0 < q <= 1) of a histogram: the value of the first bin (ascending) whose
 * cumulative count reaches ceil(q * total), the nearest-rank rule; null when empty.
 */
export function histogramPercentile(bins: readonly number[], counts: readonly number[], q: number): number | null {
  const order = bins.map((b, i) => [b, counts[i] ?? 0] as const).sort((a, b) => a[0] - b[0]);
  const total = order.reduce((s, [, c]) => s + c, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const [b, c] of order) {
    seen += c;
    if (seen >= rank) return durationOfBin(b);
  }
  return durationOfBin((order[order.length - 1] as readonly [number, number])[0]);
}

interface Part {
  bucket: Micros;
  target: string;
  instance: string;
  database: string | null;
  fingerprint: string | null;
  calls: number;
  timed: number;
  totalMs: number;
  maxMs: number | null;
  /**
   * The histogram: the bins that have calls, ascending, and their counts. Two short arrays
   * rather than a Map: a part's durations fall in a few bins, so a scan finds one at once,
   * and a Map per part per commit was a sixth of what outlived the collector's scavenges
   * (issue 15, docs/benchmarks.md).
   */
  bins: number[];
  counts: number[];
  /** Bins in use: the arrays are longer when the part was a spare (StatementKey.sparePart) with more before. */
  binCount: number;
  /** For addEncoded's index: what the rows found through it name (null: not known yet). */
  identity: PartIdentity | null;
  /** addRecorded's parts of the same key in other minutes. */
  next: Part | null;
}

/**
 * What a part's key names besides its minute, read from encoded rows: the texts, and the
 * bytes of the database and fingerprint fields as latin1 (one character a byte; null for
 * NULL), to check a row against without decoding it. Kept across commits (RollupIdentities).
 */
interface PartIdentity {
  /** `target NUL instance`. */
  source: string;
  target: string;
  instance: string;
  database: string | null;
  fingerprint: string | null;
  databaseBytes: string | null;
  fingerprintBytes: string | null;
  /** The part key without its minute (StatementRollup.addRow's form). */
  key: string;
}

/**
 * The part identities addEncoded has read, kept from one commit's rollup to the next: each
 * commit's rollup is new, and it decoded the names of every part and built their keys again,
 * per commit whatever the rate, held until the commit's COPYs were done and so promoted to
 * V8's old generation (issue 15, docs/benchmarks.md). Found by a hash of the row's bytes and
 * checked field by field. Bounded twice, since a role can log any name it likes: only keys of
 * at most MAX_KEPT_KEY_CHARS are kept (a longer one is decoded for each commit, as before),
 * and at most `max` entries, forgotten all at once past that (a log with endless fingerprints
 * only decodes again): a few MB at worst.
 */
export class RollupIdentities {
  readonly byHash = new Map<number, PartIdentity>();
  readonly sources = new Map<number, SourceIdentity>();
  private readonly max: number;

  constructor(max = DEFAULT_MAX_IDENTITIES) {
    this.max = max;
  }

  /** Entries held (identities and sources). */
  get size(): number {
    return this.byHash.size + this.sources.size;
  }

  /** Keeps `value` under `key` in `map` (one of the two above) when its key text is short enough. */
  remember<V extends { source: string; key?: string }>(map: Map<number, V>, key: number, value: V): void {
    if ((value.key ?? value.source).length > MAX_KEPT_KEY_CHARS) return;
    if (this.size >= this.max) {
      this.byHash.clear();
      this.sources.clear();
    }
    map.set(key, value);
  }
}
const DEFAULT_MAX_IDENTITIES = 4096;
/** The longest part key (target, instance, database and fingerprint, as their bytes) kept between commits. */
export const MAX_KEPT_KEY_CHARS = 256;

interface SourceIdentity {
  source: string;
  target: string;
  instance: string;
  targetBytes: string | null;
  instanceBytes: string | null;
}

/** Whether the row readSpans read (of `source`) names `id`. */
function isIdentityOf(id: PartIdentity | null | undefined, data: Buffer, source: string): id is PartIdentity {
  return (
    id !== null && id !== undefined && id.source === source && fieldIs(data, DATABASE, id.databaseBytes) && fieldIs(data, FINGERPRINT, id.fingerprintBytes)
  );
}

/** One more call of a part, with its duration when it has one. */
function count(p: Part, ms: number | null | undefined): void {
  p.calls++;
  if (ms === null || ms === undefined) return;
  p.timed++;
  p.totalMs += ms;
  if (p.maxMs === null || ms > p.maxMs) p.maxMs = ms;
  addToBin(p, durationBin(ms), 1);
}

/** Adds `n` calls to bin `bin` of a part's histogram, keeping its bins ascending. */
function addToBin(p: Part, bin: number, n: number): void {
  const bins = p.bins;
  const counts = p.counts;
  const used = p.binCount;
  let i = used - 1;
  while (i >= 0 && (bins[i] as number) > bin) i--;
  if (i >= 0 && bins[i] === bin) {
    counts[i] = (counts[i] as number) + n;
    return;
  }
  // Inserted after i by moving the larger bins up one (splice would make an array of what it removed, each time).
  if (used === bins.length) {
    bins.push(bin);
    counts.push(n);
  }
  p.binCount = used + 1;
  for (let k = used; k > i + 1; k--) {
    bins[k] = bins[k - 1] as number;
    counts[k] = counts[k - 1] as number;
  }
  bins[i + 1] = bin;
  counts[i + 1] = n;
}

// Where the fields of the row being read start and end (start -1: NULL), as readSpans leaves
// them: reused for every row, so reading a row allocates nothing.
const SPANS = new Int32Array(2 * (FINGERPRINT + 1));
const PG_EPOCH_UNIX_US = 946_684_800_000_000;

/** Records the spans of the first FINGERPRINT + 1 fields of the row at `at` (its field count first). */
function readSpans(data: Buffer, at: number): void {
  let p = at + 2;
  for (let f = 0; f <= FINGERPRINT; f++) {
    const len = data.readInt32BE(p);
    p += 4;
    SPANS[2 * f] = len < 0 ? -1 : p;
    SPANS[2 * f + 1] = len < 0 ? -1 : p + len;
    if (len > 0) p += len;
  }
}

/** The text of field `f` of the row readSpans read, or null. */
function text(data: Buffer, f: number): string | null {
  const start = SPANS[2 * f] as number;
  return start < 0 ? null : data.toString('utf8', start, SPANS[2 * f + 1]);
}

/** A NULL database or fingerprint in a part key. */
const NULL_KEY = '\u0001';

/** A database or fingerprint in a part key: its UTF-8 bytes (as the encoder writes them) one character a byte, NULL_KEY for NULL. */
function valueKeyText(v: string | null): string {
  return v === null ? NULL_KEY : Buffer.from(v, 'utf8').toString('latin1');
}

/** A part's key in StatementRollup.parts, as addEncoded makes it from the same row's bytes. */
function partKey(bucket: Micros, target: string, instance: string, database: string | null, fingerprint: string | null): string {
  return `${String(bucket)}\u0000${target}\u0000${instance}\u0000${valueKeyText(database)}\u0000${valueKeyText(fingerprint)}`;
}

/** The bytes of field `f` as latin1 (one character a byte), null for NULL. */
function bytesText(data: Buffer, f: number): string | null {
  const start = SPANS[2 * f] as number;
  return start < 0 ? null : data.toString('latin1', start, SPANS[2 * f + 1]);
}

/** Whether field `f` of the row readSpans read is `bytes` (bytesText's form). */
function fieldIs(data: Buffer, f: number, bytes: string | null): boolean {
  const start = SPANS[2 * f] as number;
  if (start < 0 || bytes === null) return start < 0 && bytes === null;
  const end = SPANS[2 * f + 1] as number;
  if (end - start !== bytes.length) return false;
  for (let i = start; i < end; i++) if (data[i] !== bytes.charCodeAt(i - start)) return false;
  return true;
}

const FNV_PRIME = 0x01000193;

/** FNV-1a over field `f`'s bytes (NULL hashes apart from every text), continuing from `h`. */
function hashField(h: number, data: Buffer, f: number): number {
  const start = SPANS[2 * f] as number;
  if (start < 0) return Math.imul(h ^ 0x100, FNV_PRIME);
  const end = SPANS[2 * f + 1] as number;
  for (let i = start; i < end; i++) h = Math.imul(h ^ data[i]!, FNV_PRIME);
  return Math.imul(h ^ 0x101, FNV_PRIME);
}

/** A timestamptz field (microseconds from 2000) as microseconds from 1970: a number while safe, else a bigint. */
function timestampAt(data: Buffer, at: number): Micros {
  // Exact while the field itself is a safe integer; the sum is checked again.
  const fromPgEpoch = data.readInt32BE(at) * 4_294_967_296 + data.readUInt32BE(at + 4);
  const us = fromPgEpoch + PG_EPOCH_UNIX_US;
  return Number.isSafeInteger(fromPgEpoch) && Number.isSafeInteger(us) ? us : data.readBigInt64BE(at) + BigInt(PG_EPOCH_UNIX_US);
}

function minuteOf(ts: Micros): Micros {
  if (typeof ts === 'bigint') {
    const m = 60_000_000n;
    const r = ((ts % m) + m) % m;
    return ts - r;
  }
  return Math.floor(ts / MINUTE_MICROS) * MINUTE_MICROS;
}

function newPart(bucket: Micros, target: string, instance: string, database: string | null, fingerprint: string | null): Part {
  return {
    bucket,
    target,
    instance,
    database,
    fingerprint,
    calls: 0,
    timed: 0,
    totalMs: 0,
    maxMs: null,
    bins: [],
    counts: [],
    binCount: 0,
    identity: null,
    next: null,
  };
}

/** The part a key kept from a released rollup (StatementKey.sparePart), emptied for `bucket`, or null. */
function reusedPart(key: StatementKey, bucket: number): Part | null {
  const p = key.sparePart as Part | null;
  if (p === null) return null;
  key.sparePart = null;
  p.bucket = bucket;
  p.calls = 0;
  p.timed = 0;
  p.totalMs = 0;
  p.maxMs = null;
  p.binCount = 0;
  p.identity = null;
  p.next = null;
  return p;
}

/** The last StatementRollup.id handed out (0: no rollup). */
let lastRollupId = 0;

/** Sums statement rows per minute and key. */
export class StatementRollup {
  private readonly parts = new Map<string, Part>();
  /**
   * addEncoded's way to a part without making its key string: a hash of the row's bucket,
   * source, database and fingerprint bytes, to the part last found for it. A hit is checked
   * field by field; a miss or a collision goes through `parts`, which stays the only truth.
   */
  private readonly index = new Map<number, Part>();
  /** addRecorded's parts, by statement key (statement-keys.ts): a key's first part, the others of its minutes chained from it. */
  private readonly byKey = new Map<StatementKey, Part>();
  private keyedParts = 0;
  /** What this rollup marks the keys it read with (StatementKey.rollupOwner): a number, so that a key keeps no rollup alive. */
  private readonly id = ++lastRollupId;
  private readonly identities: RollupIdentities;

  /** `identities`: shared by the rollups of one store writer, so that each commit's need not decode its parts' names again. */
  constructor(identities: RollupIdentities = new RollupIdentities()) {
    this.identities = identities;
  }

  /** Adds the rows (statement_events values, in STATEMENT_TABLE order) a COPY stored. */
  add(rows: ReadonlyArray<readonly unknown[]>): void {
    for (const v of rows) this.addRow(v);
  }

  /** Adds one row (statement_events values, in STATEMENT_TABLE order). */
  addRow(v: readonly unknown[]): void {
    const bucket = minuteOf(v[TS] as Micros);
    const target = v[TARGET] as string,
      instance = v[INSTANCE] as string;
    const database = v[DATABASE] as string | null,
      fingerprint = v[FINGERPRINT] as string | null;
    // Keyed as addEncoded keys the same row's bytes, so that parts of either path merge.
    const key = partKey(bucket, target, instance, database, fingerprint);
    let p = this.parts.get(key);
    if (p === undefined) {
      p = newPart(bucket, target, instance, database, fingerprint);
      this.parts.set(key, p);
    }
    count(p, v[DURATION] as number | null);
  }

  /**
   * Adds statement rows `from` to `to` (exclusive) of one handover's encoded rows
   * (encoded-rows.ts: COPY BINARY, STATEMENT_TABLE's columns), reading only the columns the
   * rollup keys on and decoding names only for an identity not seen yet (RollupIdentities):
   * the rows are not mapped back to values. The rows of one handover share their target and instance.
   */
  addEncoded(data: Buffer, ends: Uint32Array, from: number, to: number): void {
    let source: SourceIdentity | null = null;
    let sourceHash = 0;
    for (let i = from; i < to; i++) {
      readSpans(data, i === 0 ? 0 : (ends[i - 1] as number));
      if (source === null) {
        sourceHash = hashField(hashField(0x811c9dc5, data, TARGET), data, INSTANCE);
        source = this.sourceOf(data, sourceHash);
      }
      const bucket = minuteOf(timestampAt(data, SPANS[2 * TS] as number));
      // Minutes since 1970 fit 32 bits for every year a number bucket covers; a bigint one takes the key.
      const indexed = typeof bucket === 'number';
      const hash = indexed ? hashField(hashField(Math.imul(sourceHash ^ (bucket / MINUTE_MICROS), FNV_PRIME), data, DATABASE), data, FINGERPRINT) : 0;
      let p = indexed ? this.index.get(hash) : undefined;
      if (p === undefined || p.bucket !== bucket || !isIdentityOf(p.identity, data, source.source)) {
        p = this.partOf(data, bucket, source, sourceHash);
        if (indexed) this.index.set(hash, p);
      }
      const durationAt = SPANS[2 * DURATION] as number;
      count(p, durationAt < 0 ? null : data.readDoubleBE(durationAt));
    }
  }

  /**
   * Adds statement rows `from` to `to` (exclusive) of one handover's encoded rows: by the keys
   * noted when they were encoded where there are some (addRecorded), else from their bytes.
   */
  addTable(rows: { data: Buffer; ends: Uint32Array; keys?: StatementKeyLog | null }, from: number, to: number): void {
    if (rows.keys === null || rows.keys === undefined) this.addEncoded(rows.data, rows.ends, from, to);
    else this.addRecorded(rows.keys, rows.data, rows.ends, from, to);
  }

  /**
   * addEncoded's sums from what the row encoder noted of each row (statement-keys.ts): its
   * key, time and duration, with nothing read from the bytes but the rows noted as not kept.
   * The parts are found through the keys: the key remembers its part in the rollup that read
   * it last, so a run of rows of one key in one minute costs no lookup at all.
   */
  addRecorded(log: StatementKeyLog, data: Buffer, ends: Uint32Array, from: number, to: number): void {
    const rows = log.rows;
    for (let i = from; i < to; i++) {
      const at = KEY_LOG_STRIDE * i;
      const slot = rows[at] as number;
      if (slot < 0) {
        this.addEncoded(data, ends, i, i + 1);
        continue;
      }
      const key = log.keys[slot] as StatementKey;
      const bucket = Math.floor((rows[at + 1] as number) / MINUTE_MICROS) * MINUTE_MICROS;
      let p = key.rollupOwner === this.id ? (key.rollupPart as Part) : null;
      if (p === null || p.bucket !== bucket) p = this.partOfKey(key, bucket);
      const ms = rows[at + 2] as number;
      count(p, Number.isNaN(ms) ? null : ms);
    }
  }

  private partOfKey(key: StatementKey, bucket: number): Part {
    const first = this.byKey.get(key) ?? null;
    let p = first;
    while (p !== null && p.bucket !== bucket) p = p.next;
    if (p === null) {
      p = reusedPart(key, bucket) ?? newPart(bucket, key.target, key.instance, key.database, key.fingerprint);
      p.next = first;
      this.byKey.set(key, p);
      this.keyedParts++;
    }
    key.rollupOwner = this.id;
    key.rollupPart = p;
    return p;
  }

  /**
   * Lets go of every part, and lets the keys this rollup read forget theirs: a key is kept
   * between commits, and a part it pointed at would stay alive, with its arrays, until another
   * rollup read that key (for a key seen rarely, for good). Call once the rollup's rows are
   * encoded, or the attempt is abandoned; the rollup is then empty. Idempotent.
   */
  release(): void {
    for (const [key, first] of this.byKey) {
      // The key keeps one part for the next rollup that reads it: parts made per commit and
      // held through its COPYs were most of what V8 promoted (ADR 0024).
      key.sparePart = first;
      if (key.rollupOwner !== this.id) continue;
      key.rollupOwner = 0;
      key.rollupPart = null;
    }
    this.byKey.clear();
    this.keyedParts = 0;
    this.parts.clear();
    this.index.clear();
  }

  /** Every part: addRow's and addEncoded's, then addRecorded's. */
  private *allParts(): Generator<Part> {
    yield* this.parts.values();
    for (const first of this.byKey.values()) for (let p: Part | null = first; p !== null; p = p.next) yield p;
  }

  /** The target and instance of the row readSpans read, as known from an earlier row or decoded now. */
  private sourceOf(data: Buffer, hash: number): SourceIdentity {
    const known = this.identities.sources.get(hash);
    if (known !== undefined && fieldIs(data, TARGET, known.targetBytes) && fieldIs(data, INSTANCE, known.instanceBytes)) return known;
    const target = text(data, TARGET) ?? '';
    const instance = text(data, INSTANCE) ?? '';
    const source = { source: `${target}\u0000${instance}`, target, instance, targetBytes: bytesText(data, TARGET), instanceBytes: bytesText(data, INSTANCE) };
    this.identities.remember(this.identities.sources, hash, source);
    return source;
  }

  /** The part of the row readSpans read, found or made by its key. */
  private partOf(data: Buffer, bucket: Micros, source: SourceIdentity, sourceHash: number): Part {
    const hash = hashField(hashField(sourceHash, data, DATABASE), data, FINGERPRINT);
    let id = this.identities.byHash.get(hash);
    if (!isIdentityOf(id, data, source.source)) {
      const databaseBytes = bytesText(data, DATABASE);
      const fingerprintBytes = bytesText(data, FINGERPRINT);
      id = {
        source: source.source,
        target: source.target,
        instance: source.instance,
        database: text(data, DATABASE),
        fingerprint: text(data, FINGERPRINT),
        databaseBytes,
        fingerprintBytes,
        key: `${source.source}\u0000${databaseBytes ?? NULL_KEY}\u0000${fingerprintBytes ?? NULL_KEY}`,
      };
      this.identities.remember(this.identities.byHash, hash, id);
    }
    const key = `${String(bucket)}\u0000${id.key}`;
    let p = this.parts.get(key);
    if (p === undefined) {
      p = newPart(bucket, id.target, id.instance, id.database, id.fingerprint);
      this.parts.set(key, p);
    }
    // Equal keys are equal bytes: the row's bytes are the part's.
    p.identity = id;
    return p;
  }

  /** Adds another rollup's parts (the rows of a COPY attempt that the server accepted). */
  merge(other: StatementRollup): void {
    for (const o of other.allParts()) {
      const key = partKey(o.bucket, o.target, o.instance, o.database, o.fingerprint);
      const p = this.parts.get(key);
      if (p === undefined) {
        this.parts.set(key, { ...o, bins: o.bins.slice(0, o.binCount), counts: o.counts.slice(0, o.binCount), identity: null, next: null });
        continue;
      }
      p.calls += o.calls;
      p.timed += o.timed;
      p.totalMs += o.totalMs;
      if (o.maxMs !== null && (p.maxMs === null || o.maxMs > p.maxMs)) p.maxMs = o.maxMs;
      for (let i = 0; i < o.binCount; i++) addToBin(p, o.bins[i] as number, o.counts[i] as number);
    }
  }

  get size(): number {
    return this.parts.size + this.keyedParts;
  }

  /**
   * The rows for pglog.statement_rollup_parts, in ROLLUP_TABLE order, bins ascending. The
   * bins and counts are copies: a released rollup's parts are reused.
   */
  rows(): unknown[][] {
    const out: unknown[][] = [];
    for (const p of this.allParts()) {
      out.push([
        p.bucket,
        p.target,
        p.instance,
        p.database,
        p.fingerprint,
        p.calls,
        p.timed,
        p.totalMs,
        p.maxMs,
        p.bins.slice(0, p.binCount),
        p.counts.slice(0, p.binCount),
      ]);
    }
    return out;
  }
}
