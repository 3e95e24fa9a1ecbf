/**
 * The transport benchmark's markdown section: the saturation climb, the headline table (all
 * inproc against hot in proxy at the saturation load, with ratios), the proxy's own climb,
 * the auto run, and what the numbers say about the issue's goals, written from the numbers.
 */
import { execFileSync } from 'node:child_process';
import { cpus, release } from 'node:os';

import { STORE_SETTINGS } from '../ingest/store.ts';
import type { BenchResult, CompareRun, ReportContext, Step } from './results.ts';
import type { DrainResult } from './session.ts';
import type { WindowStats } from './window.ts';

const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const pct = (cpuSeconds: number, w: WindowStats): string => f((cpuSeconds / w.seconds) * 100, 0);
/** CPU seconds per GB (10^9 bytes) read in the window. */
const perGB = (cpuSeconds: number, w: WindowStats): number => cpuSeconds / ((w.readMBps * w.seconds) / 1000);
/** Other work's share of a core in the window, marked when over the limit, and which attempt it was. */
const otherCell = (w: WindowStats, limit: number): string =>
  `${pct(Math.max(0, w.cpu.other), w)}${w.cpu.other / w.seconds > limit ? ' ⚠' : ''}${w.attempts > 1 ? `, try ${w.attempts}` : ''}`;
const ratio = (a: number, b: number, digits = 1): string => (Number.isFinite(a / b) && b !== 0 ? `${(a / b).toFixed(digits)}×` : 'n/a');

function sshVersionText(): string {
  try {
    return execFileSync('sh', ['-c', 'ssh -V 2>&1'], { encoding: 'utf8' }).trim();
  } catch {
    return 'OpenSSH';
  }
}

/**
 * The highest ladder rate (MB/s per hot server) with a window kept up, the highest read rate
 * of such a window, and the highest read rate of a window not kept up (overloaded).
 */
function throughput(windows: ReadonlyArray<{ hotMBps: number; stats: WindowStats; keptUp: boolean }>): {
  step: number;
  sustained: number;
  ceiling: number | null;
  ceilingStep: number;
} {
  let step = NaN;
  let sustained = NaN;
  let ceiling: number | null = null;
  let ceilingStep = NaN;
  for (const w of windows) {
    if (w.keptUp && !(w.hotMBps < step)) step = w.hotMBps;
    if (w.keptUp && !(w.stats.readMBps <= sustained)) sustained = w.stats.readMBps;
    if (!w.keptUp && !(w.stats.readMBps <= (ceiling ?? -1))) {
      ceiling = w.stats.readMBps;
      ceilingStep = w.hotMBps;
    }
  }
  return { step, sustained, ceiling, ceilingStep };
}

/** Pearson's correlation coefficient. */
function correlation(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

function stepTable(steps: readonly Step[], withProxy: boolean, limit: number): string[] {
  return [
    `| MB/s per hot server | offered MB/s | read MB/s | read / offered | loop delay p50 / p99 / max, ms | collector, % of a core | collector thread waiting for a core, ms/s |${withProxy ? ' sidecar + ssh, % of a core |' : ''} machine busy, % of 200 (not ours) | paused streams |`,
    `|---:|---:|---:|---:|---:|---:|---:|${withProxy ? '---:|' : ''}---:|---:|`,
    ...steps.map(
      ({ hotMBps, stats: w, keptUp }) =>
        `| ${hotMBps} | ${f(w.offeredMBps)} | ${f(w.readMBps)} | ${f(w.keptUp * 100, 0)} %${keptUp ? '' : ' **saturated**'} | ${f(w.eld.p50, 1)} / ${f(w.eld.p99, 1)} / ${f(w.eld.max, 0)} | ${pct(w.cpu.collector, w)} | ${f(w.runQueueMsPerSec, 0)} |${withProxy ? ` ${pct(w.cpu.sidecar + w.cpu.sshClients, w)} |` : ''} ${pct(w.cpu.machineBusy, w)} (${otherCell(w, limit)}) | ${w.pausedMax} |`,
    ),
  ];
}

/** The two climbs side by side, rate by rate: loop delay and CPU as the load grows. */
function byRate(inproc: readonly Step[] | null, proxy: readonly Step[] | null): string[] {
  if (inproc === null || proxy === null) return [];
  const pairs = inproc.flatMap((x) => {
    const y = proxy.find((p) => p.hotMBps === x.hotMBps);
    return y === undefined ? [] : [{ rate: x.hotMBps, x: x.stats, y: y.stats, kx: x.keptUp, ky: y.keptUp }];
  });
  if (pairs.length === 0) return [];
  const kept = (k: boolean): string => (k ? '' : ' (sat.)');
  return [
    '**Both climbs, rate by rate** (same ladder, a fresh session per rate):',
    '',
    '| MB/s per hot server | read MB/s inproc / proxy | loop p50 ms inproc / proxy | loop p99 ms inproc / proxy | p99 inproc / proxy | loop max ms inproc / proxy | collector s/GB inproc / proxy | + sidecar + ssh s/GB, proxy |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...pairs.map(
      ({ rate, x, y, kx, ky }) =>
        `| ${rate} | ${f(x.readMBps)}${kept(kx)} / ${f(y.readMBps)}${kept(ky)} | ${f(x.eld.p50, 2)} / ${f(y.eld.p50, 2)} | ${f(x.eld.p99, 1)} / ${f(y.eld.p99, 1)} | ${ratio(x.eld.p99, y.eld.p99)} | ${f(x.eld.max, 0)} / ${f(y.eld.max, 0)} | ${f(perGB(x.cpu.collector, x), 1)} / ${f(perGB(y.cpu.collector, y), 1)} | ${f(perGB(y.cpu.collector + y.cpu.sidecar + y.cpu.sshClients, y), 1)} |`,
    ),
    '',
  ];
}

const drainText = (d: DrainResult): string =>
  `${d.complete ? 'complete' : '**incomplete**'} in ${f(d.seconds, 1)} s${d.readBytes > d.writtenBytes ? ` (${(d.readBytes - d.writtenBytes).toLocaleString('en-US')} bytes read twice: the unfinished entry at each transport switch, read again by the new stream)` : ''}; ${d.rows.toLocaleString('en-US')} rows for ${d.statements.toLocaleString('en-US')} entries written, ${d.distinctRows === d.rows ? 'each once' : `**${(d.rows - d.distinctRows).toLocaleString('en-US')} duplicated**`}; collector errors ${d.errors.collector}${
    d.errors.collector > 0
      ? ` (${Object.entries(d.errors.byCode)
          .filter(([, n]) => n > 0)
          .map(([c, n]) => `${c} ×${n}`)
          .join(
            ', ',
          )}${d.errors.beforeWriting === d.errors.collector ? ', all at start-up, before the writer started' : `, ${d.errors.beforeWriting} of them at start-up`})`
      : ''
  }, store errors ${d.errors.store}, parse problems ${d.errors.parseProblems}; SIGTERM → exit ${d.stop.code ?? d.stop.signal ?? 'none'} in ${f(d.stop.ms / 1000, 1)} s`;

/** A climb's step table and the drains of its sessions; nothing for a climb that was skipped. */
function climbLines(climb: readonly Step[] | null, withProxy: boolean, limit: number): string[] {
  if (climb === null) return [];
  return [...stepTable(climb, withProxy, limit), '', `Drains: ${drainsText(climb.map((st) => ({ label: `${st.hotMBps} MB/s`, drain: st.drain })))}.`, ''];
}

/** The drains of several sessions in one line: all complete and exact, or which were not. */
function drainsText(steps: ReadonlyArray<{ label: string; drain: DrainResult }>): string {
  const bad = steps.filter(
    (st) =>
      !st.drain.complete ||
      st.drain.distinctRows !== st.drain.rows ||
      st.drain.rows !== st.drain.statements ||
      st.drain.errors.store > 0 ||
      st.drain.errors.parseProblems > 0 ||
      st.drain.errors.collector > st.drain.errors.beforeWriting,
  );
  const rows = steps.reduce((n, st) => n + st.drain.rows, 0);
  const entries = steps.reduce((n, st) => n + st.drain.statements, 0);
  const startup = steps.reduce((n, st) => n + st.drain.errors.beforeWriting, 0);
  const head = `${steps.length} sessions, ${rows.toLocaleString('en-US')} rows for ${entries.toLocaleString('en-US')} entries written`;
  const tail = `${
    startup > 0
      ? `; ${startup} collector errors, all at start-up before the writer started (${[
          ...new Set(
            steps.flatMap((st) =>
              Object.entries(st.drain.errors.byCode)
                .filter(([, n]) => n > 0)
                .map(([c]) => c),
            ),
          ),
        ].join(', ')})`
      : ''
  }`;
  return bad.length === 0
    ? `${head}, every session drained completely with each entry stored once, no errors while writing${tail}`
    : `${head}; **not clean**: ${bad.map((st) => `${st.label}: ${drainText(st.drain)}`).join('; ')}`;
}

/** Fields that combine by their maximum; every other number is averaged over the sessions. */
const MAX_FIELDS = new Set(['max', 'p99Worst', 'pausedMax', 'slowestScrapeMs', 'backlogMB', 'backlogGrowthMB', 'attempts', 'sshProcesses']);

/** The windows of several sessions of one kind as one (equal windows: CPU / bytes stays the pooled ratio). */
function combine(ws: readonly WindowStats[]): WindowStats {
  const merge = (vals: readonly unknown[], key: string): unknown => {
    const first = vals[0];
    if (typeof first === 'number') {
      const ns = vals as number[];
      return MAX_FIELDS.has(key) ? Math.max(...ns) : ns.reduce((x, y) => x + y, 0) / ns.length;
    }
    if (first !== null && typeof first === 'object') {
      return Object.fromEntries(
        Object.keys(first).map((k) => [
          k,
          merge(
            vals.map((v) => (v as Record<string, unknown>)[k]),
            k,
          ),
        ]),
      );
    }
    return first;
  };
  return merge(ws, '') as WindowStats;
}

export function renderSection(r: BenchResult, ctx: ReportContext): string {
  const inprocRuns = r.compare.filter((c) => c.mode === 'inproc');
  const proxyRuns = r.compare.filter((c) => c.mode === 'proxy');
  const a = combine(inprocRuns.map((c) => c.main));
  const b = combine(proxyRuns.map((c) => c.main));
  const inprocTp = throughput([...(r.inprocClimb ?? []), ...inprocRuns.map((c) => ({ hotMBps: r.load, stats: c.main, keptUp: c.main.keptUp >= ctx.keepUp }))]);
  const proxyTp = throughput([...(r.proxyClimb ?? []), ...proxyRuns.map((c) => ({ hotMBps: r.load, stats: c.main, keptUp: c.main.keptUp >= ctx.keepUp }))]);
  const each = (runs: readonly CompareRun[], cell: (w: WindowStats) => string): string => runs.map((c) => cell(c.main)).join(', ');
  const satStep = r.inprocClimb?.find((st) => !st.keptUp);
  const row = (label: string, x: string, y: string, z = ''): string => `| ${label} | ${x} | ${y} | ${z} |`;
  const total = (w: WindowStats): number => w.cpu.collector + w.cpu.sidecar + w.cpu.sshClients;
  const p99Ratio = a.eld.p99 / b.eld.p99;
  const ceilingOf = (t: { ceiling: number | null; ceilingStep: number }, top: string): string =>
    t.ceiling === null ? `none (kept up to ${top})` : `${f(t.ceiling)} (at ${t.ceilingStep})`;
  const sameCeilingStep = inprocTp.ceiling !== null && proxyTp.ceiling !== null && inprocTp.ceilingStep === proxyTp.ceilingStep;
  const top = (c: readonly Step[] | null): string => `${c?.[c.length - 1]?.hotMBps ?? r.load} MB/s per hot server`;
  const topInproc = top(r.inprocClimb);
  const topProxy = top(r.proxyClimb);

  const headline = [
    `| at ${r.load} MB/s per hot server${r.compare.length > 2 ? `, mean of ${inprocRuns.length} sessions each` : ''} | all inproc | ${ctx.hot} hot in proxy | inproc / proxy |`,
    '|---|---:|---:|---:|',
    row('offered, MB/s (hot servers)', `${f(a.offeredMBps)} (${f(a.offeredHotMBps)})`, `${f(b.offeredMBps)} (${f(b.offeredHotMBps)})`),
    row(
      'read by the collector, MB/s (% of offered)',
      `${f(a.readMBps)} (${f(a.keptUp * 100, 0)} %)`,
      `${f(b.readMBps)} (${f(b.keptUp * 100, 0)} %)`,
      ratio(a.readMBps, b.readMBps, 2),
    ),
    row("… of it through the sidecar's FIFOs, MB/s", f(a.fifoMBps), f(b.fifoMBps)),
    row(
      'unread backlog at the window end, MB (growth in the window)',
      `${f(a.backlogMB)} (${f(a.backlogGrowthMB)})`,
      `${f(b.backlogMB)} (${f(b.backlogGrowthMB)})`,
    ),
    row('streams paused for the store (max)', String(a.pausedMax), String(b.pausedMax)),
    row("collector's main thread runnable but without a core, ms per s", f(a.runQueueMsPerSec, 0), f(b.runQueueMsPerSec, 0)),
    row('**event-loop delay p50, ms**', f(a.eld.p50, 2), f(b.eld.p50, 2), ratio(a.eld.p50, b.eld.p50)),
    row('**event-loop delay p99, ms**', f(a.eld.p99, 2), f(b.eld.p99, 2), `**${ratio(a.eld.p99, b.eld.p99)}**`),
    ...(r.compare.length > 2
      ? [
          row(
            '… p99 of each session, ms (run in the order A B B A)',
            each(inprocRuns, (w) => f(w.eld.p99, 1)),
            each(proxyRuns, (w) => f(w.eld.p99, 1)),
          ),
        ]
      : []),
    row('event-loop delay p99.9, ms', f(a.eld.p999, 1), f(b.eld.p999, 1), ratio(a.eld.p999, b.eld.p999)),
    row(`**event-loop delay max, ms**${r.compare.length > 2 ? ' (worst session)' : ''}`, f(a.eld.max, 0), f(b.eld.max, 0), ratio(a.eld.max, b.eld.max)),
    row('… p99 with the 1 ms timer included (as Node records it)', f(a.eld.rawP99, 2), f(b.eld.rawP99, 2), ratio(a.eld.rawP99, b.eld.rawP99)),
    row(
      "… the collector's /metrics p99 (10 ms timer included): median / worst 1 s",
      `${f(a.metricsEld.p99Median, 1)} / ${f(a.metricsEld.p99Worst, 1)}`,
      `${f(b.metricsEld.p99Median, 1)} / ${f(b.metricsEld.p99Worst, 1)}`,
      ratio(a.metricsEld.p99Median, b.metricsEld.p99Median),
    ),
    row(
      '**collector CPU, s per GB read**',
      f(perGB(a.cpu.collector, a), 1),
      f(perGB(b.cpu.collector, b), 1),
      ratio(perGB(a.cpu.collector, a), perGB(b.cpu.collector, b), 2),
    ),
    row('collector CPU, % of one core', pct(a.cpu.collector, a), pct(b.cpu.collector, b)),
    row('sidecar (`pglog sshproxy`, node), s per GB', f(perGB(a.cpu.sidecar, a), 2), f(perGB(b.cpu.sidecar, b), 2)),
    row(`its OpenSSH clients (masters and streams: ${b.sshProcesses} ssh), s per GB`, f(perGB(a.cpu.sshClients, a), 1), f(perGB(b.cpu.sshClients, b), 1)),
    row(
      '**collector + sidecar + ssh clients, s per GB**',
      f(perGB(total(a), a), 1),
      f(perGB(total(b), b), 1),
      ratio(perGB(total(a), a), perGB(total(b), b), 2),
    ),
    row(
      `servers' side (sshd, sessions, the follower's remote loops; nice ${ctx.fleetNice}), s per GB`,
      f(perGB(a.cpu.fleet, a), 1),
      f(perGB(b.cpu.fleet, b), 1),
    ),
    row(
      'log writer / store (postgres) / this benchmark process, % of one core',
      `${pct(a.cpu.writer, a)} / ${pct(a.cpu.store, a)} / ${pct(a.cpu.bench, a)}`,
      `${pct(b.cpu.writer, b)} / ${pct(b.cpu.store, b)} / ${pct(b.cpu.bench, b)}`,
    ),
    row(
      `machine busy, % of ${a.cpu.cores * 100} (… of it not ours: other work, kernel threads)`,
      `${pct(a.cpu.machineBusy, a)} (${otherCell(a, ctx.disturbed)})`,
      `${pct(b.cpu.machineBusy, b)} (${otherCell(b, ctx.disturbed)})`,
    ),
    row(
      '**maximum sustained throughput, MB/s** (highest read rate of a window kept up; at MB/s per hot server)',
      `${f(inprocTp.sustained)} (at ${inprocTp.step})`,
      `${f(proxyTp.sustained)} (at ${proxyTp.step})`,
      `proxy / inproc **${ratio(proxyTp.sustained, inprocTp.sustained, 2)}**`,
    ),
    row(
      'highest read rate of a window not kept up (offered more than it read), MB/s (at MB/s per hot server)',
      ceilingOf(inprocTp, topInproc),
      ceilingOf(proxyTp, topProxy),
      sameCeilingStep ? `proxy / inproc ${ratio(proxyTp.ceiling!, inprocTp.ceiling!, 2)}` : 'at different loads',
    ),
    row(
      'drains',
      drainsText(inprocRuns.map((c, i) => ({ label: `session ${i + 1}`, drain: c.drain }))),
      drainsText(proxyRuns.map((c, i) => ({ label: `session ${i + 1}`, drain: c.drain }))),
    ),
  ];

  // What limited each side: the collector's own thread, or what it shares the machine with.
  const limit = (w: WindowStats): string => {
    const coll = (w.cpu.collector / w.seconds) * 100;
    const busy = (w.cpu.machineBusy / w.seconds) * 100;
    const facts = [
      `the collector used ${f(coll, 0)} % of one core and its thread waited ${f(w.runQueueMsPerSec, 0)} ms a second for a core`,
      `the machine was ${f(busy, 0)} of ${w.cpu.cores * 100} % busy (${f(Math.max(0, w.cpu.other / w.seconds) * 100, 0)} not ours)`,
    ];
    if (w.pausedMax > 0) facts.push(`up to ${w.pausedMax} streams waited for the store`);
    return `${facts.join(', ')}: ${coll >= 90 ? '**collector-bound** (its thread is full)' : '**not collector-bound**'}`;
  };
  const lastProxyStep = r.proxyClimb?.[r.proxyClimb.length - 1];
  const goals = [
    `- **Goal 1, at least 15 times lower p99 event-loop delay with the hot servers in the sidecar: ${p99Ratio >= 15 ? 'met' : 'not met'}** in this run: ${f(a.eld.p99, 2)} ms all inproc against ${f(b.eld.p99, 2)} ms hot in proxy (${ratio(a.eld.p99, b.eld.p99)}; p50 ${ratio(a.eld.p50, b.eld.p50)}, max ${ratio(a.eld.max, b.eld.max)}).`,
    `- **Goal 2, higher maximum throughput: ${proxyTp.step > inprocTp.step ? 'met' : proxyTp.step === inprocTp.step ? "not shown at this ladder's resolution" : 'not met'}** in this run: the highest step kept up was ${proxyTp.step === inprocTp.step ? `${inprocTp.step} MB/s per hot server for both` : `${inprocTp.step} MB/s per hot server all inproc and ${proxyTp.step} hot in proxy`}, reading at most ${f(inprocTp.sustained)} and ${f(proxyTp.sustained)} MB/s in a window kept up (${ratio(proxyTp.sustained, inprocTp.sustained, 2)})${inprocTp.ceiling !== null && proxyTp.ceiling !== null ? `; overloaded, all inproc read ${f(inprocTp.ceiling)} MB/s at ${inprocTp.ceilingStep} MB/s per hot server and hot in proxy ${f(proxyTp.ceiling)} MB/s at ${proxyTp.ceilingStep}${sameCeilingStep ? ` (${ratio(proxyTp.ceiling, inprocTp.ceiling, 2)})` : ' (different loads: not a ratio)'}` : ''}.`,
    `- What limited it: all inproc at the saturation load, ${limit(a)}; hot in proxy at the same load, ${limit(b)}${lastProxyStep !== undefined ? `; at the proxy's last step (${lastProxyStep.hotMBps} MB/s per hot server), ${limit(lastProxyStep.stats)}` : ''}.`,
    `- Where the CPU went, per GB read: all inproc ${f(perGB(a.cpu.collector, a), 1)} s in the collector; hot in proxy ${f(perGB(b.cpu.collector, b), 1)} s in the collector + ${f(perGB(b.cpu.sidecar, b), 2)} s in the sidecar + ${f(perGB(b.cpu.sshClients, b), 1)} s in its ssh clients = ${f(perGB(total(b), b), 1)} s (${ratio(perGB(total(b), b), perGB(total(a), a), 2)} the all-inproc total). The servers' side (sshd and the remote loops, the same commands for both transports) took ${f(perGB(a.cpu.fleet, a), 1)} and ${f(perGB(b.cpu.fleet, b), 1)} s per GB.`,
    ...(() => {
      // The proxy climb's overloaded step against the one before: what the ssh clients do when the streams wait.
      const climb = r.proxyClimb ?? [];
      const last = climb[climb.length - 1];
      const before = climb[climb.length - 2];
      if (last === undefined || before === undefined || last.keptUp) return [];
      return [
        `- When hot in proxy was overloaded (${last.hotMBps} MB/s per hot server, streams waiting for the store), its ssh clients took ${pct(last.stats.cpu.sshClients, last.stats)} % of a core for ${f(last.stats.fifoMBps)} MB/s through the FIFOs, against ${pct(before.stats.cpu.sshClients, before.stats)} % for ${f(before.stats.fifoMBps)} MB/s one step below, where it kept up.`,
      ];
    })(),
    ...(() => {
      const all = [
        ...(r.inprocClimb ?? []).map((st) => st.stats),
        ...(r.proxyClimb ?? []).map((st) => st.stats),
        ...r.compare.map((c) => c.main),
        r.auto.after,
      ];
      const rq = correlation(
        all.map((w) => w.runQueueMsPerSec),
        all.map((w) => w.eld.p99),
      );
      const load = correlation(
        all.map((w) => w.readMBps),
        all.map((w) => w.eld.p99),
      );
      const bound = all.some((w) => w.cpu.collector / w.seconds >= 0.9);
      return [
        `- Over all ${all.length} windows of this run, the p99 event-loop delay correlates with the time the collector's thread waited for a core at r = ${f(rq, 2)}, and with the rate it read at r = ${f(load, 2)}. ${bound ? "Some window had the collector's thread at 90 % of a core or more." : `The collector never used more than ${f(Math.max(...all.map((w) => (w.cpu.collector / w.seconds) * 100)), 0)} % of one core: **on this machine the load is machine-bound, not collector-bound.** At the saturation load (all inproc) the servers' side, the store and the log writer used ${pct(a.cpu.fleet + a.cpu.store + a.cpu.writer, a)} % of a core together against the collector's ${pct(a.cpu.collector, a)} %, on ${a.cpu.cores} cores; the collector stops keeping up (streams wait for the store, its thread waits for a core) long before its own thread is full, and the saturated-collector regime in which the issue saw the event-loop gap open (ssh2 p50 21 ms against 1.2 ms for FIFOs) is not reached here.`}`,
      ];
    })(),
  ];

  const au = r.auto;
  const promotedAfter = [...au.promotedAfterSeconds].sort((x, y) => x - y);
  const switchMs = [...au.switchMs].sort((x, y) => x - y);
  const autoLines = [
    `- **auto** (every target \`auto\`, \`${ctx.autoArgs.join(' ')}\`, hot servers at ${au.hotMBps} MB/s = ${f(au.hotMBps * 8, 0)} Mbit/s each, cold at ${f((ctx.coldBps * 8) / 1e6, 2)} Mbit/s; promotion above 1.25 Mbit/s, demotion below 0.75): ` +
      `${au.promotedHot} of ${ctx.hot} hot targets promoted, ${au.promotedCold} of ${ctx.cold} cold ones; ${au.promotionsTotal} promotions and ${au.demotionsTotal} demotions in all; reading through proxy at the end: ${au.proxyAtEnd.hot} hot, ${au.proxyAtEnd.cold} cold. ` +
      `${promotedAfter.length > 0 ? `The hot targets read through the sidecar ${f(promotedAfter[0]!, 0)} to ${f(promotedAfter[promotedAfter.length - 1]!, 0)} s after the writer started (dwell 5 s from the collector's start, rate τ 3 s); each switch read again after ${f(switchMs[0] ?? NaN, 0)} to ${f(switchMs[switchMs.length - 1] ?? NaN, 0)} ms. ` : ''}` +
      `Afterwards (${f(au.after.seconds, 0)} s window): read ${f(au.after.readMBps)} of ${f(au.after.offeredMBps)} MB/s offered, ${f(au.after.fifoMBps)} through FIFOs, event-loop delay p50 / p99 / max ${f(au.after.eld.p50, 2)} / ${f(au.after.eld.p99, 2)} / ${f(au.after.eld.max, 0)} ms. Drain: ${drainText(au.drain)}.`,
  ];

  const settings = Object.entries(STORE_SETTINGS)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
  const args = ctx.collectorArgs.length === 0 ? 'default options' : `\`${ctx.collectorArgs.join(' ')}\``;
  return [
    '<!-- transport-bench:start -->',
    '## Transports under load: all inproc against the hot servers in the sidecar (bench/transport-bench.ts)',
    '',
    `${ctx.hot + ctx.cold} local OpenSSH servers (127.0.0.2 and up, at nice ${ctx.fleetNice} with everything they fork, standing in for the database servers' own CPU), one log each, appended to by a separate log-writer process ` +
      `(pgbench-like stderr entries, ~150 bytes, small writes every 10 ms): ${ctx.hot} **hot** servers at the rate under test, ${ctx.cold} **cold** at ${f(ctx.coldBps / 1e3, 0)} kB/s each. ` +
      `One \`pglog collect\` (the real CLI, ${args}, standalone: its \`pglog sshproxy\` child runs the OpenSSH clients) reads them all through the full pipeline: SSH, parsing, COPY into a PostgreSQL 15 store on the same machine (fsync off, ${settings}). ` +
      `Every session is a fresh collector on fresh logs with the store's event tables emptied, and ends with a drain: everything written read, each entry stored once. **1.** All targets pinned \`inproc\`; the hot rate climbs ${ctx.ladder.join(', ')} MB/s per server, a session per rate (${ctx.settleSeconds} s warm-up, an ${ctx.stepSeconds} s window), until the collector reads less than ${f(ctx.keepUp * 100, 0)} % of what is written in the window: the saturation load. ` +
      `**2.** At that load, all \`inproc\` and the ${ctx.hot} hot targets pinned \`proxy\` (cold ones \`inproc\`), ${ctx.rounds} session${ctx.rounds === 1 ? '' : 's'} each${ctx.rounds > 1 ? ' in the order A B B A' : ''}, each ${ctx.warmupSeconds} s warm-up and a ${ctx.measureSeconds} s window; then hot in proxy climbs the ladder as all inproc did. **3.** All targets \`auto\`, one ladder step below the saturation load. ` +
      `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'} ${ctx.pin === undefined ? 'for everything (servers, writer, store, collector, sidecar, ssh clients)' : `with the collector's process alone on CPU ${ctx.pin.core} (taskset, every thread) and everything else, its sidecar and ssh clients included, on CPU ${ctx.pin.others}`}, Linux ${release()}, Node ${process.version}, ${sshVersionText()}. Measured ${new Date().toISOString().slice(0, 10)}, ${f(ctx.totalSeconds / 60, 1)} min in all. MB = 10^6 bytes, GB = 10^9.`,
    '',
    r.inprocClimb === null
      ? `**Finding the saturation load**: skipped (\`--load ${r.load}\`).`
      : `**Finding the saturation load** (all inproc)${r.saturated === true ? `: saturated at ${r.load} MB/s per hot server (${f(satStep?.stats.offeredMBps ?? NaN)} MB/s offered in all).` : ': **the collector kept up to the top of the ladder**, so the comparison runs at the top rate.'}`,
    '',
    ...climbLines(r.inprocClimb, false, ctx.disturbed),
    `**At the saturation load**, side by side (fresh sessions, ${ctx.warmupSeconds} s warm-up, ${ctx.measureSeconds} s window):`,
    '',
    ...headline,
    '',
    r.proxyClimb === null ? '**Hot in proxy climbing**: skipped (`--no-proxy-climb`).' : '**Hot in proxy climbing** the same ladder, as all inproc did above:',
    '',
    ...climbLines(r.proxyClimb, true, ctx.disturbed),
    ...byRate(r.inprocClimb, r.proxyClimb),
    ...goals,
    ...autoLines,
    `- A window in which other work on the machine (anything outside this benchmark's processes: the kernel's threads, other people's jobs) took more than ${f(ctx.disturbed * 100, 0)} % of a core is measured again, up to ${ctx.retries} times; "try N" marks a repeated window and ⚠ one still over the limit. "Collector thread waiting for a core" is the run-queue time of its main thread (/proc schedstat): on a full machine the event loop is late because its thread is not running, whatever the loop does.`,
    `- Event-loop delay: perf_hooks.monitorEventLoopDelay with a 1 ms timer, preloaded into the collector for the benchmark (bench/transport/eld-probe.ts, \`NODE_OPTIONS=--import\`), over exactly the window; figures are the delay beyond the 1 ms timer, as in the fifo-bench section. A blocked loop counts once per block, not per millisecond blocked. The collector's own /metrics histogram (10 ms timer, reset at each 1 s scrape) is shown as a cross-check.`,
    `- CPU from /proc: the collector process (all its threads) alone; the sidecar (the collector's child whose command line is \`pglog sshproxy\`) alone; its ssh clients with the shells that exec them, including children already reaped; the servers' side as the trees of the sshd listeners. Throughput is \`pglog_read_bytes_total\` (log bytes read, both transports); a window is kept up when it reads at least ${f(ctx.keepUp * 100, 0)} % of what was written in it. "Not ours" is the machine's busy time (/proc/stat) minus every process of this benchmark, shown as 0 when clock-tick rounding makes it slightly negative.`,
    '<!-- transport-bench:end -->',
  ].join('\n');
}
