/**
 * Transport benchmark (issue 4's headline): does moving the hot servers to the sshproxy
 * sidecar take their SSH work off the collector's event loop, under the load where it matters?
 *
 *   node bench/transport-bench.ts [--hot 8] [--cold 32] [--cold-kbps 50]
 *        [--ladder 0.5,1,1.5,2,2.5,3,3.5,4,5,6,8] [--step-seconds 8] [--settle 3]
 *        [--warmup 5] [--seconds 15] [--keep-up 0.95] [--auto-seconds 25] [--fleet-nice 10]
 *        [--load R] [--no-proxy-climb] [--rounds 2] [--retries 2] [--disturbed 0.1]
 *        [--collector-arg ARG ...] [--pin-collector CORE] [--out FILE.md] [--keep] [--verbose]
 *
 * 40 real OpenSSH servers on 127.0.0.2 upwards (bench/ingest/servers.ts, at --fleet-nice),
 * one log each, appended to by a log-writer process at a rate per server: --hot servers at the
 * ladder's rate (MB/s each), the others at --cold-kbps. One PostgreSQL store. The full
 * pipeline: SSH, parse, COPY into the store, through the real `pglog collect` CLI with its
 * standalone `pglog sshproxy` child.
 *
 * 1. Saturation: every target pinned `inproc`; the hot rate climbs the ladder, a fresh session
 *    per step (--settle, then a --step-seconds window), until the collector reads less than
 *    --keep-up of what is written: that offered load is the all-inproc saturation point
 *    (--load R skips this and uses R).
 * 2. At that load, fresh collectors one after the other (fresh logs, same warm-up and
 *    window): all `inproc`, and the hot servers pinned `proxy` with the cold ones `inproc`,
 *    --rounds times each in A B B A order.
 *    Event-loop delay, CPU per GB (collector, sidecar, ssh clients, servers), throughput.
 *    Then hot-in-proxy climbs the same ladder from its bottom, as all inproc did in 1
 *    (--no-proxy-climb skips it): its maximum sustained throughput.
 * 3. `auto` everywhere (--min-dwell 5000 --rate-window 3000) one ladder step below the
 *    saturation load: the hot servers are promoted to the sidecar, the cold ones stay.
 * Every session ends with a drain: everything written read, every entry stored exactly once.
 * The store's event tables are emptied before each session so that none inserts into a
 * bigger table than the one before. Every window also records the CPU of everything else on
 * the machine (the section shows it as "not ours"): this machine's 2 cores are shared with
 * whatever else runs, and a window disturbed by other work says so.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { sleep } from '@pglog/test-support/wait.ts';
import pg from 'pg';

import { FLEET_BENCH_OPTIONS, fleetBench, startStoreAndFleet } from './ingest/servers.ts';
import { emptyEventTables } from './ingest/store.ts';
import { runCleanup } from './lib/cleanup.ts';
import { pinningOption } from './transport/pinning.ts';
import { parentPid } from './transport/proc-cpu.ts';
import { renderSection } from './transport/report.ts';
import type { AutoResult, BenchResult, Step } from './transport/results.ts';
import { type DrainResult, Session, type SessionOptions, type Transport } from './transport/session.ts';
import { type WindowStats, windowStats } from './transport/window.ts';

const { values } = parseArgs({
  options: {
    hot: { type: 'string', default: '8' },
    cold: { type: 'string', default: '32' },
    'cold-kbps': { type: 'string', default: '50' },
    ladder: { type: 'string', default: '0.5,1,1.5,2,2.5,3,3.5,4,5,6,8' },
    'step-seconds': { type: 'string', default: '8' },
    settle: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '15' },
    'keep-up': { type: 'string', default: '0.95' },
    'auto-seconds': { type: 'string', default: '25' },
    load: { type: 'string' },
    retries: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '2' },
    disturbed: { type: 'string', default: '0.1' },
    'no-proxy-climb': { type: 'boolean', default: false },
    ...FLEET_BENCH_OPTIONS,
  },
});
const hotCount = Number(values.hot);
const coldCount = Number(values.cold);
const coldBps = Number(values['cold-kbps']) * 1e3;
const ladder = values.ladder.split(',').map(Number);
const stepSeconds = Number(values['step-seconds']);
const settleSeconds = Number(values.settle);
const warmupSeconds = Number(values.warmup);
const measureSeconds = Number(values.seconds);
const keepUp = Number(values['keep-up']);
const autoSeconds = Number(values['auto-seconds']);
const fleetNice = Number(values['fleet-nice']);
/** --load R: skip the all-inproc climb and compare at R MB/s per hot server (a ladder rate). */
const fixedLoad = values.load === undefined ? undefined : Number(values.load);
const retries = Number(values.retries);
const rounds = Number(values.rounds);
const disturbed = Number(values.disturbed);
const collectorArgs = values['collector-arg'];
if (
  !Number.isInteger(hotCount) ||
  hotCount < 1 ||
  !Number.isInteger(coldCount) ||
  coldCount < 0 ||
  !(coldBps >= 0) ||
  ladder.length === 0 ||
  ladder.some((r) => !(r > 0)) ||
  ladder.some((r, i) => i > 0 && r <= ladder[i - 1]!) ||
  !(stepSeconds > 0) ||
  !(settleSeconds >= 0) ||
  !(warmupSeconds >= 0) ||
  !(measureSeconds > 0) ||
  !(keepUp > 0 && keepUp <= 1) ||
  !(autoSeconds > 0) ||
  !Number.isInteger(retries) ||
  retries < 0 ||
  !Number.isInteger(rounds) ||
  rounds < 1 ||
  !(disturbed > 0) ||
  (fixedLoad !== undefined && !ladder.includes(fixedLoad)) ||
  !Number.isInteger(fleetNice) ||
  fleetNice < 0 ||
  fleetNice > 19
) {
  throw new Error(
    'usage: transport-bench.ts [--hot N] [--cold N] [--cold-kbps K] [--ladder R,R,... (MB/s per hot server, increasing)] [--step-seconds S] [--settle S] [--warmup S] [--seconds S] [--keep-up F] [--auto-seconds S] [--load R] [--no-proxy-climb] [--rounds N] [--retries N] [--disturbed F] [--fleet-nice N] [--collector-arg ARG ...] [--pin-collector CORE] [--out FILE.md] [--keep] [--verbose]',
  );
}
// --pin-collector CORE: the collector alone on CORE, everything else on this process's CPUs (pinning.ts).
const pin = await pinningOption(values['pin-collector']);
const serverCount = hotCount + coldCount;
const AUTO_ARGS = ['--min-dwell', '5000', '--rate-window', '3000'];

const { say, cleanups, root } = fleetBench('transport-bench', serverCount, values.keep, 'collector logs in */collector.log');

const isHot = (i: number): boolean => i < hotCount;
const ratesAt = (hotMBps: number): number[] => Array.from({ length: serverCount }, (_, i) => (isHot(i) ? hotMBps * 1e6 : coldBps));
const transportsOf = (hot: Transport, cold: Transport): Transport[] => Array.from({ length: serverCount }, (_, i) => (isHot(i) ? hot : cold));

/** A settle (the new rate reaches steady state), then a measured window. */
async function measureOnce(s: Session, hot: ReadonlySet<string>, settle: number, seconds: number): Promise<WindowStats> {
  await sleep(settle * 1000);
  s.alive();
  const a = await s.snapshot();
  await s.eld(); // resets the probe's histogram: what follows is this window's
  await sleep(seconds * 1000);
  s.alive();
  const eld = await s.eld();
  const b = await s.snapshot();
  return windowStats(a, b, eld, s.metricsBetween(a.at, b.at), hot, s.names);
}

/**
 * measureOnce, again (up to --retries times) while the window was disturbed: other work on
 * the machine (anything that is not this benchmark's processes) took more than
 * --disturbed of one core. The two cores are shared; a comparison of two windows means
 * little if one of them ran next to somebody's test suite.
 */
async function measure(s: Session, hot: ReadonlySet<string>, settle: number, seconds: number): Promise<WindowStats> {
  let w = await measureOnce(s, hot, settle, seconds);
  for (let attempt = 2; attempt <= 1 + retries && w.cpu.other / w.seconds > disturbed; attempt++) {
    say(
      `  window disturbed: other work took ${((w.cpu.other / w.seconds) * 100).toFixed(0)} % of a core (read ${w.readMBps.toFixed(1)} of ${w.offeredMBps.toFixed(1)} MB/s, loop p99 ${w.eld.p99.toFixed(1)} ms); measuring again`,
    );
    w = { ...(await measureOnce(s, hot, 1, seconds)), attempts: attempt };
  }
  return w;
}

const stepLine = (label: string, w: WindowStats): string =>
  `  ${label}: offered ${w.offeredMBps.toFixed(1)} MB/s, read ${w.readMBps.toFixed(1)} MB/s (${(w.keptUp * 100).toFixed(0)} %), loop p50/p99/max ${w.eld.p50.toFixed(1)}/${w.eld.p99.toFixed(1)}/${w.eld.max.toFixed(0)} ms, collector ${((w.cpu.collector / w.seconds) * 100).toFixed(0)} % (sidecar ${((w.cpu.sidecar / w.seconds) * 100).toFixed(0)} %, ssh ${((w.cpu.sshClients / w.seconds) * 100).toFixed(0)} %), machine ${((w.cpu.machineBusy / w.seconds) * 100).toFixed(0)} % (not ours ${((w.cpu.other / w.seconds) * 100).toFixed(0)} %), collector waited for a core ${w.runQueueMsPerSec.toFixed(0)} ms/s, paused ${w.pausedMax}`;

const started = Date.now();
let result: BenchResult | null = null;
try {
  const { store, fleet } = await startStoreAndFleet(serverCount, fleetNice, cleanups, say);
  // The store's postmaster (the parent of a backend): its process tree is the store's CPU.
  const storePid = await (async () => {
    const c = new pg.Client({ connectionString: store.url });
    await c.connect();
    try {
      const backend = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const parent = parentPid(backend);
      if (parent === null) throw new Error("cannot find the store's postmaster");
      return parent;
    } finally {
      await c.end();
    }
  })();
  const hotNames = new Set(Array.from({ length: hotCount }, (_, i) => `db${String(i + 1).padStart(2, '0')}`));

  let sessionNo = 0;
  const session = async (transports: Transport[], hotMBps: number, extraArgs: readonly string[]): Promise<{ s: Session; done: () => Promise<void> }> => {
    sessionNo++;
    // Every session inserts into empty event tables (none pays for a bigger index than another).
    await emptyEventTables(store.url);
    const local = runCleanup(cleanups);
    const o: SessionOptions = {
      dir: join(root, `s${sessionNo}`),
      servers: fleet.servers,
      instance: `tb${sessionNo}`,
      storeUrl: store.url,
      storePid,
      transports,
      rates: ratesAt(hotMBps),
      collectorArgs: [...collectorArgs, ...extraArgs],
      say,
      verbose: values.verbose,
      onCleanup: local.onCleanup,
      ...(pin === undefined ? {} : { pin }),
    };
    const s = await Session.open(o);
    return {
      s,
      done: async () => {
        await local.run();
        if (!values.keep) rmSync(o.dir, { recursive: true, force: true });
      },
    };
  };

  /**
   * Climbs the ladder from its bottom, one fresh session per step (fresh collector, fresh
   * logs, empty event tables: no step inherits a bigger store or a backlog from the one
   * before), until a step is not kept up.
   */
  const climb = async (mode: 'inproc' | 'proxy'): Promise<Step[]> => {
    const steps: Step[] = [];
    for (const hotMBps of ladder) {
      const p = await session(transportsOf(mode, 'inproc'), hotMBps, []);
      let stats: WindowStats;
      let drain: DrainResult;
      try {
        await p.s.startWriting();
        stats = await measure(p.s, hotNames, settleSeconds, stepSeconds);
        drain = await p.s.finish();
      } finally {
        await p.done();
      }
      const keptUp = stats.keptUp >= keepUp;
      steps.push({ hotMBps, stats, keptUp, drain });
      say(stepLine(`${mode} ${hotMBps} MB/s per hot server`, stats) + (keptUp ? '' : '  ← saturated'));
      if (!keptUp) break;
    }
    return steps;
  };

  // 1. All inproc, climbing until saturated.
  let inprocClimb: Step[] | null = null;
  let satIndex: number;
  if (fixedLoad === undefined) {
    say(
      `1. saturation: all ${serverCount} targets inproc, ${hotCount} hot climbing ${ladder.join(', ')} MB/s each, ${coldCount} cold at ${coldBps / 1e3} kB/s`,
    );
    inprocClimb = await climb('inproc');
    const saturated = inprocClimb.find((st) => !st.keptUp);
    satIndex = ladder.indexOf((saturated ?? inprocClimb[inprocClimb.length - 1]!).hotMBps);
    say(
      saturated === undefined
        ? `  inproc kept up to the top of the ladder (${ladder[satIndex]} MB/s per hot server): no saturation found`
        : `  inproc saturates at ${ladder[satIndex]} MB/s per hot server (${saturated.stats.offeredMBps.toFixed(1)} MB/s offered)`,
    );
  } else {
    satIndex = ladder.indexOf(fixedLoad);
    say(`1. skipped: --load ${fixedLoad}`);
  }
  const load = ladder[satIndex]!;

  // 2. At that load: all inproc and hot in proxy, each a fresh session, --rounds times in
  // A B B A order (so that neither always runs first, or on a machine warmer than the other).
  const compare: BenchResult['compare'] = [];
  const order = Array.from({ length: rounds }, (_, i) => (i % 2 === 0 ? (['inproc', 'proxy'] as const) : (['proxy', 'inproc'] as const))).flat();
  for (const [i, mode] of order.entries()) {
    say(
      `2. (${i + 1}/${order.length}) ${mode === 'inproc' ? 'all inproc' : `${hotCount} hot pinned proxy, ${coldCount} cold inproc`} at ${load} MB/s per hot server`,
    );
    const p = await session(transportsOf(mode, 'inproc'), load, []);
    try {
      await p.s.startWriting();
      const main = await measure(p.s, hotNames, warmupSeconds, measureSeconds);
      say(stepLine(`${mode} window`, main));
      compare.push({ mode, main, drain: await p.s.finish() });
    } finally {
      await p.done();
    }
  }

  // 2b. Hot in proxy climbing from the bottom, as all inproc did in 1.
  let proxyClimb: Step[] | null = null;
  if (!values['no-proxy-climb']) {
    say(`2b. ${hotCount} hot pinned proxy climbing ${ladder.join(', ')} MB/s each`);
    proxyClimb = await climb('proxy');
  }

  // 3. auto: the hot servers are promoted, the cold ones stay.
  const autoLoad = ladder[Math.max(0, satIndex - 1)]!;
  say(`3. auto (${AUTO_ARGS.join(' ')}) at ${autoLoad} MB/s per hot server`);
  const p3 = await session(transportsOf('auto', 'auto'), autoLoad, AUTO_ARGS);
  let auto: AutoResult;
  try {
    await p3.s.startWriting();
    const promotedAt = new Map<string, number>();
    const deadline = Date.now() + autoSeconds * 1000;
    let snap = await p3.s.snapshot();
    while (Date.now() < deadline) {
      await sleep(1000);
      snap = await p3.s.snapshot();
      for (const [target, transport] of snap.transportByTarget) {
        if (transport === 'proxy' && !promotedAt.has(target)) promotedAt.set(target, (snap.at - p3.s.writingSince) / 1000);
      }
      if ([...hotNames].every((n) => promotedAt.has(n))) break;
    }
    const after = await measure(p3.s, hotNames, 2, Math.min(measureSeconds, 8));
    say(stepLine('auto, after promotion', after));
    const last = await p3.s.snapshot();
    const moves = p3.s.logRecords().filter((r) => typeof r.msg === 'string' && / moving from \w+ to \w+ /.test(r.msg));
    const switched = p3.s
      .logRecords()
      .filter((r) => typeof r.switchMs === 'number')
      .map((r) => r.switchMs as number);
    const drain = await p3.s.finish();
    const count = (m: Map<string, number>, hot: boolean): number => [...m].filter(([t, v]) => hotNames.has(t) === hot && v > 0).length;
    auto = {
      hotMBps: autoLoad,
      promotedHot: count(last.promotions, true),
      promotedCold: count(last.promotions, false),
      promotionsTotal: [...last.promotions.values()].reduce((x, y) => x + y, 0),
      demotionsTotal: [...last.demotions.values()].reduce((x, y) => x + y, 0),
      proxyAtEnd: {
        hot: [...last.transportByTarget].filter(([t, tr]) => hotNames.has(t) && tr === 'proxy').length,
        cold: [...last.transportByTarget].filter(([t, tr]) => !hotNames.has(t) && tr === 'proxy').length,
      },
      promotedAfterSeconds: [...promotedAt].filter(([t]) => hotNames.has(t)).map(([, s]) => s),
      switchMs: switched,
      moves: moves.length,
      after,
      drain,
    };
  } finally {
    await p3.done();
  }

  result = { inprocClimb, proxyClimb, saturated: inprocClimb === null ? null : inprocClimb.some((st) => !st.keptUp), load, compare, auto };
} finally {
  await cleanups.run();
  say(`done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

if (result === null) throw new Error('no result');
const section = renderSection(result, {
  ...(pin === undefined ? {} : { pin }),
  hot: hotCount,
  cold: coldCount,
  coldBps,
  ladder,
  retries,
  disturbed,
  rounds,
  stepSeconds,
  settleSeconds,
  warmupSeconds,
  measureSeconds,
  keepUp,
  fleetNice,
  collectorArgs,
  autoArgs: AUTO_ARGS,
  totalSeconds: (Date.now() - started) / 1000,
});
process.stdout.write(`${section}\n`);
if (values.out !== undefined) {
  writeFileSync(values.out, `${section}\n`);
  say(`wrote ${values.out}`);
}
