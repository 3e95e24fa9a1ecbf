/**
 * Node.js settings of one collector process, computed from what its shard will do (docs/operator.md,
 * "What it does for each pool", step 5). The values go into the CollectorShard spec; the collector's launcher
 * applies them at process start, and a change restarts that pod's collector after a clean
 * flush. So the values move in coarse steps: a target promoted or a rate drifting must not
 * restart a pod each time. Pure.
 *
 * What uses the libuv threadpool in a collector (reasoned from the code, see
 * collector/src/transport/fifo-reader.ts):
 * - dns.lookup (getaddrinfo, blocking, one thread each for up to the resolver's timeout): every
 *   ssh2 connect of an `inproc` target (ssh2 resolves the host with dns.lookup) and every store
 *   connection. Reconnect storms (start-up, a network blip) make these concurrent.
 * - fs.promises: the sidecar files (desired.json, status.json, the key files of `proxy`
 *   targets), written in a burst when many targets are assigned or moved at once.
 * - Not: FIFO reads (non-blocking pipe handles on the event loop), ssh2's crypto and zlib
 *   (synchronous on the main thread), SQL sessions (forwarded over the SSH connection: no
 *   lookup), `proxy` targets' SSH (OpenSSH in the sidecar resolves the names).
 */
import type { NodeTuning } from '@pglog/common/api/collector-pool.ts';
import type { ShardTuning } from '@pglog/common/api/collector-shard.ts';
import { PglogError } from '@pglog/common/errors.ts';

const MiB = 2 ** 20;
/** Relative band around the ingest rate within which a shard keeps its semi-space size. */
const SEMI_SPACE_HYSTERESIS = 0.2;

export interface TuningInput {
  /** `pool.spec.nodeTuning`: `auto`, or `explicit` with given values. */
  nodeTuning: NodeTuning;
  /** The collector container's memory limit in bytes; null when it has none. */
  memoryLimitBytes: number | null;
  /** Targets the shard runs through the in-process SSH client. */
  inprocTargets: number;
  /** Targets the shard runs through the sidecar. */
  proxyTargets: number;
  /** Log streams (PostgreSQL instances) of the shard's targets. */
  instances: number;
  /** SQL sessions (instances of targets that collect activity, locks or statements). */
  sqlSessions: number;
  /** Summed smoothed read rate of the shard's targets (bytes per second; unmeasured count 0). */
  ingestBytesPerSecond: number;
  /** The semi-space the shard runs with now (its spec), kept while the rate stays near a step. */
  previousSemiSpaceMiB?: number;
  /** The threadpool and old space the shard runs with now, kept while what it needs stays near them. */
  previousThreadpoolSize?: number;
  previousOldSpaceMiB?: number;
}

/** libuv's own default: never fewer. */
const MIN_THREADPOOL = 4;
/** Threads for what every shard does whatever its targets: the store's connection lookups and the sidecar files. */
const BASE_THREADS = 2;
/**
 * Above this, threads cost more (stacks, context switches on a pod's few CPUs) than they
 * save: even a 1000-target reconnect storm at 100 ms per lookup clears in under 2 s.
 */
const MAX_THREADPOOL = 64;
/**
 * One thread per this many `inproc` targets for their concurrent lookups: reconnects are
 * spread by backoff jitter over seconds, so 40 threads resolve 1000 names at 100 ms each in
 * 2.5 s, within the first reconnect delay.
 */
const INPROC_TARGETS_PER_THREAD = 25;
/** Key-file writes of `proxy` targets happen in one burst per assignment change and are short. */
const PROXY_TARGETS_PER_THREAD = 64;

/** Share of the memory limit the V8 heap may take; the rest is external memory (see below). */
const HEAP_SHARE = 0.75;
/**
 * Off-heap memory that does not scale with the limit: code, stacks, the native parts of ssh2
 * and pg, the tmpfs pages of the shared directory. The 25 % left by HEAP_SHARE holds the
 * Buffers: batches waiting for the store as encoded rows (`--memory-budget`, 20 MiB by default, ADR 0019), socket read
 * buffers and channel windows.
 */
const NON_HEAP_RESERVE_MIB = 64;
/** The old space a shard gets when its streams need less: kept from when the store budget's events lived in the heap (48 MiB counted, about 100 MB of heap), as headroom; they are Buffers now (ADR 0019). */
const WORKING_OLD_SPACE_MIB = 256;
/** Below this the collector cannot hold a shard's parser state and a batch; a lower limit is a misconfiguration. */
const MIN_OLD_SPACE_MIB = 128;
/** Without a limit: a heap bounded anyway, so a pod without limits cannot take a node's memory. */
const DEFAULT_OLD_SPACE_MIB = 1024;
/** Without a limit, what a shard's state needs per stream and per SQL session (parser state, lines in flight, snapshot rows). */
const HEAP_PER_STREAM_MIB = 2;
const HEAP_PER_SQL_SESSION_MIB = 4;

/**
 * Semi-space by ingest rate, sized for memory (issue 15: 300 MB at 20 MB/s, 150 MB at 5).
 * A shard reading at most 8 MB/s gets 4 MiB: at 5 MB/s from 50 servers that was 147 MB of
 * peak RSS against 156 with 8 MiB (8 MB less young generation) at the same CPU per MB; at
 * 20 MB/s offered 4 MiB read less (15.1 against 18.2 MB/s, 44 against 38 ms per MB), so the
 * faster shards keep 8 (docs/benchmarks.md, ingest: launcher flags side by side).
 * Node 24's own default is far larger than its documentation suggests: a collector at 20 MB/s
 * committed 128 MB of young generation under the defaults (a 64 MiB semi-space; the "new"
 * space of `pglog_nodejs_heap_space_size_total_bytes`), all of it resident once allocation
 * has gone through it. A scavenge costs the live objects, not the garbage, and a log byte's
 * objects (lines, entries, events) either die within the slice that parsed them or live until
 * their batch commits, a second or more, whatever the semi-space: so a small young generation
 * costs a few more scavenges, not more promotion. docs/benchmarks.md measures it against the
 * defaults in the same run.
 */
const SEMI_SPACE_STEPS: ReadonlyArray<{ aboveBytesPerSecond: number; mib: number }> = [
  { aboveBytesPerSecond: 20e6, mib: 16 },
  { aboveBytesPerSecond: 8e6, mib: 8 },
];
const DEFAULT_SEMI_SPACE_MIB = 4;
/** V8's young generation is 3 semi-spaces; keep it within 1/8 of the limit: semi-space <= limit / 24. */
const SEMI_SPACES_PER_LIMIT = 24;

function count(value: number, name: string): number {
  if (!Number.isFinite(value) || value < 0) throw new PglogError('CONFIG_INVALID', `tuning: ${name} must be a non-negative number, got ${value}`);
  return value;
}

function nextPowerOfTwo(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, n)));
}

function floorPowerOfTwo(n: number): number {
  return n < 1 ? 1 : 2 ** Math.floor(Math.log2(n));
}

/**
 * Threadpool size, in powers of two. With the size the shard runs with now, that size stays
 * while the one wanted is within a factor of two of it: a target moved in or out at a power of
 * two's edge must not restart the pod (issue 46: at 250 servers over 4 pods, targets moving and
 * switching transports restarted collectors again and again).
 */
export function autoThreadpoolSize(inprocTargets: number, proxyTargets: number, previous?: number): number {
  const wanted = BASE_THREADS + Math.ceil(inprocTargets / INPROC_TARGETS_PER_THREAD) + Math.ceil(proxyTargets / PROXY_TARGETS_PER_THREAD);
  const chosen = Math.min(MAX_THREADPOOL, Math.max(MIN_THREADPOOL, nextPowerOfTwo(wanted)));
  if (previous !== undefined && previous >= MIN_THREADPOOL && previous <= MAX_THREADPOOL && chosen >= previous / 2 && chosen <= previous * 2) return previous;
  return chosen;
}

/** How far (MiB) the old space needed may move from the one a shard runs with before it changes: two of its 64 MiB steps. */
const OLD_SPACE_HYSTERESIS_MIB = 128;

/** Semi-space size from the ingest rate, capped by the memory limit. */
export function autoSemiSpaceMiB(ingestBytesPerSecond: number, memoryLimitBytes: number | null, previousMiB?: number): number {
  const at = (rate: number): number => {
    const byRate = SEMI_SPACE_STEPS.find((s) => rate > s.aboveBytesPerSecond)?.mib ?? DEFAULT_SEMI_SPACE_MIB;
    return memoryLimitBytes === null ? byRate : Math.min(byRate, floorPowerOfTwo(memoryLimitBytes / MiB / SEMI_SPACES_PER_LIMIT));
  };
  const chosen = at(ingestBytesPerSecond);
  // A change restarts the pod's collector: a rate wobbling around a step must not do that
  // every few minutes. The current size stays while the rate is within the band around it.
  if (previousMiB !== undefined && previousMiB !== chosen) {
    const low = at(ingestBytesPerSecond * (1 - SEMI_SPACE_HYSTERESIS));
    const high = at(ingestBytesPerSecond * (1 + SEMI_SPACE_HYSTERESIS));
    if (previousMiB >= Math.min(low, high) && previousMiB <= Math.max(low, high)) return previousMiB;
  }
  return chosen;
}

/**
 * Old-space size: what the shard's state needs, at least WORKING_OLD_SPACE_MIB, within the
 * heap's share of the limit (less the fixed reserve and the young generation). Not the whole
 * share: V8 lets the old generation grow towards its limit before it compacts, so a limit far
 * above the live set is resident memory holding garbage (Buffers promoted while their stream
 * or batch waited, freed only by a mark-compact). The live set is bounded by the store budget
 * (`--memory-budget`), which pauses reading long before this limit (issue 15: a collector at
 * 20 MB/s from 50 servers used at most 83 MB of heap under a 256 MiB old space, 298 MB RSS
 * against 493 MB with Node's defaults, docs/benchmarks.md). How far below its limit the old
 * generation grows between mark-compacts is `--heap-growing-percent` (autoHeapGrowingPercent:
 * 1.5 or 2 times the live set, ADR 0018): this limit is the ceiling.
 */
export function autoOldSpaceMiB(memoryLimitBytes: number | null, semiSpaceMiB: number, instances: number, sqlSessions: number, previous?: number): number {
  const need = Math.ceil((2 * NON_HEAP_RESERVE_MIB + HEAP_PER_STREAM_MIB * instances + HEAP_PER_SQL_SESSION_MIB * sqlSessions) / 64) * 64;
  const ceiling = memoryLimitBytes === null ? Infinity : Math.floor((memoryLimitBytes / MiB) * HEAP_SHARE) - NON_HEAP_RESERVE_MIB - 3 * semiSpaceMiB;
  const chosen =
    memoryLimitBytes === null ? Math.max(DEFAULT_OLD_SPACE_MIB, need) : Math.max(MIN_OLD_SPACE_MIB, Math.min(ceiling, Math.max(WORKING_OLD_SPACE_MIB, need)));
  // As the threadpool: the size a shard runs with stays while it is near what it needs (and
  // within the limit's share), so a few targets moving do not restart the pod.
  if (
    previous !== undefined &&
    previous >= MIN_OLD_SPACE_MIB &&
    previous <= Math.max(ceiling, MIN_OLD_SPACE_MIB) &&
    Math.abs(chosen - previous) <= OLD_SPACE_HYSTERESIS_MIB
  )
    return previous;
  return chosen;
}

/**
 * The launcher's growing factor (cli/bin/pglog, ADR 0018): the old generation grows to 1.5
 * times what survived the last mark-compact. It holds the least garbage, which a shard reading
 * at most 8 MB/s needs for issue 15's 150 MB at 5 MB/s.
 */
const SMALL_HEAP_GROWING_PERCENT = 50;
/**
 * For a shard given a larger semi-space for its rate (above 8 MB/s, and a limit that allows
 * it): twice the live set between mark-compacts. At 20 MB/s from 50 servers V8 then marks
 * about half as often (0.50 against 0.86 a second) for about 12 % less collector CPU per MB,
 * at about 30 MB more peak RSS (225 against 195, under the 300 MB target); at 5 MB/s it
 * would cost 7 MB against the 150 MB target and save nothing, since V8 rarely marks there
 * (ADR 0018's amendment of 2026-12-04, docs/benchmarks.md).
 */
const FAST_HEAP_GROWING_PERCENT = 100;

/** Growing factor from the semi-space chosen: a shard sized for speed gets the larger one. */
export function autoHeapGrowingPercent(semiSpaceMiB: number): number {
  return semiSpaceMiB > DEFAULT_SEMI_SPACE_MIB ? FAST_HEAP_GROWING_PERCENT : SMALL_HEAP_GROWING_PERCENT;
}

function explicitValue(value: number | undefined, name: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new PglogError('CONFIG_INVALID', `spec.nodeTuning.${name} must be a whole number from ${min} to ${max}, got ${value}`);
  }
  return value;
}

/**
 * The shard's tuning. `explicit` mode uses the values the pool gives (validated: a value out
 * of range throws CONFIG_INVALID) and computes the ones it leaves out, as `auto` does.
 */
export function computeTuning(input: TuningInput): ShardTuning {
  const inproc = count(input.inprocTargets, 'inprocTargets');
  const proxy = count(input.proxyTargets, 'proxyTargets');
  const instances = count(input.instances, 'instances');
  const sqlSessions = count(input.sqlSessions, 'sqlSessions');
  const ingest = count(input.ingestBytesPerSecond, 'ingestBytesPerSecond');
  const limit = input.memoryLimitBytes === null ? null : count(input.memoryLimitBytes, 'memoryLimitBytes');
  const mode = input.nodeTuning.mode;
  if (mode !== 'auto' && mode !== 'explicit') throw new PglogError('CONFIG_INVALID', `spec.nodeTuning.mode must be auto or explicit, got '${mode}'`);
  const given =
    mode === 'explicit'
      ? {
          uv: explicitValue(input.nodeTuning.uvThreadpoolSize, 'uvThreadpoolSize', 1, 1024),
          old: explicitValue(input.nodeTuning.maxOldSpaceSizeMiB, 'maxOldSpaceSizeMiB', 64, Number.MAX_SAFE_INTEGER),
          semi: explicitValue(input.nodeTuning.maxSemiSpaceSizeMiB, 'maxSemiSpaceSizeMiB', 1, 256),
          growing: explicitValue(input.nodeTuning.heapGrowingPercent, 'heapGrowingPercent', 10, 400),
        }
      : { uv: undefined, old: undefined, semi: undefined, growing: undefined };
  const semi = given.semi ?? autoSemiSpaceMiB(ingest, limit, input.previousSemiSpaceMiB);
  return {
    uvThreadpoolSize: given.uv ?? autoThreadpoolSize(inproc, proxy, input.previousThreadpoolSize),
    maxOldSpaceSizeMiB: given.old ?? autoOldSpaceMiB(limit, semi, instances, sqlSessions, input.previousOldSpaceMiB),
    maxSemiSpaceSizeMiB: semi,
    heapGrowingPercent: given.growing ?? autoHeapGrowingPercent(semi),
  };
}
