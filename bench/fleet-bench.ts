/**
 * `make bench` (fleet part), issue 46: a simulated fleet (test-support/src/fleet-sim/: one real
 * sshd per server on an address of its own, log-normal log rates, rotation, markers) into one
 * standalone `pglog collect`, at each size of --servers, this tree and optionally a baseline
 * checkout side by side (each on a fresh fleet with the same seed and a database of its own):
 *
 *   node bench/fleet-bench.ts [--servers 250,500,1000,2000] [--baseline DIR] [--idle-seconds 60]
 *                             [--load-seconds 60] [--ssh-parallel 16] [--out FILE.md]
 *
 * Per size: plain OpenSSH clients logging in to every server (the machine's yardstick for a
 * fleet's handshakes); per collector: the time from start until every server streams, what an
 * idle target costs the collector (CPU, RSS) and its server (CPU, processes per followed log),
 * CPU per MB under the fleet's load, the time after a SIGKILL and restart until every server's
 * next line is stored, store connections, handshakes refused by sshd, and every marker once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { startSimulatedFleet } from '@pglog/test-support/fleet-sim/fleet.ts';
import { DEFAULT_RATE_SHAPE, promotionThreshold } from '@pglog/test-support/fleet-sim/rates.ts';
import pg from 'pg';

import { type PlainLogins, plainOpensshLogins } from './fleet/plain-ssh.ts';
import { fleetReport } from './fleet/report.ts';
import { runVariant, type VariantResult } from './fleet/standalone.ts';
import { startBenchStore } from './ingest/store.ts';
import { createCleanup } from './lib/cleanup.ts';
import { emitReport } from './lib/emit-report.ts';

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '250,500,1000,2000' },
    baseline: { type: 'string' },
    'idle-seconds': { type: 'string', default: '60' },
    'load-seconds': { type: 'string', default: '60' },
    'ssh-parallel': { type: 'string', default: '16' },
    out: { type: 'string' },
  },
});
const sizes = values.servers.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 60_000)) throw new RangeError(`--servers takes sizes from 1 to 60000, got ${values.servers}`);
const say = (line: string): void => {
  process.stderr.write(`fleet-bench [${new Date().toISOString().slice(11, 19)}]: ${line}\n`);
};
const cleanup = createCleanup(say);
const started = Date.now();
const shape = DEFAULT_RATE_SHAPE;
// A few percent of the fleet above the sidecar threshold, as the fleet has (rates.ts).
const promoteBits = Math.round(promotionThreshold(shape, 0.05) * 8);
const collectArgs = ['--promote-above', String(promoteBits), '--demote-below', String(Math.round(promoteBits * 0.6))];
const variants = [{ name: 'this tree', pglog: join(import.meta.dirname, '../cli/bin/pglog') }];
if (values.baseline !== undefined) variants.push({ name: 'baseline', pglog: join(values.baseline, 'cli/bin/pglog') });

const results: Array<{ servers: number; plain: PlainLogins; variants: VariantResult[] }> = [];
try {
  const store = await startBenchStore();
  cleanup.push(() => store.stop());
  const admin = new pg.Client({ connectionString: store.url });
  await admin.connect();
  cleanup.push(() => admin.end());
  for (const n of sizes) {
    let plain: PlainLogins | null = null;
    const done: VariantResult[] = [];
    for (const [k, v] of variants.entries()) {
      const dir = mkdtempSync(join(tmpdir(), `pglog-fleet-${n}-`));
      const db = `fleet_${n}_${k}`;
      await admin.query(`DROP DATABASE IF EXISTS ${db}`);
      await admin.query(`CREATE DATABASE ${db}`);
      say(`${n} servers, ${v.name}: starting the fleet`);
      const fleetStartedAt = Date.now();
      const fleet = await startSimulatedFleet({ count: n, dir, keyCache: join(homedir(), '.cache/pglog/fleet-keys'), shape });
      try {
        if (plain === null) {
          plain = await plainOpensshLogins(fleet.servers, Number(values['ssh-parallel']));
          say(`${n} servers: plain OpenSSH logged in to all in ${plain.seconds.toFixed(1)} s (${plain.failed} failed)`);
        }
        // The helper's URL has no host (a Unix socket), which WHATWG URL refuses: the path by hand.
        const url = store.url.replace(/@\/postgres\?/, `@/${db}?`);
        done.push(
          await runVariant(fleet, {
            name: v.name,
            pglog: v.pglog,
            storeUrl: url,
            fleetStartedAt,
            dir,
            idleSeconds: Number(values['idle-seconds']),
            loadSeconds: Number(values['load-seconds']),
            args: collectArgs,
            say,
          }),
        );
      } finally {
        await fleet.dispose();
        rmSync(dir, { recursive: true, force: true });
        await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
      }
    }
    results.push({ servers: n, plain: plain!, variants: done });
  }
} finally {
  await cleanup.run();
}
emitReport(
  fleetReport(results, {
    shape,
    promoteBits,
    cpus: `${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})`,
    minutes: (Date.now() - started) / 60_000,
    baseline: values.baseline ?? null,
  }),
  values.out,
);
