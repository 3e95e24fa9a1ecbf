/**
 * A fleet on this machine: N simulated PostgreSQL servers, each a real OpenSSH sshd on an address
 * of its own (servers.ts) with its own PostgreSQL-format log (layout.ts) written at a rate drawn
 * from a skewed distribution (rates.ts: log-normal, most quiet, a few hot) and rotated as
 * PostgreSQL rotates (log-writer.ts), every write ending with a numbered marker, so that
 * check.ts can find each marker of each server in the store exactly once.
 *
 *   const fleet = await startSimulatedFleet({ count: 500, dir, keyCache });
 *   fleet.startWriting();                      // the rate clock starts
 *   ... a collector reads fleet.targets() ...
 *   await fleet.stopWriting();                 // the final counts
 *   compareFleet(fleet.written(), await storedByTarget(store));
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

import type { TargetSpec } from '../collector-process.ts';
import { isRoot, serverUser } from '../server-user.ts';
import { FLEET_TAG_PREFIX, type TargetWritten } from './check.ts';
import { createSimulatedLogs, type SimulatedLog, simulatedTarget } from './layout.ts';
import type { WriterTotals } from './log-writer.ts';
import { DEFAULT_RATE_SHAPE, drawRates, type RateShape } from './rates.ts';
import { type FleetServers, startFleetServers } from './servers.ts';
import { type LogWriter, spawnLogWriter } from './writer-client.ts';

export interface SimulatedFleetOptions {
  count: number;
  /** The run's directory (servers' files, logs). */
  dir: string;
  /** Host and client keys kept between runs. */
  keyCache: string;
  addressBase?: string;
  port?: number;
  shape?: RateShape;
  /** Seed of the rates. */
  seed?: number;
  /** Rotate each log after this many bytes. Default 4 MiB. */
  rotateEveryBytes?: number;
  /** Delete rotated files this long after their rotation (log-writer.ts keepRotatedMs). Default: keep them all. */
  keepRotatedMs?: number;
  /** The writer's tick. Default 250 ms. */
  tickMs?: number;
  /** Bytes every log holds before writing starts (PostgreSQL's start-up lines). Default 200. */
  prefillBytes?: number;
  /** Servers whose sshd lets clients forward to Unix sockets (SQL snapshots of a real PostgreSQL behind them), by index. */
  forwarding?: ReadonlySet<number>;
}

export interface SimulatedFleet {
  readonly servers: FleetServers;
  readonly logs: readonly SimulatedLog[];
  /** Bytes per second of each server, in server order. */
  readonly rates: readonly number[];
  /** A standalone collector's targets for every server (transport as given). */
  targets(transport?: TargetSpec['transport']): TargetSpec[];
  startWriting(): void;
  /** What was written so far. */
  snapshot(): Promise<WriterTotals>;
  /** Rotates these servers' logs now (all when absent): a rotation storm. */
  rotate(indices?: number[]): Promise<WriterTotals>;
  /** Stops writing; the final totals. */
  stopWriting(): Promise<WriterTotals>;
  /** Each server's markers and statements, from totals (the final ones once writing stopped). */
  written(totals: WriterTotals): TargetWritten[];
  dispose(): Promise<void>;
}

export async function startSimulatedFleet(o: SimulatedFleetOptions): Promise<SimulatedFleet> {
  const shape = o.shape ?? DEFAULT_RATE_SHAPE;
  // The servers' login user reads the logs and the authorized keys below it.
  mkdirSync(o.dir, { recursive: true });
  chmodSync(o.dir, 0o755);
  const rates = drawRates(o.count, shape, o.seed);
  const servers = await startFleetServers({
    count: o.count,
    dir: join(o.dir, 'servers'),
    keyCache: o.keyCache,
    ...(o.addressBase === undefined ? {} : { addressBase: o.addressBase }),
    ...(o.port === undefined ? {} : { port: o.port }),
    ...(o.forwarding === undefined ? {} : { forwarding: o.forwarding }),
  });
  let writer: LogWriter | null = null;
  try {
    const logs = createSimulatedLogs(join(o.dir, 'logs'), o.count, isRoot() ? serverUser() : null);
    writer = spawnLogWriter({
      files: logs.map((l) => l.file),
      bytesPerSec: 0,
      rates,
      tickMs: o.tickMs ?? 250,
      markers: { tagPrefix: FLEET_TAG_PREFIX, runs: logs.map((l) => l.name) },
      rotateEveryBytes: o.rotateEveryBytes ?? 4 * 1024 * 1024,
      ...(o.keepRotatedMs === undefined ? {} : { keepRotatedMs: o.keepRotatedMs }),
    });
    await writer.prefill(o.prefillBytes ?? 200);
    const w = writer;
    return {
      servers,
      logs,
      rates,
      targets: (transport) => logs.map((l, i) => simulatedTarget(l, servers.servers[i]!, servers, transport)),
      startWriting: () => w.start(),
      snapshot: () => w.snapshot(),
      rotate: (indices) => w.rotate(indices),
      stopWriting: () => w.stop(),
      written: (totals) => logs.map((l, i) => ({ name: l.name, markers: totals.fileMarkers[i] ?? 0, statements: totals.fileStatements[i] ?? 0 })),
      dispose: async () => {
        w.kill();
        await servers.dispose();
      },
    };
  } catch (e) {
    writer?.kill();
    await servers.dispose();
    throw e;
  }
}
