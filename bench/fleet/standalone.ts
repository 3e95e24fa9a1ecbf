/**
 * One standalone `pglog collect` against a simulated fleet (test-support/src/fleet-sim/), in
 * phases: from start until every server streams; idle (what a quiet target costs the collector
 * and its server); loaded (CPU per MB); killed and started again (until every server's next line
 * is stored); and at the end every marker checked once.
 */
import { join } from 'node:path';

import { type CollectorProcess, startCollector, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { compareFleet, type FleetCheck, newestMarkers, storedByTarget } from '@pglog/test-support/fleet-sim/check.ts';
import type { SimulatedFleet } from '@pglog/test-support/fleet-sim/fleet.ts';
import { MAX_STARTUPS_REFUSAL } from '@pglog/test-support/fleet-sim/servers.ts';
import { descendantsOfAll } from '@pglog/test-support/process-tree.ts';
import pg from 'pg';

import { processCpuSeconds, processMemory, readStat } from '../ingest/proc-stats.ts';
import { serverSide } from './server-side.ts';

export interface StreamingTimes {
  /** Seconds from `since` until half of the servers had a new marker stored. */
  half: number | null;
  /** ... until every server had. */
  all: number | null;
  missing: number;
}

/**
 * Polls the store until every server has a marker above `before` (its count of markers written
 * before `since`) stored, or `timeoutMs` passes: seconds from `since` until half and all do.
 */
export async function untilEveryServerStreams(
  store: pg.Pool,
  fleet: SimulatedFleet,
  since: number,
  before: ReadonlyMap<string, number>,
  timeoutMs: number,
  writtenSince = since - 60_000,
): Promise<StreamingTimes> {
  const names = fleet.logs.map((l) => l.name);
  const streamingAt = new Map<string, number>();
  const deadline = Date.now() + timeoutMs;
  while (streamingAt.size < names.length && Date.now() < deadline) {
    let newest = new Map<string, number>();
    try {
      newest = await newestMarkers(store, writtenSince);
    } catch (e) {
      if ((e as { code?: string }).code !== '42P01') throw e; // the schema is not there yet
    }
    const now = Date.now();
    for (const name of names) if (!streamingAt.has(name) && (newest.get(name) ?? 0) > (before.get(name) ?? 0)) streamingAt.set(name, now);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const times = [...streamingAt.values()].map((t) => (t - since) / 1000).sort((a, b) => a - b);
  return {
    half: times.length >= names.length / 2 ? times[Math.ceil(names.length / 2) - 1]! : null,
    all: times.length === names.length ? times.at(-1)! : null,
    missing: names.length - streamingAt.size,
  };
}

export interface VariantResult {
  name: string;
  servers: number;
  /** From the collector's start until every server's first marker is stored. */
  start: StreamingTimes;
  idle: { cpuMsPerSecondPerTarget: number; rssBytes: number; serverCpuMsPerSecondPerLog: number; serverProcessesPerLog: Map<string, number> };
  load: {
    mbPerSecond: number;
    cpuMsPerMb: number;
    rssBytes: number;
    peakRssBytes: number;
    storeConnections: number;
    /** Statement rows the store took a second, and its database's growth per MB of log. */
    rowsPerSecond: number;
    storeBytesPerLogMb: number;
  };
  /** After a SIGKILL, from the new process's start until every server's next marker is stored. */
  recovery: StreamingTimes;
  check: FleetCheck;
  refusedHandshakes: number;
}

export interface VariantOptions {
  name: string;
  /** The launcher (this tree's cli/bin/pglog or a baseline checkout's). */
  pglog: string;
  storeUrl: string;
  dir: string;
  /** When the fleet was started: its first markers (the prefill) are older than the collector. */
  fleetStartedAt: number;
  idleSeconds: number;
  loadSeconds: number;
  /** More `pglog collect` arguments (the promotion thresholds of the fleet). */
  args: readonly string[];
  say: (line: string) => void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function start(fleet: SimulatedFleet, o: VariantOptions, run: string): CollectorProcess {
  return startCollector({
    pglog: o.pglog,
    targetsFile: writeTargetsFile(o.dir, fleet.targets('auto')),
    storeUrl: o.storeUrl,
    outputFile: join(o.dir, `collector-${run}.log`),
    args: ['--start-at', 'oldest', '--log-level', 'info', ...o.args],
  });
}

/** CPU seconds of the collector and its children (the sshproxy sidecar and the ssh clients it runs). */
function collectorCpu(c: CollectorProcess): number {
  return descendantsOfAll([c.pid]).reduce((sum, pid) => sum + (processCpuSeconds(pid) ?? 0), readStat(`/proc/${c.pid}/stat`)?.reaped ?? 0);
}

/** Runs every phase on a fresh fleet (prefilled, not yet writing) and a fresh store database. */
export async function runVariant(fleet: SimulatedFleet, o: VariantOptions): Promise<VariantResult> {
  const n = fleet.logs.length;
  const store = new pg.Pool({ connectionString: o.storeUrl, max: 2 });
  try {
    const zero = new Map<string, number>();
    const startedAt = Date.now();
    let collector = start(fleet, o, 'first');
    const startTimes = await untilEveryServerStreams(store, fleet, startedAt, zero, 900_000, o.fleetStartedAt - 60_000);
    o.say(`${o.name}: every server streaming ${startTimes.all ?? '-'} s after start (half ${startTimes.half ?? '-'} s)`);

    await sleep(20_000);
    const listeners = fleet.servers.pids();
    const idle0 = { cpu: collectorCpu(collector), server: serverSide(listeners), at: performance.now() };
    await sleep(o.idleSeconds * 1000);
    const server1 = serverSide(listeners);
    const idleS = (performance.now() - idle0.at) / 1000;
    const idleCpu = (collectorCpu(collector) - idle0.cpu) / idleS;
    const idle = {
      cpuMsPerSecondPerTarget: (idleCpu * 1000) / n,
      rssBytes: processMemory(collector.pid)?.rss ?? 0,
      serverCpuMsPerSecondPerLog: ((server1.cpuSeconds - idle0.server.cpuSeconds) * 1000) / idleS / n,
      serverProcessesPerLog: server1.processes,
    };
    o.say(`${o.name}: idle ${idle.cpuMsPerSecondPerTarget.toFixed(3)} ms/s and ${(idle.rssBytes / n / 1e6).toFixed(3)} MB per target`);

    fleet.startWriting();
    await sleep(30_000);
    const storeNow = async (): Promise<{ rows: number; bytes: number }> => {
      const { rows } = await store.query<{ rows: string; bytes: string }>(
        'SELECT (SELECT count(*) FROM pglog.statements) AS rows, pg_database_size(current_database()) AS bytes',
      );
      return { rows: Number(rows[0]!.rows), bytes: Number(rows[0]!.bytes) };
    };
    const store0 = await storeNow();
    const load0 = { cpu: collectorCpu(collector), written: await fleet.snapshot(), at: performance.now() };
    await sleep(o.loadSeconds * 1000);
    const written1 = await fleet.snapshot();
    const loadS = (performance.now() - load0.at) / 1000;
    const store1 = await storeNow();
    const mb = (written1.bytes - load0.written.bytes) / 1e6;
    const loadCpu = collectorCpu(collector) - load0.cpu - idleCpu * loadS;
    const { rows } = await store.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'pglog%'",
    );
    const mem = processMemory(collector.pid);
    const load = {
      mbPerSecond: mb / loadS,
      cpuMsPerMb: (loadCpu * 1000) / mb,
      rssBytes: mem?.rss ?? 0,
      peakRssBytes: mem?.peakRss ?? 0,
      storeConnections: Number(rows[0]?.n),
      rowsPerSecond: (store1.rows - store0.rows) / loadS,
      storeBytesPerLogMb: (store1.bytes - store0.bytes) / mb,
    };
    o.say(`${o.name}: at ${load.mbPerSecond.toFixed(2)} MB/s ${load.cpuMsPerMb.toFixed(1)} ms per MB above idle, RSS ${(load.rssBytes / 1e6).toFixed(0)} MB`);

    collector.kill('SIGKILL');
    await collector.exited;
    const before = new Map(fleet.written(await fleet.snapshot()).map((w) => [w.name, w.markers]));
    const killedAt = Date.now();
    collector = start(fleet, o, 'second');
    const recovery = await untilEveryServerStreams(store, fleet, killedAt, before, 900_000);
    o.say(`${o.name}: after a SIGKILL every server's next line stored ${recovery.all ?? '-'} s after the restart (half ${recovery.half ?? '-'} s)`);

    const totals = await fleet.stopWriting();
    const written = fleet.written(totals);
    let check = compareFleet(written, await storedByTarget(store));
    for (const deadline = Date.now() + 300_000; (check.lostMarkers > 0 || check.rowDifference < 0) && Date.now() < deadline;) {
      await sleep(3000);
      check = compareFleet(written, await storedByTarget(store));
    }
    await collector.stop();
    return { name: o.name, servers: n, start: startTimes, idle, load, recovery, check, refusedHandshakes: fleet.servers.countLogLines(MAX_STARTUPS_REFUSAL) };
  } finally {
    await store.end();
  }
}
