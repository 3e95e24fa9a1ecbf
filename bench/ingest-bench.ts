/**
 * Collector ingest benchmark (issue 3's target): one `pglog collect` process ingesting from 50
 * servers at a combined 20 MB/s over loopback SSH: CPU per MB, event-loop delay p99, RSS and
 * end-to-end latency (log write to committed row) p50/p99.
 *
 *   node bench/ingest-bench.ts [--servers 50] [--mb-per-sec 20[,10...]] [--seconds 30]
 *                              [--warmup 5] [--fleet-nice 10] [--collector-arg ARG ...]
 *                              [--profile-at MB_PER_SEC] [--tuned-for-limit MIB]
 *                              [--node-options 'FLAGS' ...] [--launcher-flags 'FLAGS' ...]
 *                              [--variant-args 'ARGS' ...] [--collector-env 'K=V ...' ...]
 *                              [--baseline DIR] [--pin-collector CORE]
 *                              [--out FILE.md] [--keep] [--verbose]
 *
 * Sets up a throwaway store (PostgreSQL 15, track_commit_timestamp on) and N real OpenSSH
 * servers on 127.0.0.2 upwards (at nice --fleet-nice, so the simulated servers' side of SSH
 * takes what the collector leaves: bench/ingest/servers.ts), each with a data directory whose
 * log a separate writer process appends to; then, per offered rate (comma-separated rates run one after another, each with a
 * fresh collector and fresh logs), measures one collector process from outside (see
 * bench/ingest/run.ts). Prints a markdown table; --out writes it between the
 * `ingest-bench` markers of FILE (replacing an earlier run's). --profile-at adds one more run at
 * that rate with the collector under V8's sampling profiler, reported apart (where the CPU goes
 * by stage: bench/ingest/cpu-profile.ts), so that the profiler's cost is in no other figure.
 * --tuned-for-limit runs every rate twice: with Node's defaults, and with the V8 heap sizes and
 * threadpool the operator gives a collector pod with that memory limit at that ingest rate
 * (operator/src/desired/tuning.ts), side by side. Each --node-options adds one more run per
 * rate with the collector's NODE_OPTIONS set to FLAGS (V8 flags to compare), each
 * --launcher-flags one with the launcher's own V8 flags for a collector replaced by FLAGS
 * (PGLOG_NODE_FLAGS, cli/bin/pglog; '' runs Node's defaults, as before ADR 0018), each
 * --variant-args one with ARGS (space-separated) added to the collector's arguments (e.g. the
 * settings of an earlier version, `--ssh-window 2MiB --memory-budget 128MiB`), each
 * --collector-env one with those variables added to the collector's environment (e.g. glibc
 * malloc's tunables, `MALLOC_ARENA_MAX=2`), and --baseline
 * DIR one with the collector of another checkout (DIR/cli/bin/pglog, with its own
 * node_modules: `git worktree add DIR REV && cp -a node_modules DIR/`), its defaults, right
 * after this tree's run at each rate. Everything started is stopped
 * and every temporary directory removed, also on failure or Ctrl-C (--keep keeps the run
 * directories with the collector's own log, for looking into a result; --verbose prints a
 * line a second: read rate, event-loop delay, /metrics answer time, pauses, memory).
 * --pin-collector CORE puts the collector (every thread) alone on CORE and everything else on
 * the CPUs the benchmark was started on (issue 15 point 2; bench/transport/pinning.ts): run as
 * `taskset -c 1 node bench/ingest-bench.ts --pin-collector 0`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { tuningNodeFlags } from '@pglog/collector/cluster/launch-command.ts';
import { computeTuning } from '@pglog/operator/desired/tuning.ts';

import { renderSection, writeSection } from './ingest/report.ts';
import { measureRun, type RunResult } from './ingest/run.ts';
import { FLEET_BENCH_OPTIONS, fleetBench, startStoreAndFleet } from './ingest/servers.ts';
import { emptyEventTables } from './ingest/store.ts';
import { runCleanup } from './lib/cleanup.ts';
import { pinningOption } from './transport/pinning.ts';

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '50' },
    'mb-per-sec': { type: 'string', default: '20' },
    seconds: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '5' },
    'profile-at': { type: 'string' },
    'tuned-for-limit': { type: 'string' },
    'node-options': { type: 'string', multiple: true, default: [] },
    'launcher-flags': { type: 'string', multiple: true, default: [] },
    'variant-args': { type: 'string', multiple: true, default: [] },
    'collector-env': { type: 'string', multiple: true, default: [] },
    baseline: { type: 'string' },
    ...FLEET_BENCH_OPTIONS,
  },
});
const servers = Number(values.servers);

/** `K=V K2=V2` (space-separated, no quoting) as an environment. */
function parseEnvAssignments(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const word of text.split(' ').filter((w) => w !== '')) {
    const eq = word.indexOf('=');
    if (eq <= 0) throw new Error(`--collector-env takes K=V words, got '${word}'`);
    env[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return env;
}
const rates = values['mb-per-sec'].split(',').map(Number);
const profileRate = values['profile-at'] === undefined ? undefined : Number(values['profile-at']);
const tunedLimitMiB = values['tuned-for-limit'] === undefined ? undefined : Number(values['tuned-for-limit']);
if (tunedLimitMiB !== undefined && !(Number.isInteger(tunedLimitMiB) && tunedLimitMiB >= 128))
  throw new Error('--tuned-for-limit takes a memory limit in MiB (at least 128)');

/**
 * The Node settings the operator's tuning gives a pod collecting `servers` logs at `rate` MB/s
 * under the limit, as V8 flags on the collector's command line (the launcher's list replaced,
 * as the cluster launcher does, collector/src/cluster/launch-command.ts).
 */
function operatorTuning(rate: number, limitMiB: number): { nodeOptions: string; launcherFlags: string; uvThreadpoolSize: number; label: string } {
  const t = computeTuning({
    nodeTuning: { mode: 'auto' },
    memoryLimitBytes: limitMiB * 2 ** 20,
    inprocTargets: servers,
    proxyTargets: 0,
    instances: servers,
    sqlSessions: 0,
    ingestBytesPerSecond: rate * 1e6,
  });
  const launcherFlags = tuningNodeFlags(t).join(' ');
  return {
    nodeOptions: '',
    launcherFlags,
    uvThreadpoolSize: t.uvThreadpoolSize,
    label: `operator tuning for a ${limitMiB} MiB limit (\`${launcherFlags}\`, UV_THREADPOOL_SIZE=${t.uvThreadpoolSize})`,
  };
}
const pin = await pinningOption(values['pin-collector']);
const baseline = values.baseline === undefined ? undefined : baselineCheckout(values.baseline);

/** Another checkout's launcher, and its column's label: the directory and the commit it holds. */
function baselineCheckout(dir: string): { pglog: string; label: string } {
  const pglog = join(resolve(dir), 'cli/bin/pglog');
  if (!existsSync(pglog)) throw new Error(`--baseline ${dir}: no cli/bin/pglog there`);
  if (!existsSync(join(dir, 'node_modules'))) throw new Error(`--baseline ${dir}: no node_modules there (cp -a node_modules ${dir}/)`);
  const commit = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  return { pglog, label: `baseline: the collector at ${commit}` };
}
const measureSeconds = Number(values.seconds);
const warmupSeconds = Number(values.warmup);
const collectorArgs = values['collector-arg'];
const fleetNice = Number(values['fleet-nice']);
if (profileRate !== undefined && !(profileRate > 0)) throw new Error('--profile-at takes an offered rate in MB/s');
if (
  !Number.isInteger(servers) ||
  rates.some((r) => !(r > 0)) ||
  !(measureSeconds > 0) ||
  !(warmupSeconds >= 0) ||
  !Number.isInteger(fleetNice) ||
  fleetNice < 0 ||
  fleetNice > 19
) {
  throw new Error(
    'usage: ingest-bench.ts [--servers N] [--mb-per-sec R[,R...]] [--seconds S] [--warmup S] [--fleet-nice N] [--collector-arg ARG ...] [--out FILE.md] [--keep] [--verbose]',
  );
}

const { say, cleanups, root } = fleetBench('ingest-bench', servers, values.keep, 'collector logs in run*/collector.log');
const started = Date.now();
const results: RunResult[] = [];
const profiled: RunResult[] = [];
const failures: string[] = [];
try {
  const { store, fleet } = await startStoreAndFleet(servers, fleetNice, cleanups, say);
  type Tuning = { nodeOptions: string; uvThreadpoolSize?: number; label: string; launcherFlags?: string; env?: Record<string, string> } | undefined;
  const plan: Array<{ rate: number; profile: boolean; tuning: Tuning; extraArgs?: string[]; pglog?: string }> = [
    ...rates.flatMap((rate) => [
      { rate, profile: false, tuning: undefined },
      ...(baseline === undefined ? [] : [{ rate, profile: false, tuning: { nodeOptions: '', label: baseline.label }, pglog: baseline.pglog }]),
      ...(tunedLimitMiB === undefined ? [] : [{ rate, profile: false, tuning: operatorTuning(rate, tunedLimitMiB) }]),
      ...values['node-options'].map((flags) => ({ rate, profile: false, tuning: { nodeOptions: flags, label: `\`NODE_OPTIONS=${flags}\`` } })),
      ...values['launcher-flags'].map((flags) => ({
        rate,
        profile: false,
        tuning: { nodeOptions: '', launcherFlags: flags, label: flags === '' ? "Node's defaults (no launcher flags)" : `launcher flags \`${flags}\`` },
      })),
      ...values['variant-args'].map((args) => ({ rate, profile: false, tuning: undefined, extraArgs: args.split(' ').filter((a) => a !== '') })),
      ...values['collector-env'].map((vars) => ({
        rate,
        profile: false,
        tuning: { nodeOptions: '', env: parseEnvAssignments(vars), label: `environment \`${vars}\`` },
      })),
    ]),
    ...(profileRate === undefined ? [] : [{ rate: profileRate, profile: true, tuning: undefined }]),
  ];
  for (const [i, entry] of plan.entries()) {
    const { rate, profile } = entry;
    const extraArgs = entry.extraArgs ?? [];
    const tuning = extraArgs.length > 0 ? { nodeOptions: '', label: `\`${extraArgs.join(' ')}\`` } : entry.tuning;
    say(
      `run ${i + 1}/${plan.length}: ${rate} MB/s offered from ${servers} servers${profile ? ', profiled' : ''}${tuning === undefined ? '' : `, ${tuning.label}`}`,
    );
    const runCleanups = runCleanup(cleanups);
    try {
      const profileDir = join(root, `run${i + 1}`, 'cpu-profile');
      await emptyEventTables(store.url);
      const result = await measureRun({
        dir: join(root, `run${i + 1}`),
        servers: fleet.servers,
        instance: `main${i + 1}`,
        storeUrl: store.url,
        bytesPerSec: rate * 1e6,
        warmupSeconds,
        measureSeconds,
        collectorArgs: [...collectorArgs, ...extraArgs],
        say,
        verbose: values.verbose,
        onCleanup: runCleanups.onCleanup,
        ...(profile ? { profileDir } : {}),
        ...(tuning === undefined ? {} : { tuning }),
        ...(pin === undefined ? {} : { pin }),
        ...(entry.pglog === undefined ? {} : { pglog: entry.pglog }),
      });
      (profile ? profiled : results).push(result);
    } catch (e) {
      // A run that cannot be measured (the collector stopped answering, died, never read) is a
      // result too: reported under the table, and the next rate still runs.
      const message = (e as Error).message.split('\n')[0] ?? '';
      failures.push(`${rate} MB/s: ${message}`);
      say(`run ${i + 1} failed: ${(e as Error).message}`);
    } finally {
      // This run's collector and writer, whatever happened (killing an exited one does nothing).
      await runCleanups.run();
    }
  }
} finally {
  await cleanups.run();
  say(`done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

const section = renderSection(
  results,
  failures,
  { collectorArgs, warmupSeconds, measureSeconds, fleetNice, servers, ...(pin === undefined ? {} : { pin }) },
  profiled,
);
process.stdout.write(`${section}\n`);
if (values.out !== undefined) {
  writeSection(values.out, section);
  say(`wrote ${values.out}`);
}
