/**
 * `make fleet N=...`: a simulated fleet behind the real operator and collectors from the built
 * image, on the real node (issue 46), measured end to end. Root only (the real node, local
 * routes, iptables).
 *
 *   node bench/fleet-node.ts --servers N [--replicas R] [--hpa-min R] [--hpa-max R+2]
 *        [--hpa-target-seconds 0.5] [--no-hpa] [--real-postgres 3] [--soak-minutes 0]
 *        [--fault-every-minutes 4] [--faults all|KIND,...] [--seed 1] [--wait-minutes 30]
 *        [--out FILE.md] [--keep]
 *
 * operator/test/helpers/fleet-node/ starts the real node (PGLOG_TEST_IMAGE, pglog:test by
 * default, imported from Docker), N simulated servers (one sshd each on 10.97.x.y, log-normal
 * log rates with numbered markers, rotation), K real PostgreSQL servers with SQL snapshots, the
 * store on the node's gateway; creates the CRDs, one SSH Secret and N + K PostgresTargets; then
 * `helm install` with the HPA on the collectors' event-loop delay (a custom metrics API fed with
 * each pod's own value), and patches the pool (its size, the sidecar thresholds that promote the
 * hottest 5 % of the servers). Measured and printed (and written with --out: FILE.md, the
 * samples as FILE.csv, their chart as FILE.svg):
 *   - each set-up step; the time from `helm install` until every server's first marker written
 *     after it is stored; then each pod's SSH connections (to the fleet's port, from the pod's
 *     IP, `ss` on the host), store connections (pg_stat_activity by client address), memory;
 *   - a random collector pod crashed (its containers SIGKILLed through containerd) and the time
 *     until every server of its shard streams again;
 *   - with --soak-minutes M: M minutes of writing with a random fault every few minutes
 *     (bench/fleet-node/faults.ts), each with its recovery time;
 *   - every 10 s: the lag (p95, max) and each pod's RSS and CPU;
 *   - at the end, writing stopped: every marker of every server once, the real servers'
 *     statements once and their snapshots, 0 handshakes refused by sshd, restarts and OOM kills,
 *     the collectors' warnings and errors. The exit status is 1 when a check fails.
 * --keep leaves everything running at the end until Ctrl-C (the kubeconfig path is printed).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, homedir, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import type { StreamingTimes } from '@pglog/test-support/fleet-sim/streaming.ts';
import { Rng } from '@pglog/test-support/statement-log.ts';

import { type FleetNode, NAMESPACE, startFleetNode } from '../operator/test/helpers/fleet-node/fleet-node.ts';
import { finalCheck, type Holdings, holdings, killAndRecover, type KillResult, untilStreaming } from '../operator/test/helpers/fleet-node/measure.ts';
import { fleetTransport, POOL } from '../operator/test/helpers/fleet-node/objects.ts';
import { collectorRecords, operatorCounters, problemCounts, tuningRestarts } from '../operator/test/helpers/fleet-node/observe.ts';
import { untilRealStreaming } from '../operator/test/helpers/fleet-node/real-postgres.ts';
import { drawChart } from './fleet-node/chart.ts';
import { type FaultRecord, parseFaultKinds, soak } from './fleet-node/faults.ts';
import { markdown, type RunReport } from './fleet-node/report.ts';
import { Sampler, samplesCsv } from './fleet-node/samples.ts';
import { createCleanup } from './lib/cleanup.ts';

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '100' },
    replicas: { type: 'string' },
    'hpa-min': { type: 'string' },
    'hpa-max': { type: 'string' },
    'hpa-target-seconds': { type: 'string', default: '0.5' },
    'no-hpa': { type: 'boolean', default: false },
    'real-postgres': { type: 'string', default: '3' },
    'soak-minutes': { type: 'string', default: '0' },
    'fault-every-minutes': { type: 'string', default: '4' },
    faults: { type: 'string', default: 'all' },
    seed: { type: 'string', default: '1' },
    'wait-minutes': { type: 'string', default: '30' },
    'keep-rotated-minutes': { type: 'string' },
    out: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});

const count = (name: string, v: string | undefined, min: number): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number >= ${min}, got ${v}`);
  return n;
};
const servers = count('servers', values.servers, 1);
const replicas = count('replicas', values.replicas ?? String(Math.max(2, Math.ceil(servers / 250))), 1);
const hpaMin = count('hpa-min', values['hpa-min'] ?? String(replicas), 1);
const hpaMax = count('hpa-max', values['hpa-max'] ?? String(hpaMin + 2), hpaMin);
const hpa = values['no-hpa'] ? null : { min: hpaMin, max: hpaMax, targetSeconds: Number(values['hpa-target-seconds']) };
const realPostgres = count('real-postgres', values['real-postgres'], 0);
const soakMinutes = Number(values['soak-minutes']);
const faultEvery = Number(values['fault-every-minutes']);
const seed = count('seed', values.seed, 0);
const faultKinds = parseFaultKinds(values.faults);
const waitMs = Number(values['wait-minutes']) * 60_000;
// A soak deletes rotated logs after 20 minutes (far beyond any fault's outage) unless told otherwise: an hour at 2,000 servers writes some 24 GB.
const keepRotatedMinutes = values['keep-rotated-minutes'] === undefined ? (soakMinutes > 0 ? 20 : null) : Number(values['keep-rotated-minutes']);
if (!(soakMinutes >= 0) || !(faultEvery > 0) || !(waitMs > 0))
  throw new Error('--soak-minutes, --fault-every-minutes and --wait-minutes must be positive numbers');
if (process.getuid?.() !== 0) throw new Error('make fleet runs as root (the real node, a local route for the fleet, iptables)');

const started = Date.now();
const clock = (): string => {
  const s = Math.floor((Date.now() - started) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};
const say = (line: string): void => console.log(`[${clock()}] ${line}`);
const cleanup = createCleanup(say);

const dir = mkdtempSync(join(tmpdir(), 'pglog-fleet-node-'));
// The servers' login user reads the fleet's files below it.
chmodSync(dir, 0o755);
cleanup.push(() => rmSync(dir, { recursive: true, force: true }));

/** Progress of a wait, said at most every 15 s. */
function progress(what: string): (n: number, of: number) => void {
  let last = 0;
  return (n, of) => {
    if (Date.now() - last < 15_000 && n < of) return;
    last = Date.now();
    say(`  ${what}: ${n} of ${of} servers streaming`);
  };
}

function sayHoldings(h: Holdings): void {
  const MiB = 2 ** 20;
  for (const p of h.pods) {
    const u = p.usage;
    say(
      `  ${p.pod} (${p.ip}): ${p.sshConnections} SSH connections, ${p.storeConnections} store connections, RSS ${u === undefined ? '-' : `${(u.rss / MiB).toFixed(0)} MiB (collector ${(u.collectorRss / MiB).toFixed(0)}, sidecar ${(u.sidecarRss / MiB).toFixed(0)})`}, CPU ${u?.cpuSeconds.toFixed(0) ?? '-'} s so far`,
    );
  }
  say(`  store connections in all: ${h.storeTotal}; SSH connections from no collector pod: ${h.otherSsh}`);
}

/** What a run has seen so far: an interrupted run charts it (its samples and faults). */
interface SoFar {
  kill: KillResult | null;
  faults: FaultRecord[];
  reported: boolean;
}

async function measure(
  node: FleetNode,
  installedAt: number,
  sampler: Sampler,
  soFar: SoFar,
): Promise<{ streaming: StreamingTimes; real: Map<string, number | null>; at: Holdings | null; kill: KillResult | null; faults: FaultRecord[] }> {
  const [streaming, real] = await Promise.all([
    untilStreaming(node, installedAt, waitMs, { progress: progress('install') }),
    untilRealStreaming(node.storePool, node.real, installedAt, waitMs),
  ]);
  say(
    `every server streaming: ${streaming.all === null ? `NO, ${streaming.missing.length} missing after ${waitMs / 60_000} min` : `${streaming.all.toFixed(1)} s after helm install`} (half at ${streaming.half?.toFixed(1) ?? '-'} s)`,
  );
  if (real.size > 0)
    say(`real servers streaming: ${[...real].map(([n, t]) => `${n} ${t === null ? 'NOT' : `${t.toFixed(1)} s`}`).join(', ')} after helm install`);
  const at = await holdings(node);
  sayHoldings(at);
  let kill: KillResult | null = null;
  if (streaming.all !== null) {
    const pods = await node.pods();
    const pod = pods[new Rng(seed + 1).int(pods.length)]!;
    say(`killing ${pod.metadata.name} (collector and sidecar SIGKILLed through containerd)`);
    kill = await killAndRecover(node, pod, waitMs, progress(`${pod.metadata.name}'s servers`));
    soFar.kill = kill;
    say(
      `${kill.pod}: its ${kill.targets} servers streaming again ${kill.times.all?.toFixed(1) ?? 'NOT'} s after the kill (half at ${kill.times.half?.toFixed(1) ?? '-'} s)`,
    );
  }
  let faults: FaultRecord[] = [];
  if (soakMinutes > 0 && streaming.all !== null) {
    say(`soak: ${soakMinutes} min, a fault every ~${faultEvery} min (seed ${seed})`);
    const ticker = setInterval(() => {
      const s = sampler.latest();
      if (s !== undefined)
        say(`  lag p95 ${s.lagP95.toFixed(1)} s, max ${s.lagMax.toFixed(1)} s; RSS ${s.pods.map((p) => `${p.pod} ${p.rssMiB.toFixed(0)} MiB`).join(', ')}`);
    }, 60_000);
    faults = await soak({
      node,
      minutes: soakMinutes,
      everyMinutes: faultEvery,
      seed,
      kinds: faultKinds,
      installedAt,
      hpa,
      recoveryTimeoutMs: 10 * 60_000,
      say,
      onRecord: (r) => soFar.faults.push(r),
    }).finally(() => clearInterval(ticker));
  }
  const last = sampler.latest();
  if (last !== undefined) say(`lag now: p95 ${last.lagP95.toFixed(1)} s, max ${last.lagMax.toFixed(1)} s`);
  return { streaming, real, at, kill, faults };
}

async function main(): Promise<boolean> {
  say(
    `fleet on the real node: ${servers} simulated servers, ${realPostgres} real PostgreSQL, ${hpa === null ? `${replicas} pods` : `HPA ${hpaMin}..${hpaMax} at ${hpa.targetSeconds} s`}; ${cpus().length} CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`,
  );
  const node = await startFleetNode({
    servers,
    realPostgres,
    replicas: hpa?.min ?? replicas,
    hpa,
    image: process.env['PGLOG_TEST_IMAGE'] ?? 'pglog:test',
    docker: process.env['PGLOG_TEST_DOCKER'] ?? '/usr/bin/docker',
    keyCache: join(process.env['PGLOG_CACHE'] ?? join(homedir(), '.cache/pglog'), 'fleet-node-keys'),
    dir: join(dir, 'fleet'),
    seed,
    ...(keepRotatedMinutes === null ? {} : { keepRotatedMs: keepRotatedMinutes * 60_000 }),
    say,
  });
  cleanup.push(() => node.dispose());
  const transport = fleetTransport(node.shape);
  say(
    `collector memory limit ${node.memoryLimitMiB} MiB; sidecar above ${(transport.promoteAboveBitsPerSecond / 1000).toFixed(0)} kbit/s (${node.fleet.rates.filter((r) => r * 8 > transport.promoteAboveBitsPerSecond).length} servers)`,
  );
  const installedAt = await node.install();
  const helmSeconds = (Date.now() - installedAt) / 1000;
  say(`helm install and the pool's patch: ${helmSeconds.toFixed(1)} s`);
  const sampler = new Sampler(node, installedAt);
  sampler.start();
  const soFar: SoFar = { kill: null, faults: [], reported: false };
  // Runs before the node is taken down (clean-up steps run last-registered first), also on Ctrl-C.
  cleanup.push(() => {
    if (!soFar.reported) writePartial(installedAt, sampler, soFar);
  });
  let m: Awaited<ReturnType<typeof measure>> | null = null;
  try {
    m = await measure(node, installedAt, sampler, soFar);
  } finally {
    await sampler.stop();
  }
  if (sampler.failed() > 0) say(`${sampler.failed()} samples could not be taken (the store or the API away)`);
  const stoppedAt = Date.now();
  const totals = await node.stopWriting();
  say('writing stopped; waiting for the store to hold every marker');
  const check = await finalCheck(node, totals, stoppedAt, waitMs);
  say(`check: ${check.line}`);
  for (const r of check.real) say(`check: ${r.line}`);
  say(`check: ${check.refusedHandshakes} handshakes refused by sshd`);
  await node.pods();
  const records = collectorRecords(node.cluster.node.podLogs, NAMESPACE, POOL);
  const problems = problemCounts(records);
  for (const p of problems.slice(0, 10)) say(`collector ${p.count} × ${p.line}`);
  const activity = { ...(await operatorCounters(node.cluster.client, NAMESPACE, POOL)), tuningRestarts: tuningRestarts(records) };
  say(
    `operator: ${activity.moves} target moves, ${activity.promotions} promotions, ${activity.demotions} demotions; collector processes restarted for a new tuning: ${activity.tuningRestarts}`,
  );
  const restarts = node.restarts.restarts();
  const expected = new Set([m.kill?.pod, ...m.faults.filter((f) => f.kind === 'pod-kill').map((f) => f.detail.split(' ')[0])]);
  const unexpected = restarts.filter((r) => !expected.has(r.split('/')[0]));
  say(`restarts: ${restarts.join('; ') || 'none'}; OOM kills: ${node.restarts.oomKills()}`);
  const ok =
    check.ok &&
    m.streaming.all !== null &&
    [...m.real.values()].every((t) => t !== null) &&
    (m.kill === null || m.kill.times.all !== null) &&
    node.restarts.oomKills() === 0 &&
    unexpected.length === 0;
  report(node, { installedAt, helmSeconds, m, check, problems, activity, restarts, ok }, sampler);
  soFar.reported = true;
  if (values.keep) {
    say(`--keep: everything runs on; kubeconfig ${node.cluster.cp.kubeconfig}, namespace ${NAMESPACE}. Ctrl-C ends it.`);
    await new Promise(() => undefined);
  }
  return ok;
}

function outFiles(): { md: string; csv: string; svg: string } | null {
  const base = values.out?.replace(/\.md$/, '');
  return base === undefined ? null : { md: `${base}.md`, csv: `${base}.csv`, svg: `${base}.svg` };
}

function chartMarks(installedAt: number, kill: KillResult | null, faults: readonly FaultRecord[]): Array<{ t: number; label: string }> {
  return [
    ...(kill === null ? [] : [{ t: (kill.killedAt - installedAt) / 1000, label: `${kill.pod} killed` }]),
    ...faults.map((f) => ({ t: f.t, label: f.kind })),
  ];
}

/** A run stopped or failed before its report: its samples and their chart, marked as partial. */
function writePartial(installedAt: number, sampler: Sampler, soFar: SoFar): void {
  const files = outFiles();
  if (files === null || sampler.samples.length === 0) return;
  const title = `Fleet on the real node: ${servers} servers (stopped after ${((Date.now() - installedAt) / 60_000).toFixed(0)} min, no final check)`;
  writeFileSync(files.csv, samplesCsv(sampler.samples));
  writeFileSync(files.svg, drawChart(title, sampler.samples, chartMarks(installedAt, soFar.kill, soFar.faults)));
  say(`written (partial: the run did not reach its final check): ${files.csv}, ${files.svg}`);
}

function report(
  node: FleetNode,
  r: {
    installedAt: number;
    helmSeconds: number;
    m: Awaited<ReturnType<typeof measure>>;
    check: Awaited<ReturnType<typeof finalCheck>>;
    problems: RunReport['problems'];
    activity: RunReport['activity'];
    restarts: string[];
    ok: boolean;
  },
  sampler: Sampler,
): void {
  const out = values.out;
  const named = outFiles();
  const files = { csv: named?.csv ?? null, svg: named?.svg ?? null };
  const title = `Fleet on the real node: ${servers} servers${soakMinutes > 0 ? `, ${soakMinutes}-minute soak` : ''}`;
  const rr: RunReport = {
    title,
    settings: [
      [
        'simulated servers',
        `${servers} (log-normal rates: median ${node.shape.medianBytesPerSecond} B/s, σ ${node.shape.sigma}; ${(node.fleet.rates.reduce((a, b) => a + b, 0) / 1000) | 0} kB/s in all)`,
      ],
      ['real PostgreSQL servers', String(realPostgres)],
      ['pool', hpa === null ? `${replicas} pods` : `HPA ${hpa.min}..${hpa.max} on event-loop delay p99 at ${hpa.targetSeconds} s`],
      ['collector memory limit', `${node.memoryLimitMiB} MiB`],
      ['soak', soakMinutes > 0 ? `${soakMinutes} min, a fault every ~${faultEvery} min, seed ${seed}` : 'none'],
      ['machine', `${cpus().length} CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`],
    ],
    steps: node.steps,
    helmSeconds: r.helmSeconds,
    streaming: r.m.streaming,
    realStreaming: [...r.m.real],
    atStreaming: r.m.at,
    kill: r.m.kill,
    faults: r.m.faults,
    samples: sampler.samples,
    check: r.check,
    restarts: r.restarts,
    oomKills: node.restarts.oomKills(),
    problems: r.problems,
    activity: r.activity,
    files: { csv: files.csv?.split('/').pop() ?? null, svg: files.svg?.split('/').pop() ?? null },
    ok: r.ok,
  };
  const marks = chartMarks(r.installedAt, r.m.kill, r.m.faults);
  if (out !== undefined) {
    writeFileSync(out, markdown(rr));
    writeFileSync(files.csv!, samplesCsv(sampler.samples));
    writeFileSync(files.svg!, drawChart(title, sampler.samples, marks));
    say(`written: ${out}, ${files.csv}, ${files.svg}`);
  } else {
    console.log(markdown(rr));
  }
}

let ok = false;
try {
  ok = await main();
} catch (e) {
  say(`failed: ${(e as Error).stack ?? String(e)}`);
} finally {
  await cleanup.run();
}
say(ok ? 'PASS' : 'FAIL');
process.exitCode = ok ? 0 : 1;
